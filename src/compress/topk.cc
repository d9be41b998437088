// "topk": each rank sends its k = ceil(ratio × n) largest-magnitude elements as (index, value)
// pairs (Deep Gradient Compression, Lin et al. ICLR'18; its momentum correction is error
// feedback's, error_feedback.h; error feedback keeps the rest). The ranks' index sets differ, so
// the pairs cannot be summed in transit: they are allgathered and every rank adds them up, in
// rank order (the same bits everywhere). A payload is k int32 indices, then the k values as
// float32 or, with CompressorOptions::sparse_values, as 16-bit floats (padded to 4 bytes); this
// rank's contribution is its values as rounded, so error feedback keeps the rounding. Wire:
// (4 + b)k bytes per rank for b-byte values, and each rank receives (world − 1) times that — the
// volume grows with the world. When world × (4 + b)k would be no smaller than the dense bn bytes
// (k × world past density b / (4 + b)), the sparse vector is allreduced densely in the value
// type instead: the same result up to the rounding of 16-bit sums, fewer bytes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {

size_t SparseCount(double ratio, size_t n) {
  if (n == 0) return 0;
  const double k = std::ceil(std::clamp(ratio, 0.0, 1.0) * static_cast<double>(n));
  return std::clamp<size_t>(static_cast<size_t>(k), 1, n);
}

namespace {

class TopK : public SplitCompressor {
 public:
  TopK(double ratio, DataType values)
      : ratio_(ratio), values_type_(values), value_bytes_(WireValueBytes(values)) {}
  std::string name() const override { return "topk"; }

  // Begin: the selection, the encoding and the exchange's submission; End: its wait and the sum.
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    grad_ = grad;
    n_ = n;
    k_ = SparseCount(ratio_, n);
    world_ = static_cast<size_t>(comm.size());
    mode_ = Mode::kNothing;
    if (k_ == 0) return;
    const size_t k = k_;
    SelectLargest(grad, n, k);
    // The kept values as they travel, and as this rank's contribution.
    const size_t value_words = (k * value_bytes_ + 3) / 4;
    mine_.resize(k + value_words);
    kept_.resize(k);
    for (size_t j = 0; j < k; ++j) kept_[j] = grad[order_[j]];
    EncodeWireValues(values_type_, kept_.data(), mine_.data() + k, k);
    // This rank's contribution is what it sends: 16-bit values as rounded (float32 ones are).
    if (values_type_ != DataType::kFloat32)
      DecodeWireValues(values_type_, mine_.data() + k, kept_.data(), k);
    std::fill(local, local + n, 0.0f);
    for (size_t j = 0; j < k; ++j) local[order_[j]] = kept_[j];
    if (world_ * (4 + value_bytes_) * k >= value_bytes_ * n) {  // dense is no bigger
      mode_ = Mode::kDense;
      if (values_type_ == DataType::kFloat32) {  // in place, no conversion
        std::copy(local, local + n, grad);
        work_ = comm.Allreduce(grad, n, DataType::kFloat32, ReduceOp::kSum);
      } else {
        dense_.resize(n * value_bytes_);
        EncodeWireValues(values_type_, local, dense_.data(), n);
        work_ = comm.Allreduce(dense_.data(), n, values_type_, ReduceOp::kSum);
      }
      return;
    }
    mode_ = Mode::kSparse;
    for (size_t j = 0; j < k; ++j) mine_[j] = static_cast<int32_t>(order_[j]);
    all_.resize(mine_.size() * world_);
    work_ = comm.Allgather(mine_.data(), all_.data(), mine_.size(), DataType::kInt32);
  }

  size_t End() override {
    if (auto w = std::move(work_)) w->Wait();
    const size_t k = k_, n = n_;
    float* grad = grad_;
    switch (mode_) {
      case Mode::kNothing:
        return 0;
      case Mode::kDense:
        if (values_type_ != DataType::kFloat32)
          DecodeWireValues(values_type_, dense_.data(), grad, n);
        return value_bytes_ * n;
      case Mode::kSparse:
        break;
    }
    const size_t words = mine_.size();
    std::fill(grad, grad + n, 0.0f);
    for (size_t r = 0; r < world_; ++r) {
      const int32_t* block = all_.data() + r * words;
      DecodeWireValues(values_type_, block + k, kept_.data(), k);
      for (size_t j = 0; j < k; ++j) {
        const auto idx = static_cast<uint32_t>(block[j]);
        if (idx < n) grad[idx] += kept_[j];
      }
    }
    return (4 + value_bytes_) * k;
  }
  ~TopK() override { WaitIgnoringError(work_); }

 private:
  // Leaves the indices of the k largest |grad| in order_[0, k). Selecting among all n elements
  // (std::nth_element) took 100 ms on a 25 MiB gradient (bench compress), so, as DGC does, a
  // strided sample of the magnitudes gives a threshold expected to pass about 2k elements; one pass
  // keeps those, and the exact selection runs among them. Every element left out is below the
  // threshold, and at least k passed it, so the result is exactly the k largest (ties broken
  // either way); when fewer than k pass, the selection falls back to all n.
  void SelectLargest(const float* grad, size_t n, size_t k) {
    const auto larger = [grad](uint32_t a, uint32_t b) {
      return std::fabs(grad[a]) > std::fabs(grad[b]);
    };
    constexpr size_t kSample = 16384;
    order_.clear();
    if (n >= 4 * kSample && 4 * k <= n) {
      sample_.resize(kSample);
      for (size_t j = 0; j < kSample; ++j) sample_[j] = std::fabs(grad[j * (n / kSample)]);
      const size_t rank = std::min(kSample - 1, 2 * k * kSample / n);  // ~2k of n above it
      std::nth_element(sample_.begin(), sample_.begin() + static_cast<long>(rank), sample_.end(),
                       std::greater<float>());
      const float threshold = sample_[rank];
      for (size_t i = 0; i < n; ++i)
        if (std::fabs(grad[i]) >= threshold) order_.push_back(static_cast<uint32_t>(i));
    }
    if (order_.size() < k) {  // no sample (small n or dense k), or it overestimated
      order_.resize(n);
      std::iota(order_.begin(), order_.end(), 0u);
    }
    std::nth_element(order_.begin(), order_.begin() + static_cast<long>(k - 1), order_.end(),
                     larger);
  }

  double ratio_;
  DataType values_type_;
  size_t value_bytes_;
  std::vector<uint32_t> order_;
  std::vector<float> sample_, kept_;
  std::vector<int32_t> mine_, all_;  // payloads: k indices, then the values (padded to a word)
  std::vector<uint8_t> dense_;
  // Between Begin and End: the bucket, k, the world, which exchange and the collective in flight.
  enum class Mode { kNothing, kDense, kSparse };
  float* grad_ = nullptr;
  size_t n_ = 0, k_ = 0, world_ = 1;
  Mode mode_ = Mode::kNothing;
  std::shared_ptr<Work> work_;
};

}  // namespace

std::unique_ptr<Compressor> MakeTopK(double ratio, DataType values) {
  return std::make_unique<TopK>(ratio, values);
}

}  // namespace cdt::compress
