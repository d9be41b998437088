// "powersgd": PowerSGD (Vogels et al., NeurIPS'19; PyTorch's powerSGD_hook.py), one power
// iteration per step with a warm-started Q.
//
// Each matrix M (rows x cols) of the bucket worth compressing — (rows + cols) × r × 2 < rows ×
// cols, as PyTorch's min_compression_rate of 2 — is sent as two thin factors:
//   P = M Q            allreduce (all matrices' P in one buffer)
//   P = orthonormal(P) Gram-Schmidt, the same on every rank
//   Q = Mᵀ P           allreduce (one buffer)
//   M ≈ P Qᵀ           and Q is kept to start the next step (warm start).
// Everything else in the bucket (biases, small matrices) goes uncompressed, appended to P's buffer.
// A bucket whose matrices would save fewer than `min_saved_bytes` (16 KiB from `train`) goes
// uncompressed as a whole, in that one allreduce: Q's round trip would cost more than the bytes
// save (on the emulated 100 Mbit/s link the cnn's last bucket, 320 floats, waited two round trips
// at the end of every backward).
// Begin runs up to Q's submission and End decodes, so the trainer pipelines buckets: the next
// bucket's P queues behind this one's Q (compressor.h).
// Rank i's contribution to the result is P Pᵀ M_i (it sums to P Qᵀ): error feedback keeps
// M_i − P Pᵀ M_i. A sum of rank ≤ r is reproduced exactly. The first Q is drawn from a generator
// seeded identically on every rank. Wire: 4 (rows + cols) r bytes per matrix + 4 per other element.
//
// The three products are thin (r is 1..8), where a general GEMM spends its time packing: they are
// written row by row over Qᵀ (r x cols, so every row of M meets contiguous rows of Qᵀ) — M is read
// twice and the two results written once, all in unit stride. Checkpointed Q keeps the cols x r
// layout.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "cdt/error.h"
#include "compress/compressors.h"
#include "compress/kernels.h"

namespace cdt::compress {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<Matrix>;

// Which tensors of a bucket are sent as factors at rank r (the others go as they are).
struct Split {
  std::vector<size_t> compressed, plain;  // indices into the tensors
};
Split SplitBucket(const std::vector<TensorView>& tensors, size_t r, size_t min_saved_bytes) {
  Split s;
  size_t saved = 0;
  for (size_t t = 0; t < tensors.size(); ++t) {
    const TensorView& v = tensors[t];
    if (v.rows > 1 && v.cols > 1 && (v.rows + v.cols) * r * 2 < v.numel()) {
      s.compressed.push_back(t);
      saved += 4 * (v.numel() - (v.rows + v.cols) * r);
    } else {
      s.plain.push_back(t);
    }
  }
  if (saved < min_saved_bytes) {  // not worth Q's extra round trip: all in P's allreduce
    s.compressed.clear();
    s.plain.resize(tensors.size());
    std::iota(s.plain.begin(), s.plain.end(), size_t{0});
  }
  return s;
}

class PowerSgd : public SplitCompressor {
 public:
  PowerSgd(int rank, uint64_t seed, std::vector<TensorView> tensors, size_t min_saved_bytes)
      : r_(static_cast<size_t>(std::max(1, rank))), seed_(seed), tensors_(std::move(tensors)) {
    Split s = SplitBucket(tensors_, r_, min_saved_bytes);
    compressed_ = std::move(s.compressed);
    plain_ = std::move(s.plain);
  }
  std::string name() const override { return "powersgd"; }

  // Begin: P's allreduce, the orthogonalisation and Q's submission; End: Q's wait and M ≈ P Qᵀ.
  // A bucket without matrices worth compressing has P's allreduce as its last: End waits for it.
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    CheckLayout(n);
    grad_ = grad;
    plain_total_ = 0;
    for (size_t t : plain_) {
      plain_total_ += tensors_[t].numel();
      std::copy(grad + tensors_[t].offset, grad + tensors_[t].offset + tensors_[t].numel(),
                local + tensors_[t].offset);
    }
    if (qt_.size() != compressed_.size()) InitQ();

    // P = M Q for every matrix, in one buffer.
    p_total_ = q_total_ = 0;
    for (size_t j = 0; j < compressed_.size(); ++j) {
      p_total_ += tensors_[compressed_[j]].rows * r_;
      q_total_ += tensors_[compressed_[j]].cols * r_;
    }
    // The uncompressed part rides behind the P factors in the same allreduce: one round trip
    // less per bucket than allreducing it on its own (a bias shares its weight's bucket).
    p_buf_.assign(p_total_ + plain_total_, 0.0f);
    q_buf_.assign(q_total_, 0.0f);
    size_t plain_at = p_total_;
    for (size_t t : plain_) {
      std::copy(grad + tensors_[t].offset, grad + tensors_[t].offset + tensors_[t].numel(),
                p_buf_.begin() + static_cast<long>(plain_at));
      plain_at += tensors_[t].numel();
    }
    size_t p_at = 0, q_at = 0;
    for (size_t j = 0; j < compressed_.size(); ++j) {
      const TensorView& v = tensors_[compressed_[j]];
      MatrixMap m(grad + v.offset, static_cast<long>(v.rows), static_cast<long>(v.cols));
      MatrixMap p(p_buf_.data() + p_at, static_cast<long>(v.rows), static_cast<long>(r_));
      Project(m, qt_[j], p);  // P = M Q
      p_at += v.rows * r_;
    }
    if (!p_buf_.empty())
      work_ = comm.Allreduce(p_buf_.data(), p_buf_.size(), DataType::kFloat32, ReduceOp::kSum);
    if (q_total_ == 0) return;
    WaitForP();
    p_at = 0;
    for (size_t j = 0; j < compressed_.size(); ++j) {
      const TensorView& v = tensors_[compressed_[j]];
      MatrixMap m(grad + v.offset, static_cast<long>(v.rows), static_cast<long>(v.cols));
      MatrixMap p(p_buf_.data() + p_at, static_cast<long>(v.rows), static_cast<long>(r_));
      MatrixMap qt(q_buf_.data() + q_at, static_cast<long>(r_), static_cast<long>(v.cols));
      Orthonormalize(p);
      ProjectTransposed(m, p, qt);  // Qᵀ = (Mᵀ P)ᵀ
      MatrixMap mine(local + v.offset, static_cast<long>(v.rows), static_cast<long>(v.cols));
      Expand(p, qt, mine);  // P Pᵀ M_i
      p_at += v.rows * r_;
      q_at += v.cols * r_;
    }
    work_ = comm.Allreduce(q_buf_.data(), q_total_, DataType::kFloat32, ReduceOp::kSum);
  }

  size_t End() override {
    if (q_total_ == 0) {
      WaitForP();
      return 4 * plain_total_;
    }
    if (auto w = std::move(work_)) w->Wait();
    size_t p_at = 0, q_at = 0;
    for (size_t j = 0; j < compressed_.size(); ++j) {
      const TensorView& v = tensors_[compressed_[j]];
      MatrixMap m(grad_ + v.offset, static_cast<long>(v.rows), static_cast<long>(v.cols));
      MatrixMap p(p_buf_.data() + p_at, static_cast<long>(v.rows), static_cast<long>(r_));
      MatrixMap qt(q_buf_.data() + q_at, static_cast<long>(r_), static_cast<long>(v.cols));
      Expand(p, qt, m);  // M ≈ P Qᵀ
      qt_[j] = qt;       // warm start
      p_at += v.rows * r_;
      q_at += v.cols * r_;
    }
    return 4 * (p_total_ + q_total_ + plain_total_);
  }

  ~PowerSgd() override { WaitIgnoringError(work_); }

  // Q of every matrix, cols x r row-major each (the layout checkpoints have always had).
  std::vector<float> GetState() const override {
    std::vector<float> out;
    for (const Matrix& qt : qt_) {
      const Matrix q = qt.transpose();
      out.insert(out.end(), q.data(), q.data() + q.size());
    }
    return out;
  }
  // A state of another rank or layout (a resume with another --powersgd-rank, or adaptive's
  // rank then and now) is not ours: Q starts fresh. Loading it by offsets would put the columns
  // of other matrices into each warm start.
  std::string SetState(const std::vector<float>& s) override {
    if (s.empty()) return {};
    InitQ();
    size_t expected = 0;
    for (const Matrix& qt : qt_) expected += static_cast<size_t>(qt.size());
    if (s.size() != expected)
      return "PowerSGD's warm start (Q) does not fit this run's rank-" + std::to_string(r_) +
             " factors (written at another --powersgd-rank, or by --compress adaptive at another "
             "rank): Q starts fresh";
    size_t at = 0;
    for (Matrix& qt : qt_) {
      qt = Eigen::Map<const Matrix>(s.data() + at, qt.cols(), qt.rows()).transpose();
      at += static_cast<size_t>(qt.size());
    }
    return {};
  }

 private:
  void CheckLayout(size_t n) {
    if (tensors_.empty()) {  // no layout given: one vector, sent as it is
      tensors_.push_back({0, n, 1});
      plain_.push_back(0);
    }
    size_t covered = 0;
    for (const TensorView& v : tensors_) covered = std::max(covered, v.offset + v.numel());
    if (covered > n)
      throw Error(ErrorCode::kInvalidArgument, "powersgd: the bucket's tensors need " +
                                                   std::to_string(covered) + " elements, got " +
                                                   std::to_string(n));
  }

  // Draws Q (cols x r, row-major order of draws) and keeps its transpose.
  void InitQ() {
    std::mt19937_64 rng(seed_);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    qt_.clear();
    for (size_t t : compressed_) {
      Matrix q(static_cast<long>(tensors_[t].cols), static_cast<long>(r_));
      for (long i = 0; i < q.size(); ++i) q.data()[i] = normal(rng);
      qt_.push_back(q.transpose());
    }
  }

  // p = m qᵀᵀ: p(i, k) = m.row(i) · qt.row(k).
  static void Project(const MatrixMap& m, const Matrix& qt, MatrixMap& p) {
    const size_t cols = static_cast<size_t>(m.cols());
    for (long i = 0; i < m.rows(); ++i)
      for (long k = 0; k < qt.rows(); ++k) p(i, k) = kernels::Dot(&m(i, 0), &qt(k, 0), cols);
  }
  // qt = (mᵀ p)ᵀ: qt.row(k) = Σ_i p(i, k) m.row(i), a block of columns at a time so that the r
  // rows of qt being summed stay in the L1 cache.
  static void ProjectTransposed(const MatrixMap& m, const MatrixMap& p, MatrixMap& qt) {
    constexpr long kColumns = 1024;
    qt.setZero();
    for (long at = 0; at < m.cols(); at += kColumns) {
      const size_t width = static_cast<size_t>(std::min(kColumns, m.cols() - at));
      for (long i = 0; i < m.rows(); ++i)
        for (long k = 0; k < p.cols(); ++k) kernels::Axpy(p(i, k), &m(i, at), &qt(k, at), width);
    }
  }
  // out = p qt: out.row(i) = Σ_k p(i, k) qt.row(k).
  static void Expand(const MatrixMap& p, const MatrixMap& qt, MatrixMap& out) {
    const size_t cols = static_cast<size_t>(out.cols());
    for (long i = 0; i < out.rows(); ++i) {
      kernels::Scale(p(i, 0), &qt(0, 0), &out(i, 0), cols);
      for (long k = 1; k < p.cols(); ++k) kernels::Axpy(p(i, k), &qt(k, 0), &out(i, 0), cols);
    }
  }

  // Modified Gram-Schmidt on the columns; a column that vanishes (the matrix has lower rank)
  // becomes zero rather than noise.
  static void Orthonormalize(MatrixMap& p) {
    for (long c = 0; c < p.cols(); ++c) {
      for (long prev = 0; prev < c; ++prev) p.col(c) -= p.col(prev).dot(p.col(c)) * p.col(prev);
      const float norm = p.col(c).norm();
      if (norm > 1e-8f)
        p.col(c) /= norm;
      else
        p.col(c).setZero();
    }
  }

  // Waits for P's allreduce and copies the uncompressed part of the sum back into the gradient.
  void WaitForP() {
    if (auto w = std::move(work_)) w->Wait();
    size_t plain_at = p_total_;
    for (size_t t : plain_) {
      std::copy(p_buf_.begin() + static_cast<long>(plain_at),
                p_buf_.begin() + static_cast<long>(plain_at + tensors_[t].numel()),
                grad_ + tensors_[t].offset);
      plain_at += tensors_[t].numel();
    }
  }

  size_t r_;
  uint64_t seed_;
  std::vector<TensorView> tensors_;
  std::vector<size_t> compressed_, plain_;  // indices into tensors_
  std::vector<Matrix> qt_;                  // per compressed matrix: Qᵀ, r x cols
  std::vector<float> p_buf_, q_buf_;
  // Between Begin and End: the bucket, the factors' sizes and the collective in flight.
  float* grad_ = nullptr;
  size_t p_total_ = 0, q_total_ = 0, plain_total_ = 0;
  std::shared_ptr<Work> work_;
};

}  // namespace

size_t PowerSgdWireBytes(const std::vector<TensorView>& tensors, int rank, size_t min_saved_bytes) {
  const size_t r = static_cast<size_t>(std::max(1, rank));
  const Split s = SplitBucket(tensors, r, min_saved_bytes);
  size_t bytes = 0;
  for (size_t t : s.compressed) bytes += 4 * (tensors[t].rows + tensors[t].cols) * r;
  for (size_t t : s.plain) bytes += 4 * tensors[t].numel();
  return bytes;
}

std::unique_ptr<Compressor> MakePowerSgd(int rank, uint64_t seed, std::vector<TensorView> tensors,
                                         size_t min_saved_bytes) {
  return std::make_unique<PowerSgd>(rank, seed, std::move(tensors), min_saved_bytes);
}

}  // namespace cdt::compress
