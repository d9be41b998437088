// Compression advice (topology/compression_advice.h): the recommendation follows the link speed.
#include <gtest/gtest.h>

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

TEST(CompressionAdvice, CompressesOnSlowLinksAndNotOnFastOnes) {
  CompressionAdviceOptions o;
  o.gradient_bytes = 64e6;
  CompressionAdvice slow = AdviseCompression(TwoNodes(0.118), o);  // 1 Gbit/s
  ASSERT_EQ(slow.candidates.size(), 5u);
  EXPECT_EQ(slow.candidates[0].name, "none");
  EXPECT_NE(slow.candidates[static_cast<size_t>(slow.recommended)].name, "none") << slow.reason;
  for (const auto& c : slow.candidates) EXPECT_LE(c.wire_bytes, o.gradient_bytes) << c.name;
  EXPECT_LT(slow.candidates[1].comm_us, slow.candidates[0].comm_us);  // fp16 halves the bytes

  // A link 1000x faster: communication is cheap next to any encode cost.
  CompressionAdvice fast = AdviseCompression(TwoNodes(118), o);
  EXPECT_EQ(fast.candidates[static_cast<size_t>(fast.recommended)].name, "none") << fast.reason;

  // A compute budget that already hides the plain allreduce keeps it.
  o.compute_budget_us = 10 * slow.candidates[0].total_us();
  CompressionAdvice hidden = AdviseCompression(TwoNodes(0.118), o);
  EXPECT_EQ(hidden.recommended, 0);
  EXPECT_NE(hidden.reason.find("hides"), std::string::npos);
}

}  // namespace
}  // namespace cdt::topology
