// Shared by the compressor tests (compress_test.cc, compress_state_test.cc): deterministic
// gradients every rank can recompute for the others, their exact sum, and options without error
// feedback.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "compress/compressor.h"

namespace cdt::compress {

// Rank r's gradient: deterministic, so every rank can compute the others' (for the exact sum).
inline std::vector<float> Gradient(int rank, size_t n, uint64_t step = 0) {
  std::mt19937_64 rng(1000 * static_cast<uint64_t>(rank) + 7 + 31 * step);
  std::normal_distribution<float> d(0.0f, 1e-2f);
  std::vector<float> g(n);
  for (auto& x : g) x = d(rng);
  return g;
}

inline std::vector<double> ExactSum(int world, size_t n, uint64_t step = 0) {
  std::vector<double> s(n, 0.0);
  for (int r = 0; r < world; ++r) {
    auto g = Gradient(r, n, step);
    for (size_t i = 0; i < n; ++i) s[i] += g[i];
  }
  return s;
}

inline CompressorOptions NoFeedback() {
  CompressorOptions o;
  o.error_feedback = false;
  o.ratio = 0.05;
  return o;
}

}  // namespace cdt::compress
