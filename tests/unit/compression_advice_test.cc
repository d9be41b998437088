// Compression advice (topology/compression_advice.h): the recommendation follows the link speed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "topology/compression_advice.h"

namespace cdt::topology {
namespace {

CostModel TwoNodes(double inter_GBps) {
  CostModel m;
  m.shape.ranks_per_node = {2, 2};
  m.intra = {"intra", 20, 3.0, 3.0};
  m.inter = {"inter", 50, inter_GBps, 0};
  return m;
}

// Kernel rates in microseconds per element, of the order MeasureKernelRates gives in an optimised
// build on this project's 2-core machine (measured: fp16 0.0024, int8 0.0042, topk 0.0081, fma
// 0.0009). The decision is tested on given rates: measured ones depend on the build (a sanitizer
// build runs the kernels 10-50x slower, and then compressing a 1 Gbit/s link rightly stops paying).
KernelRates TypicalRates() { return {0.0024, 0.0042, 0.0081, 0.0009}; }

TEST(CompressionAdvice, MeasuredKernelRatesArePositiveAndFinite) {
  const KernelRates k = MeasureKernelRates();
  for (double r : {k.fp16, k.int8, k.topk, k.fma}) {
    EXPECT_GT(r, 0);
    EXPECT_TRUE(std::isfinite(r));
  }
  std::printf("kernel rates (us/element): fp16 %.5f int8 %.5f topk %.5f fma %.5f\n", k.fp16, k.int8,
              k.topk, k.fma);
  // The measuring overload gives a full report too.
  CompressionAdviceOptions o;
  o.gradient_bytes = 1e6;
  EXPECT_EQ(AdviseCompression(TwoNodes(0.118), o).candidates.size(), 5u);
}

TEST(CompressionAdvice, CompressesOnSlowLinksAndNotOnFastOnes) {
  CompressionAdviceOptions o;
  o.gradient_bytes = 64e6;
  const KernelRates k = TypicalRates();
  CompressionAdvice slow = AdviseCompression(TwoNodes(0.118), o, k);  // 1 Gbit/s
  ASSERT_EQ(slow.candidates.size(), 5u);
  EXPECT_EQ(slow.candidates[0].name, "none");
  EXPECT_NE(slow.candidates[static_cast<size_t>(slow.recommended)].name, "none") << slow.reason;
  for (const auto& c : slow.candidates) EXPECT_LE(c.wire_bytes, o.gradient_bytes) << c.name;
  EXPECT_LT(slow.candidates[1].comm_us, slow.candidates[0].comm_us);  // fp16 halves the bytes

  // A link 1000x faster: communication is cheap next to any encode cost.
  CompressionAdvice fast = AdviseCompression(TwoNodes(118), o, k);
  EXPECT_EQ(fast.candidates[static_cast<size_t>(fast.recommended)].name, "none") << fast.reason;

  // A compute budget that already hides the plain allreduce keeps it.
  o.compute_budget_us = 10 * slow.candidates[0].total_us();
  CompressionAdvice hidden = AdviseCompression(TwoNodes(0.118), o, k);
  EXPECT_EQ(hidden.recommended, 0);
  EXPECT_NE(hidden.reason.find("hides"), std::string::npos);

  // Kernels 50x slower (a sanitizer build, a slow core): encoding no longer pays on that link.
  KernelRates slow_kernels{k.fp16 * 50, k.int8 * 50, k.topk * 50, k.fma * 50};
  o.compute_budget_us.reset();
  CompressionAdvice costly = AdviseCompression(TwoNodes(0.118), o, slow_kernels);
  EXPECT_LT(costly.recommended, slow.recommended) << costly.reason;
}

}  // namespace
}  // namespace cdt::topology
