// "randomk": every rank sends the same k = ceil(ratio × n) randomly chosen elements (the ranks
// draw the indices from a generator seeded with the seed and the call number), so the k
// values are summed by an ordinary allreduce and no index travels (Stich et al., NeurIPS'18,
// "Sparsified SGD with memory"). Unscaled: error feedback carries what was not sent. The values
// travel as float32 or, with CompressorOptions::sparse_values, as 16-bit floats summed in float32
// precision at every hop (the communicator's f16/bf16 reduction); this rank's contribution is its
// values as rounded, so error feedback keeps the rounding too. Wire: 4k bytes, or 2k.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class RandomK : public SplitCompressor {
 public:
  RandomK(double ratio, uint64_t seed, DataType values)
      : ratio_(ratio), seed_(seed), values_type_(values), value_bytes_(WireValueBytes(values)) {}
  std::string name() const override { return "randomk"; }

  // Begin: the draw, the values and the allreduce's submission; End: its wait and the scatter.
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    grad_ = grad;
    n_ = n;
    k_ = SparseCount(ratio_, n);
    const size_t k = k_;
    if (k == 0) return;
    rng_.seed(seed_ + 0x9E3779B97F4A7C15ull * ++calls_);
    pool_.resize(n);
    std::iota(pool_.begin(), pool_.end(), 0u);
    // Partial Fisher-Yates: the first d positions become a uniform sample of d. Past half the
    // elements, draw the n - k left out instead and keep the rest (the same distribution; at the
    // default 75% a third of the swaps, which are random accesses over the whole bucket).
    const size_t d = 2 * k > n ? n - k : k;
    for (size_t j = 0; j < d; ++j) {
      std::uniform_int_distribution<size_t> pick(j, n - 1);
      std::swap(pool_[j], pool_[pick(rng_)]);
    }
    kept_ = pool_.data() + (d == k ? 0 : d);
    const uint32_t* kept = kept_;
    values_.resize(k);
    for (size_t j = 0; j < k; ++j) values_[j] = grad[kept[j]];
    // float32 values travel as they are; 16-bit ones are rounded first, and this rank's
    // contribution is what it sends.
    const bool cast = values_type_ != DataType::kFloat32;
    if (cast) {
      wire_.resize(k * value_bytes_);
      EncodeWireValues(values_type_, values_.data(), wire_.data(), k);
      DecodeWireValues(values_type_, wire_.data(), values_.data(), k);
    }
    std::fill(local, local + n, 0.0f);
    for (size_t j = 0; j < k; ++j) local[kept[j]] = values_[j];
    void* wire = cast ? static_cast<void*>(wire_.data()) : values_.data();
    work_ = comm.Allreduce(wire, k, values_type_, ReduceOp::kSum);
  }

  size_t End() override {
    if (auto w = std::move(work_)) w->Wait();
    const size_t k = k_, n = n_;
    if (k == 0) return 0;
    const bool cast = values_type_ != DataType::kFloat32;
    const uint32_t* kept = kept_;
    float* grad = grad_;
    if (cast) DecodeWireValues(values_type_, wire_.data(), values_.data(), k);
    std::fill(grad, grad + n, 0.0f);
    for (size_t j = 0; j < k; ++j) grad[kept[j]] = values_[j];
    return value_bytes_ * k;
  }
  ~RandomK() override { WaitIgnoringError(work_); }

  // The call number keeps the draws in step on every rank, resume included (exact below 2^24).
  std::vector<float> GetState() const override { return {static_cast<float>(calls_)}; }
  std::string SetState(const std::vector<float>& s) override {
    if (s.empty()) return {};
    // Another compressor's state is not a call number: keep counting from here.
    if (s.size() != 1 || !(s[0] >= 0 && s[0] < 0x1p24f && s[0] == std::floor(s[0])))
      return "random-k's call number is not in the state: its draws count from " +
             std::to_string(calls_);
    calls_ = static_cast<uint64_t>(s[0]);
    return {};
  }

 private:
  double ratio_;
  uint64_t seed_;
  DataType values_type_;
  size_t value_bytes_;
  uint64_t calls_ = 0;
  std::mt19937_64 rng_;
  std::vector<uint32_t> pool_;
  std::vector<float> values_;
  std::vector<uint8_t> wire_;  // the values as they travel
  // Between Begin and End: the bucket, k, the kept indices (in pool_) and the allreduce in flight.
  float* grad_ = nullptr;
  size_t n_ = 0, k_ = 0;
  const uint32_t* kept_ = nullptr;
  std::shared_ptr<Work> work_;
};

}  // namespace

std::unique_ptr<Compressor> MakeRandomK(double ratio, uint64_t seed, DataType values) {
  return std::make_unique<RandomK>(ratio, seed, values);
}

}  // namespace cdt::compress
