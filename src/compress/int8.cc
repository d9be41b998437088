// "int8": 8-bit integers with a scale per chunk of `chunk` elements, summed in transit.
//
// To stay allreduce-compatible (QSGD's encodings are not: each rank's scale differs), the ranks
// first agree on a shared scale per chunk — the largest |g| any rank has there, one small max-
// allreduce — and quantise onto L = floor(127 / world) levels each side of zero, so the sum of
// all ranks' codes never leaves int8's range and the int8 allreduce adds them exactly. Rounding
// is stochastic (round up with probability equal to the fraction), so every code is an unbiased
// estimate of its input. Wire: n bytes + 4 bytes per chunk; precision shrinks with the world
// (127 levels at 1 rank, 31 at 4, 3 at 32 — past that, use a compressor that scales).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class Int8 : public Compressor {
 public:
  Int8(size_t chunk, uint64_t seed) : chunk_(std::max<size_t>(1, chunk)), seed_(seed) {}
  std::string name() const override { return "int8"; }

  size_t Reduce(Communicator& comm, float* grad, float* local, size_t n) override {
    if (n == 0) return 0;
    if (!seeded_) {  // independent rounding noise on every rank
      rng_.seed(seed_ + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(comm.rank() + 1));
      seeded_ = true;
    }
    const size_t chunks = (n + chunk_ - 1) / chunk_;
    scale_.assign(chunks, 0.0f);
    for (size_t c = 0; c < chunks; ++c)
      for (size_t i = c * chunk_; i < std::min(n, (c + 1) * chunk_); ++i)
        scale_[c] = std::max(scale_[c], std::fabs(grad[i]));
    comm.Allreduce(scale_.data(), chunks, DataType::kFloat32, ReduceOp::kMax)->Wait();
    const int levels = std::max(1, 127 / comm.size());
    codes_.resize(n);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (size_t i = 0; i < n; ++i) {
      const float s = scale_[i / chunk_];
      if (s == 0.0f || !std::isfinite(s)) {
        codes_[i] = 0;
        local[i] = 0;
        continue;
      }
      const float v = grad[i] / s * static_cast<float>(levels);  // in [-levels, levels]
      const float lo = std::floor(v);
      const float q = std::clamp(lo + (u(rng_) < v - lo ? 1.0f : 0.0f), -float(levels), float(levels));
      codes_[i] = static_cast<int8_t>(q);
      local[i] = q * s / static_cast<float>(levels);
    }
    comm.Allreduce(codes_.data(), n, DataType::kInt8, ReduceOp::kSum)->Wait();
    for (size_t i = 0; i < n; ++i)
      grad[i] = static_cast<float>(codes_[i]) * scale_[i / chunk_] / static_cast<float>(levels);
    return n + 4 * chunks;
  }

 private:
  size_t chunk_;
  uint64_t seed_;
  bool seeded_ = false;
  std::mt19937_64 rng_;
  std::vector<float> scale_;
  std::vector<int8_t> codes_;
};

}  // namespace

std::unique_ptr<Compressor> MakeInt8(size_t chunk, uint64_t seed) {
  return std::make_unique<Int8>(chunk, seed);
}

}  // namespace cdt::compress
