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
#include <cstdint>
#include <vector>

#include "compress/compressors.h"

namespace cdt::compress {
namespace {

class Int8 : public SplitCompressor {
 public:
  Int8(size_t chunk, uint64_t seed) : chunk_(std::max<size_t>(1, chunk)), seed_(seed) {}
  std::string name() const override { return "int8"; }

  // Begin: the shared scales (waited for: the codes need them), the quantisation and the codes'
  // submission; End: their wait and the decoding.
  void Begin(Communicator& comm, float* grad, float* local, size_t n) override {
    grad_ = grad;
    n_ = n;
    if (n == 0) return;
    if (!seeded_) {  // independent rounding noise on every rank
      state_ = seed_ + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(comm.rank() + 1);
      seeded_ = true;
    }
    const size_t chunks = (n + chunk_ - 1) / chunk_;
    scale_.assign(chunks, 0.0f);
    for (size_t c = 0; c < chunks; ++c)
      for (size_t i = c * chunk_; i < std::min(n, (c + 1) * chunk_); ++i)
        scale_[c] = std::max(scale_[c], std::fabs(grad[i]));
    comm.Allreduce(scale_.data(), chunks, DataType::kFloat32, ReduceOp::kMax)->Wait();
    levels_ = static_cast<float>(std::max(1, 127 / comm.size()));
    const float levels = levels_;
    codes_.resize(n);
    for (size_t c = 0; c < chunks; ++c) {
      const size_t begin = c * chunk_, end = std::min(n, begin + chunk_);
      const float s = scale_[c];
      if (s == 0.0f || !std::isfinite(s)) {
        std::fill(codes_.begin() + static_cast<long>(begin),
                  codes_.begin() + static_cast<long>(end), 0);
        std::fill(local + begin, local + end, 0.0f);
        continue;
      }
      // levels / s overflows for a subnormal scale (a chunk of near-zero gradients); divide then.
      const float to_levels = levels / s, back = s / levels;
      const bool multiply = std::isfinite(to_levels);
      for (size_t i = begin; i < end; ++i) {
        const float v =
            multiply ? grad[i] * to_levels : grad[i] / s * levels;  // in [-levels, levels]
        const float lo = std::floor(v);
        const float q = std::clamp(lo + (Uniform() < v - lo ? 1.0f : 0.0f), -levels, levels);
        codes_[i] = static_cast<int8_t>(q);
        local[i] = q * back;
      }
    }
    work_ = comm.Allreduce(codes_.data(), n, DataType::kInt8, ReduceOp::kSum);
  }

  size_t End() override {
    if (auto w = std::move(work_)) w->Wait();
    const size_t n = n_, chunks = scale_.size();
    if (n == 0) return 0;
    float* grad = grad_;
    for (size_t c = 0; c < chunks; ++c) {
      const float back = scale_[c] / levels_;
      for (size_t i = c * chunk_; i < std::min(n, (c + 1) * chunk_); ++i)
        grad[i] = static_cast<float>(codes_[i]) * back;
    }
    return n + 4 * chunks;
  }
  ~Int8() override { WaitIgnoringError(work_); }

 private:
  // Uniform in [0, 1) with 24 random bits, from SplitMix64 (Steele et al., OOPSLA'14): one
  // multiply-xorshift chain per draw, against std::mt19937_64 + uniform_real_distribution, whose
  // generate_canonical was most of this compressor's time (bench compress).
  float Uniform() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<float>(z >> 40) * 0x1p-24f;
  }

  size_t chunk_;
  uint64_t seed_;
  bool seeded_ = false;
  uint64_t state_ = 0;
  std::vector<float> scale_;
  std::vector<int8_t> codes_;
  // Between Begin and End: the bucket, the levels and the codes' allreduce in flight.
  float* grad_ = nullptr;
  size_t n_ = 0;
  float levels_ = 1;
  std::shared_ptr<Work> work_;
};

}  // namespace

std::unique_ptr<Compressor> MakeInt8(size_t chunk, uint64_t seed) {
  return std::make_unique<Int8>(chunk, seed);
}

}  // namespace cdt::compress
