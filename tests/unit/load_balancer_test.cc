// Load balancer (topology/load_balancer.h) with a fake clock: the "step" advances the fake time by
// what a rank of a given speed would take, plus a little noise.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "cdt/error.h"
#include "comm_test_util.h"
#include "topology/load_balancer.h"

namespace cdt::topology {
namespace {

// Fake for the outside world's clock: time moves only when a simulated step runs.
class FakeClock : public StepClock {
 public:
  double NowSeconds() override { return now_; }
  void Advance(double s) { now_ += s; }

 private:
  double now_ = 1000;
};

StepTimeModel ProbeFake(const StepTimeModel& truth, double noise, unsigned seed) {
  FakeClock clock;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> jitter(1 - noise, 1 + noise);
  auto step = [&](int b) { clock.Advance(truth.Predict(b) * jitter(rng)); };
  StepProbeOptions o;
  o.batch_sizes = {8, 16, 32};
  o.repeats = 5;
  return ProbeStepTime(step, clock, o);
}

TEST(LoadBalancer, ProbeRecoversFixedAndPerSampleCost) {
  const StepTimeModel truth{0.020, 0.0015};
  StepTimeModel exact = ProbeFake(truth, 0, 1);
  EXPECT_NEAR(exact.fixed_s, 0.020, 1e-9);
  EXPECT_NEAR(exact.per_sample_s, 0.0015, 1e-12);
  StepTimeModel noisy = ProbeFake(truth, 0.05, 2);  // +-5% per step: medians keep it close
  EXPECT_NEAR(noisy.per_sample_s, 0.0015, 0.0015 * 0.1);
  EXPECT_NEAR(noisy.Predict(64), truth.Predict(64), truth.Predict(64) * 0.05);
}

TEST(LoadBalancer, ProbeNeedsTwoDistinctSizes) {
  FakeClock clock;
  StepProbeOptions o;
  o.batch_sizes = {16, 16};
  EXPECT_THROW(ProbeStepTime([&](int b) { clock.Advance(b); }, clock, o), Error);
}

TEST(LoadBalancer, HeterogeneousRanksGetBatchesInverseToTheirCost) {
  // Two fast ranks, one half as fast, one a third as fast.
  std::vector<StepTimeModel> ranks = {{0.01, 0.001}, {0.01, 0.001}, {0.01, 0.002}, {0.01, 0.003}};
  BatchSplit s = ProposeMicroBatches(ranks, 256);
  EXPECT_EQ(std::accumulate(s.batch.begin(), s.batch.end(), 0), 256);
  EXPECT_GT(s.batch[0], s.batch[2]);
  EXPECT_GT(s.batch[2], s.batch[3]);
  // Even split: 64 each -> 0.074, 0.074, 0.138, 0.202 s; the slowest rank sets the step.
  EXPECT_NEAR(s.max_before_s, 0.202, 1e-9);
  // Continuous optimum: (T - 0.01)(1000 + 1000 + 500 + 333.3) = 256, T = 0.1003 s; whole samples
  // can cost at most one more sample on the slowest rank.
  EXPECT_GE(s.max_after_s, 0.1003);
  EXPECT_LE(s.max_after_s, 0.1003 + 0.003);
  EXPECT_LT(s.stddev_after_s, s.stddev_before_s / 10);
  std::printf(
      "per-rank step time stddev: even split %.4f s, balanced %.4f s; step %.4f -> %.4f s\n",
      s.stddev_before_s, s.stddev_after_s, s.max_before_s, s.max_after_s);
}

TEST(LoadBalancer, GreedySplitIsOptimalAgainstBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> fixed(0, 0.05), per(0.0005, 0.004);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<StepTimeModel> ranks = {
        {fixed(rng), per(rng)}, {fixed(rng), per(rng)}, {fixed(rng), per(rng)}};
    const int B = 24;
    BatchSplit s = ProposeMicroBatches(ranks, B, 1);
    double best = 1e9;
    for (int a = 1; a <= B - 2; ++a)
      for (int b = 1; a + b <= B - 1; ++b) {
        const int c = B - a - b;
        best = std::min(best,
                        std::max({ranks[0].Predict(a), ranks[1].Predict(b), ranks[2].Predict(c)}));
      }
    EXPECT_NEAR(s.max_after_s, best, 1e-12) << trial;
    for (int b : s.batch) EXPECT_GE(b, 1);
  }
}

TEST(LoadBalancer, EqualRanksKeepTheEvenSplitAndEdgeCasesAreClear) {
  std::vector<StepTimeModel> same(3, {0.01, 0.001});
  BatchSplit s = ProposeMicroBatches(same, 10);
  std::vector<int> sorted = s.batch;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{3, 3, 4}));
  EXPECT_NEAR(s.stddev_after_s, s.stddev_before_s, 1e-12);
  BatchSplit one = ProposeMicroBatches({{0.5, 0.1}}, 7);
  EXPECT_EQ(one.batch, std::vector<int>{7});
  BatchSplit zero = ProposeMicroBatches({{0.0, 0.0}, {0.0, 0.0}}, 0, 0);
  EXPECT_EQ(zero.batch, (std::vector<int>{0, 0}));
  EXPECT_THROW(ProposeMicroBatches(same, 2, 1), Error);  // 3 ranks need 3 samples
  EXPECT_THROW(ProposeMicroBatches({}, 2), Error);
  EXPECT_THROW(ProposeMicroBatches({{-1, 0.1}}, 2), Error);
  EXPECT_THROW(ProposeMicroBatches({{std::nan(""), 0.1}}, 2), Error);
}

TEST(LoadBalancer, EveryRankComputesTheSameSplitOverTheCommunicator) {
  std::vector<std::vector<int>> splits(3);
  cdt::testing::RunRanks(3, [&](Communicator& comm) {
    const StepTimeModel truth{0.01, 0.001 * (comm.rank() + 1)};
    StepTimeModel mine = ProbeFake(truth, 0.02, static_cast<unsigned>(comm.rank()));
    BatchSplit s = BalanceAcrossRanks(comm, mine, 120);
    splits[static_cast<size_t>(comm.rank())] = s.batch;
    EXPECT_LT(s.stddev_after_s, s.stddev_before_s);
  });
  EXPECT_EQ(splits[0], splits[1]);
  EXPECT_EQ(splits[0], splits[2]);
  EXPECT_GT(splits[0][0], splits[0][1]);
  EXPECT_GT(splits[0][1], splits[0][2]);
}

}  // namespace
}  // namespace cdt::topology
