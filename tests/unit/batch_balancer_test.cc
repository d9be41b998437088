// BatchBalancer (src/train/batch_balancer.h): the split follows measured speeds, is the same on
// every rank, keeps the global batch, never starves a rank, and stays put without a measurement.
#include <gtest/gtest.h>

#include <numeric>

#include "train/batch_balancer.h"

namespace cdt::train {
namespace {

// Runs one interval on `world` balancers whose ranks compute `per_sample[r]` seconds a sample,
// summing their reports as the allreduce would; returns whether the split changed.
bool Interval(std::vector<BatchBalancer>& ranks, const std::vector<double>& per_sample,
              int64_t step) {
  std::vector<double> sum(ranks.size(), 0.0);
  for (size_t r = 0; r < ranks.size(); ++r) {
    const int b = ranks[r].batches()[r];
    ranks[r].Observe(per_sample[r] * b, static_cast<size_t>(b));
    if (!ranks[r].IntervalEnded(step)) return false;
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += ranks[r].report()[i];
  }
  bool changed = false;
  for (auto& b : ranks) {
    b.report() = sum;
    changed = b.Apply(step + 1);
  }
  return changed;
}

TEST(BatchBalancer, SplitsByMeasuredSpeedTheSameOnEveryRank) {
  std::vector<BatchBalancer> ranks;
  for (int r = 0; r < 2; ++r) ranks.emplace_back(2, r, 16, 1);
  ASSERT_TRUE(Interval(ranks, {1e-3, 2e-3}, 0));  // rank 1 computes half as fast
  for (const auto& b : ranks) EXPECT_EQ(b.batches(), ranks[0].batches());
  const auto& split = ranks[0].batches();
  EXPECT_EQ(split[0] + split[1], 32);
  EXPECT_EQ(split[0], 22);  // max(22 x 1, 10 x 2) = 22 ms: no split does better (ties to rank 0)
  EXPECT_EQ(ranks[0].history().size(), 1u);
  EXPECT_EQ(ranks[0].history()[0].first, 1);
  // The same speeds again: nothing to change.
  EXPECT_FALSE(Interval(ranks, {1e-3, 2e-3}, 1));
  // A rank 100 times slower still keeps a quarter of its even share.
  Interval(ranks, {1e-3, 1e-1}, 2);
  EXPECT_EQ(ranks[0].batches()[1], 4);
  EXPECT_EQ(ranks[0].batches()[0], 28);
}

TEST(BatchBalancer, OffOrUnmeasuredKeepsTheSplit) {
  BatchBalancer off(3, 0, 8, 0);
  off.Observe(1.0, 8);
  EXPECT_FALSE(off.IntervalEnded(0));
  EXPECT_EQ(off.batches(), (std::vector<int>{8, 8, 8}));
  BatchBalancer single(1, 0, 8, 1);
  EXPECT_FALSE(single.IntervalEnded(0));
  // A rank with no sample in the interval reports nothing: the split stays.
  BatchBalancer b(2, 0, 8, 2);
  EXPECT_FALSE(b.IntervalEnded(0));
  EXPECT_TRUE(b.IntervalEnded(1));
  b.report() = {0.0, 1e-3};
  EXPECT_FALSE(b.Apply(2));
  EXPECT_EQ(b.batches(), (std::vector<int>{8, 8}));
}

}  // namespace
}  // namespace cdt::train
