#include "topology/compression_advice.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>

#include "common/half.h"

namespace cdt::topology {

namespace {

// Elements per kernel measurement: large enough to leave the caches, small enough to be quick.
constexpr size_t kProbeElements = 1 << 22;  // 16 MiB of f32

template <typename F>
double TimeUs(F&& f) {
  f();  // warm the pages and the caches once
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 3; ++i) {
    auto start = std::chrono::steady_clock::now();
    f();
    best = std::min(
        best, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                  .count());
  }
  return best;
}

}  // namespace

KernelRates MeasureKernelRates() {
  std::vector<float> g(kProbeElements);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& x : g) x = normal(rng);
  KernelRates r;
  const double n = static_cast<double>(kProbeElements);
  std::vector<uint16_t> h(kProbeElements);
  r.fp16 = TimeUs([&] {
             for (size_t i = 0; i < g.size(); ++i) h[i] = FloatToHalf(g[i]);
             for (size_t i = 0; i < g.size(); ++i) g[i] = HalfToFloat(h[i]);
           }) /
           n;
  std::vector<int8_t> q(kProbeElements);
  r.int8 = TimeUs([&] {
             float amax = 0;
             for (float x : g) amax = std::max(amax, std::fabs(x));
             const float scale = amax > 0 ? 127.0f / amax : 0;
             for (size_t i = 0; i < g.size(); ++i)
               q[i] = static_cast<int8_t>(std::lrintf(g[i] * scale));
             for (size_t i = 0; i < g.size(); ++i) g[i] = q[i] / scale;
           }) /
           n;
  std::vector<float> mag(kProbeElements);
  r.topk = TimeUs([&] {
             for (size_t i = 0; i < g.size(); ++i) mag[i] = std::fabs(g[i]);
             std::nth_element(mag.begin(), mag.begin() + static_cast<long>(g.size() / 100),
                              mag.end(), std::greater<>());
           }) /
           n;
  volatile float sink = 0;
  r.fma = TimeUs([&] {
            float acc = 0;
            for (size_t i = 0; i < g.size(); ++i) acc += g[i] * mag[i];
            sink = acc;
          }) /
          n;
  (void)sink;
  return r;
}

CompressionAdvice AdviseCompression(const CostModel& model, const CompressionAdviceOptions& o) {
  return AdviseCompression(model, o, MeasureKernelRates());
}

CompressionAdvice AdviseCompression(const CostModel& model, const CompressionAdviceOptions& o,
                                    const KernelRates& k) {
  const double G = o.gradient_bytes;
  const double E = G / 4;  // f32 elements
  const double p = model.shape.world();
  CompressionAdvice a;
  a.candidates.push_back({"none", "f32", G, BestAllreduceUs(model, G), 0});
  a.candidates.push_back(
      {"fp16", "cast, reduced in f32", G / 2, BestAllreduceUs(model, G / 2), k.fp16 * E});
  // int8: reduce-scatter in f16 (no overflow) + allgather in int8 — half of each allreduce.
  a.candidates.push_back({"int8", "per-chunk scale, RS f16 + AG i8", G / 2,
                          0.5 * BestAllreduceUs(model, G / 2) + 0.5 * BestAllreduceUs(model, G / 4),
                          k.int8 * E});
  // PowerSGD on one sqrt(E) x sqrt(E) matrix: P and Q, r columns each, two allreduces; encode is
  // two (E x r) products plus a Gram-Schmidt of P, about 5·E·r multiply-adds.
  const double side = std::sqrt(E);
  const double factor_bytes = 4.0 * o.powersgd_rank * side;
  char rank_text[32];
  std::snprintf(rank_text, sizeof rank_text, "rank %d", o.powersgd_rank);
  a.candidates.push_back({"powersgd", rank_text, 2 * factor_bytes,
                          2 * BestAllreduceUs(model, factor_bytes),
                          5.0 * E * o.powersgd_rank * k.fma});
  // Top-k: (f32 value, i32 index) pairs by ring allgather (half of a ring allreduce of the total).
  const double pairs_bytes = 8.0 * std::max(1.0, o.topk_ratio * E);
  char ratio_text[32];
  std::snprintf(ratio_text, sizeof ratio_text, "ratio %g", o.topk_ratio);
  a.candidates.push_back({"topk", ratio_text, pairs_bytes,
                          0.5 * model.PredictUs(AllreduceAlgorithm::kRing, p * pairs_bytes),
                          k.topk * E});

  if (o.compute_budget_us) {
    a.recommended = -1;
    for (size_t i = 0; i < a.candidates.size(); ++i)
      if (a.candidates[i].total_us() <= *o.compute_budget_us) {
        a.recommended = static_cast<int>(i);
        break;
      }
    if (a.recommended >= 0) {
      a.reason =
          a.recommended == 0
              ? "the uncompressed allreduce already hides under the compute budget"
              : "the least lossy setting whose communication + encode fits the compute budget";
    } else {
      a.recommended = static_cast<int>(std::min_element(a.candidates.begin(), a.candidates.end(),
                                                        [](const auto& x, const auto& y) {
                                                          return x.total_us() < y.total_us();
                                                        }) -
                                       a.candidates.begin());
      a.reason =
          "nothing fits the compute budget: the fastest setting, communication stays exposed";
    }
  } else {
    a.recommended = 0;
    for (size_t i = 1; i < a.candidates.size(); ++i)
      if (a.candidates[i].total_us() <
          0.8 * a.candidates[static_cast<size_t>(a.recommended)].total_us())
        a.recommended = static_cast<int>(i);
    a.reason =
        a.recommended == 0
            ? "no compressor is predicted 20% faster than the plain allreduce: do not compress"
            : "each step to a lossier setting was predicted at least 20% faster (no compute budget "
              "given)";
  }
  return a;
}

}  // namespace cdt::topology
