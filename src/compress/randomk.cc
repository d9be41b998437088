// "randomk": every rank sends the same k = ceil(ratio × n) randomly chosen elements (the ranks
// draw the indices from a generator seeded with the seed and the call number), so the k
// values are summed by an ordinary allreduce and no index travels (Stich et al., NeurIPS'18,
// "Sparsified SGD with memory"). Unscaled: error feedback carries what was not sent. Wire: 4k.
#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class RandomK : public Compressor {
 public:
  RandomK(double ratio, uint64_t seed) : ratio_(ratio), seed_(seed) {}
  std::string name() const override { return "randomk"; }

  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) override {
    const size_t k = SparseCount(ratio_, n);
    if (k == 0) return 0;
    rng_.seed(seed_ + 0x9E3779B97F4A7C15ull * ++calls_);
    pool_.resize(n);
    std::iota(pool_.begin(), pool_.end(), 0u);
    for (size_t j = 0; j < k; ++j) {  // partial Fisher-Yates: the first k are a uniform sample
      std::uniform_int_distribution<size_t> pick(j, n - 1);
      std::swap(pool_[j], pool_[pick(rng_)]);
    }
    values_.resize(k);
    std::fill(local, local + n, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      values_[j] = grad[pool_[j]];
      local[pool_[j]] = values_[j];
    }
    comm.Allreduce(values_.data(), k, DataType::kFloat32, ReduceOp::kSum)->Wait();
    std::fill(grad, grad + n, 0.0f);
    for (size_t j = 0; j < k; ++j) grad[pool_[j]] = values_[j];
    return 4 * k;
  }

  // The call number keeps the draws in step on every rank, resume included (exact below 2^24).
  std::vector<float> GetState() const override { return {static_cast<float>(calls_)}; }
  void SetState(const std::vector<float>& s) override {
    if (!s.empty()) calls_ = static_cast<uint64_t>(s[0]);
  }

 private:
  double ratio_;
  uint64_t seed_;
  uint64_t calls_ = 0;
  std::mt19937_64 rng_;
  std::vector<uint32_t> pool_;
  std::vector<float> values_;
};

}  // namespace

std::unique_ptr<Compressor> MakeRandomK(double ratio, uint64_t seed) {
  return std::make_unique<RandomK>(ratio, seed);
}

}  // namespace cdt::compress
