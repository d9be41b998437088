// Online autotuning (comm/allreduce_autotuner.h) and the allreduce rules file
// (cdt/allreduce_rules.h), alone and inside a real TCP communicator.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "cdt/allreduce_rules.h"
#include "cdt/error.h"
#include "comm/allreduce_autotuner.h"
#include "comm_test_util.h"
#include "topology/planner.h"

namespace cdt {
namespace {

using A = AllreduceAlgorithm;

TEST(Autotuner, TimesBlocksOfEachCandidateThenKeepsTheFasterAgreedOne) {
  // 5 MiB calls, 3 trials, 4 MiB minimum: blocks of 2 calls (one untimed), 6 blocks.
  AllreduceAutotuner t(3);
  ASSERT_EQ(AllreduceAutotuner::BlockCalls(3, 4 << 20, 5 << 20), 2);
  std::vector<A> ran;
  std::vector<bool> timed;
  std::optional<std::array<double, 2>> medians;
  AllreduceAutotuner::Step last;
  // Timed calls: hier 10, 30, 11 ms (median 11); ring 12, 12, 12 ms. Untimed ones say 99 s.
  const double hier[] = {0.010, 0.030, 0.011}, ring[] = {0.012, 0.012, 0.012};
  for (int i = 0; i < 12; ++i) {
    last = t.Begin(0, 5 << 20, DataType::kFloat32, A::kHierarchical, A::kRing);
    ran.push_back(last.algorithm);
    timed.push_back(last.trial);
    EXPECT_FALSE(t.Decided(0, 5 << 20, DataType::kFloat32).has_value());
    const int block = i / 2;
    const double s = !last.trial ? 99.0 : (block % 2 == 0 ? hier[block / 2] : ring[block / 2]);
    medians = t.End(last, s);
    if (i < 11) {
      EXPECT_FALSE(medians.has_value()) << i;
    }
  }
  EXPECT_EQ(ran, (std::vector<A>{A::kHierarchical, A::kHierarchical, A::kRing, A::kRing,
                                 A::kHierarchical, A::kHierarchical, A::kRing, A::kRing,
                                 A::kHierarchical, A::kHierarchical, A::kRing, A::kRing}));
  EXPECT_EQ(timed, (std::vector<bool>{false, true, false, true, false, true, false, true, false,
                                      true, false, true}));
  ASSERT_TRUE(medians.has_value());
  EXPECT_DOUBLE_EQ((*medians)[0], 0.011);
  EXPECT_DOUBLE_EQ((*medians)[1], 0.012);
  // Another rank was slower with hier: the agreed (max) times decide, not the local ones.
  std::string report = t.Decide(last, {0.015, 0.012});
  EXPECT_NE(report.find("-> ring"), std::string::npos) << report;
  EXPECT_EQ(t.Decided(0, 4 << 20, DataType::kFloat32), A::kRing);  // same class: [4M, 8M)
  EXPECT_FALSE(t.Decided(0, 8 << 20, DataType::kFloat32).has_value());
  EXPECT_FALSE(t.Decided(0, 5 << 20, DataType::kFloat64).has_value());
  EXPECT_FALSE(t.Decided(1, 5 << 20, DataType::kFloat32).has_value());  // a new selector
  AllreduceAutotuner::Step after =
      t.Begin(0, 6 << 20, DataType::kFloat32, A::kHierarchical, A::kRing);
  EXPECT_FALSE(after.trial);
  EXPECT_EQ(after.algorithm, A::kRing);
  EXPECT_FALSE(t.End(after, 1.0).has_value());
}

TEST(Autotuner, NearTiesKeepTheSelectorsChoice) {
  for (double runner_up_s : {0.0095, 0.0085}) {  // 5% and 15% faster than the choice's 0.010 s
    AllreduceAutotuner t(1, 0);
    AllreduceAutotuner::Step s;
    std::optional<std::array<double, 2>> medians;
    while (!medians) {
      s = t.Begin(0, 1 << 20, DataType::kFloat32, A::kHalvingDoubling, A::kRing);
      medians = t.End(s, s.algorithm == A::kRing ? runner_up_s : 0.010);
    }
    t.Decide(s, *medians);
    EXPECT_EQ(t.Decided(0, 1 << 20, DataType::kFloat32),
              runner_up_s > 0.009 ? A::kHalvingDoubling : A::kRing)
        << runner_up_s;
  }
}

TEST(Autotuner, SmallClassesAreJudgedOverEnoughBytes) {
  EXPECT_EQ(AllreduceAutotuner::CallsToDecide(2, 4 << 20, 64 << 20), 2 * 2 * 2);
  // 16 KiB: 256 timed calls per candidate in 2 blocks of 1 + 128.
  EXPECT_EQ(AllreduceAutotuner::BlockCalls(2, 4 << 20, 16 << 10), 129);
  EXPECT_EQ(AllreduceAutotuner::CallsToDecide(2, 4 << 20, 16 << 10), 2 * 2 * 129);
  EXPECT_EQ(AllreduceAutotuner::CallsToDecide(0, 4 << 20, 16 << 10), 0);
  // Latency-bound sizes are judged over a bounded number of calls: 4 bytes took 2 million.
  EXPECT_EQ(AllreduceAutotuner::BlockCalls(2, 4 << 20, 4), 1 + 256);
  EXPECT_EQ(AllreduceAutotuner::CallsToDecide(2, 4 << 20, 4), 2 * 2 * 257);
  AllreduceAutotuner t(2, 64 << 10);  // 16 KiB calls: 4 timed per candidate, blocks of 1 + 2
  std::optional<std::array<double, 2>> medians;
  int calls = 0;
  while (!medians) {
    ASSERT_LT(calls, 100);
    auto s = t.Begin(0, 16 << 10, DataType::kFloat32, A::kHierarchical, A::kRecursiveDoubling);
    medians = t.End(s, s.algorithm == A::kHierarchical ? 0.001 : 0.002);
    ++calls;
  }
  EXPECT_EQ(calls, AllreduceAutotuner::CallsToDecide(2, 64 << 10, 16 << 10));
  EXPECT_EQ(calls, 12);
  EXPECT_DOUBLE_EQ((*medians)[0], 0.001);
  EXPECT_DOUBLE_EQ((*medians)[1], 0.002);
}

TEST(Autotuner, NoRunnerUpOrZeroTrialsMeansNoTiming) {
  AllreduceAutotuner on(2), off(0);
  auto s = on.Begin(0, 1024, DataType::kFloat32, A::kTree, A::kAuto);
  EXPECT_FALSE(s.trial);
  EXPECT_EQ(s.algorithm, A::kTree);
  s = on.Begin(0, 1024, DataType::kFloat32, A::kTree, A::kTree);
  EXPECT_FALSE(s.trial);
  s = off.Begin(0, 1024, DataType::kFloat32, A::kTree, A::kRing);
  EXPECT_FALSE(s.trial);
  EXPECT_EQ(s.algorithm, A::kTree);
  EXPECT_FALSE(off.End(s, 1.0).has_value());
}

TEST(Selectors, FixedThresholdsOfferTheNeighbouringAlgorithmOnlyNearAThreshold) {
  auto fixed = MakeFixedThresholdSelector();
  AllreduceShape s{1024, DataType::kFloat32, 4, 1, 4};
  EXPECT_EQ(fixed->RunnerUp(s), A::kAuto);  // 1 KiB: rd, and rd on both sides
  s.bytes = 16 << 10;                       // rd below 32 KiB, tree from there
  EXPECT_EQ(fixed->Select(s), A::kRecursiveDoubling);
  EXPECT_EQ(fixed->RunnerUp(s), A::kTree);
  s.bytes = 2 << 20;  // ring from 2 MiB, rhd below
  EXPECT_EQ(fixed->Select(s), A::kRing);
  EXPECT_EQ(fixed->RunnerUp(s), A::kHalvingDoubling);
  s.bytes = 64 << 20;
  EXPECT_EQ(fixed->RunnerUp(s), A::kAuto);
}

TEST(Selectors, PlannerOffersARunnerUpOnlyWithinTheMargin) {
  topology::CostModel m;
  m.shape.ranks_per_node = {2, 2};
  m.intra = {"intra", 20, 2.0, 4.0};
  m.inter = {"inter", 60, 0.118, 0};
  topology::TopologyPlanner planner(m);
  int offered = 0;
  for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes *= 2) {
    AllreduceShape s{bytes, DataType::kFloat32, 4, 2, 2};
    const A best = planner.Select(s), second = planner.RunnerUp(s);
    if (second == A::kAuto) continue;
    ++offered;
    EXPECT_NE(second, best) << bytes;
    EXPECT_LE(m.PredictUs(second, static_cast<double>(bytes)),
              topology::kAutotuneMargin * m.PredictUs(best, static_cast<double>(bytes)))
        << bytes;
  }
  EXPECT_GT(offered, 0);
}

// A selector that is never sure: ring, or recursive doubling?
class UnsureSelector : public AllreduceSelector {
 public:
  A Select(const AllreduceShape&) const override { return A::kRing; }
  A RunnerUp(const AllreduceShape&) const override { return A::kRecursiveDoubling; }
  std::string name() const override { return "unsure"; }
};

TEST(Autotuner, RanksAgreeInsideACommunicatorAndResultsStayExact) {
  std::mutex mu;
  std::vector<std::string> logs;
  std::vector<A> decided(4);
  testing::RankSetup setup;
  setup.base.selector = std::make_shared<UnsureSelector>();
  setup.base.autotune_trials = 2;
  setup.base.autotune_min_bytes = 0;  // decide after 2 x 2 blocks of 2 calls
  setup.base.log = Log(LogLevel::kInfo, [&](LogLevel, std::string_view line) {
    std::lock_guard<std::mutex> lock(mu);
    logs.emplace_back(line);
  });
  testing::RunRanks(
      4,
      [&](Communicator& comm) {
        const size_t count = 70000;  // 280 KB: one size class
        for (int call = 0; call < 9; ++call) {
          std::vector<float> v(count, static_cast<float>(comm.rank() + 1 + call));
          comm.Allreduce(v.data(), count, DataType::kFloat32, ReduceOp::kSum)->Wait();
          for (size_t i = 0; i < count; i += 997) ASSERT_EQ(v[i], 10.0f + 4 * call) << call;
        }
        decided[static_cast<size_t>(comm.rank())] =
            comm.ResolveAllreduce(count, DataType::kFloat32);
      },
      setup);
  for (A a : decided) EXPECT_EQ(a, decided[0]);
  EXPECT_TRUE(decided[0] == A::kRing || decided[0] == A::kRecursiveDoubling);
  ASSERT_EQ(logs.size(), 1u);  // rank 0 only, once per size class
  EXPECT_NE(logs[0].find("autotune: allreduce 256K..512K f32: ring"), std::string::npos) << logs[0];
}

TEST(AllreduceRules, ParsesUnitsWildcardsAndFirstMatchWins) {
  auto rules = AllreduceRules::Parse(
      "# cann-dist-train allreduce rules v1\n"
      "\n"
      "allreduce 0 64K rd   # small\n"
      "allreduce, 64K, *, hier, 2, 4\n"
      "allreduce\t64K\t*\tring\n",
      "test.rules");
  ASSERT_EQ(rules.rules().size(), 3u);
  EXPECT_EQ(rules.rules()[1].line, 4);
  EXPECT_EQ(rules.Match(1000, 1, 4), A::kRecursiveDoubling);
  EXPECT_EQ(rules.Match(64 << 10, 2, 4), A::kHierarchical);
  EXPECT_EQ(rules.Match(64 << 10, 3, 6), A::kRing);
  EXPECT_EQ(rules.Match(size_t{1} << 40, 1, 2), A::kRing);
  auto partial = AllreduceRules::Parse("allreduce 1M 2M tree\n", "p");
  EXPECT_FALSE(partial.Match(512 << 10, 1, 2).has_value());
  EXPECT_FALSE(partial.Match(2 << 20, 1, 2).has_value());  // max is exclusive
}

TEST(AllreduceRules, BadLinesNameTheFileAndLine) {
  auto message = [](const std::string& text) {
    try {
      AllreduceRules::Parse(text, "my.rules");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("allreduce 0 1M ring\nbroadcast 0 1M ring\n")
                .find("my.rules:2: unknown collective 'broadcast'"),
            std::string::npos);
  EXPECT_NE(message("allreduce 0 1M warp\n").find("my.rules:1"), std::string::npos);
  EXPECT_NE(message("allreduce 0 1M warp\n").find("unknown allreduce algorithm 'warp'"),
            std::string::npos);
  EXPECT_NE(message("\n\nallreduce 1M 1K ring\n").find("my.rules:3: max_bytes must be greater"),
            std::string::npos);
  EXPECT_NE(message("allreduce 0 1M\n").find("my.rules:1: expected"), std::string::npos);
  EXPECT_NE(message("allreduce 0 1M auto\n").find("name an algorithm"), std::string::npos);
  EXPECT_NE(message("allreduce 0 1M ring zero\n").find("my.rules:1 nodes: 'zero'"),
            std::string::npos);
  EXPECT_NE(message("allreduce lots 1M ring\n").find("my.rules:1"), std::string::npos);
  try {
    AllreduceRules::Load("/nonexistent/x.rules");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/x.rules"), std::string::npos);
  }
}

TEST(AllreduceRules, OverrideTheSelectorInsideACommunicator) {
  testing::RankSetup setup;
  setup.base.rules = std::make_shared<AllreduceRules>(
      AllreduceRules::Parse("allreduce 0 1K tree\nallreduce 1M * rhd 1\n", "r"));
  setup.base.selector = std::make_shared<UnsureSelector>();
  std::atomic<int> logged{0};
  setup.base.log = Log(LogLevel::kDebug, [&](LogLevel, std::string_view) { ++logged; });
  testing::RunRanks(
      3,
      [&](Communicator& comm) {
        EXPECT_EQ(comm.ResolveAllreduce(10, DataType::kFloat32), A::kTree);
        EXPECT_EQ(comm.ResolveAllreduce(1 << 20, DataType::kFloat32), A::kHalvingDoubling);
        EXPECT_EQ(comm.ResolveAllreduce(4096, DataType::kFloat32), A::kRing);  // the selector's
        for (int call = 0; call < 4; ++call) {
          std::vector<int32_t> v(1 << 20, comm.rank() + 1);  // 4 MiB: ruled, so never tuned
          comm.Allreduce(v.data(), v.size(), DataType::kInt32, ReduceOp::kSum)->Wait();
          ASSERT_EQ(v.back(), 6);
        }
      },
      setup);
  EXPECT_EQ(logged.load(), 0);
}

}  // namespace
}  // namespace cdt
