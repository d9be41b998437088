// Topology layer: NIC facts from a fake sysfs tree (the outside world), the cost model's ranking,
// the planner's ranges, the strategy cache file, and probes + discovery over real connections.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>

#include "comm_test_util.h"
#include "topology/bucket_size.h"
#include "topology/discovery.h"
#include "topology/strategy_cache.h"

namespace cdt::topology {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path p =
      fs::path(::testing::TempDir()) / ("cdt_topo_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

TEST(NicScan, ReadsKindsSpeedsAndRdmaLinkLayers) {
  fs::path sys = TempDir("sysfs");
  Write(sys / "class/net/lo/type", "772");
  Write(sys / "class/net/lo/operstate", "unknown");
  Write(sys / "class/net/eth0/type", "1");
  Write(sys / "class/net/eth0/speed", "25000");
  Write(sys / "class/net/eth0/operstate", "up");
  Write(sys / "class/net/veth1/type", "1");
  Write(sys / "class/net/veth1/speed", "-1");  // virtual NICs report -1
  Write(sys / "class/net/veth1/operstate", "down");
  Write(sys / "class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet");
  Write(sys / "class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  Write(sys / "class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)");
  auto nics = ScanNics(sys.string());
  ASSERT_EQ(nics.size(), 4u);
  EXPECT_EQ(ClassifyNetwork(nics, true), "RoCE");
  EXPECT_DOUBLE_EQ(NetworkSpeedGbps(nics, "RoCE"), 100);
  EXPECT_DOUBLE_EQ(NetworkSpeedGbps(nics, "Ethernet"), 25);
  EXPECT_EQ(ClassifyNetwork(nics, false), "Loopback");
  Write(sys / "class/net/ib0/type", "32");
  Write(sys / "class/net/ib0/operstate", "up");
  EXPECT_EQ(ClassifyNetwork(ScanNics(sys.string()), true), "InfiniBand");
  EXPECT_TRUE(ScanNics((sys / "missing").string()).empty());  // no sysfs: no crash, no NICs
}

CostModel TwoByTwo() {
  CostModel m;
  m.shape.ranks_per_node = {2, 2};
  m.intra = {"intra", 10, 2.0, 3.0};
  m.inter = {"inter", 50, 0.125, 0};
  return m;
}

TEST(CostModel, HierarchicalMovesTwoThirdsOfTheRingsBytesOverTheSlowLink) {
  CostModel m = TwoByTwo();
  m.intra = {"intra", 1, 1000, 1000};  // make the node itself free: only the uplink counts
  const double n = 64 << 20;
  double ring = m.PredictUs(AllreduceAlgorithm::kRing, n);
  double hier = m.PredictUs(AllreduceAlgorithm::kHierarchical, n);
  // Flat ring: 1.5·n over the uplink; hierarchical: 1.0·n (2 nodes).
  EXPECT_NEAR(ring / hier, 1.5, 0.02);
  m = TwoByTwo();
  hier = m.PredictUs(AllreduceAlgorithm::kHierarchical, n);
  EXPECT_LT(hier, m.PredictUs(AllreduceAlgorithm::kRecursiveDoubling, n));
  EXPECT_LT(m.PredictUs(AllreduceAlgorithm::kRecursiveDoubling, 1024),
            m.PredictUs(AllreduceAlgorithm::kRing, 1024));  // few steps win when latency rules
  EXPECT_EQ(m.PredictUs(AllreduceAlgorithm::kRing, 0), 0);
}

TEST(Planner, RangesCoverEverySizeAndAgreeWithSelect) {
  TopologyPlanner planner(TwoByTwo());
  const auto& plan = planner.plan();
  ASSERT_FALSE(plan.empty());
  EXPECT_EQ(plan.front().min_bytes, 0u);
  EXPECT_EQ(plan.back().max_bytes, std::numeric_limits<size_t>::max());
  for (size_t i = 1; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].min_bytes, plan[i - 1].max_bytes + 1);
    EXPECT_NE(plan[i].algorithm, plan[i - 1].algorithm);
  }
  for (const auto& e : plan) {
    AllreduceShape s;
    s.bytes = e.min_bytes;
    EXPECT_EQ(planner.Select(s), e.algorithm);
  }
  AllreduceShape big;
  big.bytes = 64 << 20;
  EXPECT_EQ(planner.Select(big), AllreduceAlgorithm::kHierarchical);
}

TEST(Planner, SingleNodeFollowsTheMeasuredThresholds) {
  CostModel m;
  m.shape.ranks_per_node = {4};
  m.intra = {"intra", 10, 3.0, 4.0};
  m.inter = m.intra;
  TopologyPlanner planner(m);
  auto fixed = MakeFixedThresholdSelector();
  for (size_t bytes : {size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{64} << 20}) {
    AllreduceShape s{bytes, DataType::kFloat32, 4, 1, 4};
    EXPECT_EQ(planner.Select(s), fixed->Select(s)) << bytes;
  }
}

// The shared-memory level: per chunk two barriers (one for a single node's small buffer) plus the
// bytes over its bandwidth; it replaces the TCP intra-node steps of the hierarchical allreduce
// only, and a planner over one node that shares memory picks hier at every size.
TEST(CostModel, SharedMemoryStepsCountBarriersAndBytes) {
  CostModel m{ClusterShape{{4}}, {"intra", 10, 2, 3}, {"inter", 10, 2}};
  m.shared_memory = true;
  m.shm = {"shm", 5, 4};  // 5 us a barrier, 4 GB/s = 4000 bytes/us
  EXPECT_DOUBLE_EQ(ShmStepsUs(m, 4000), 5 + 1);                   // one barrier up to 64 KiB
  EXPECT_DOUBLE_EQ(ShmStepsUs(m, 4 << 20), 8 * 5 + (4 << 20) / 4000.0);  // 4 chunks x 2
  EXPECT_DOUBLE_EQ(m.PredictUs(AllreduceAlgorithm::kHierarchical, 4000), 6);
  CostModel tcp = m;
  tcp.shared_memory = false;
  EXPECT_DOUBLE_EQ(m.PredictUs(AllreduceAlgorithm::kRing, 1 << 20),
                   tcp.PredictUs(AllreduceAlgorithm::kRing, 1 << 20));
  CostModel two{ClusterShape{{2, 2}}, {"intra", 10, 2, 3}, {"inter", 50, 0.125}};
  two.shared_memory = true;
  two.shm = {"shm", 5, 4};
  EXPECT_DOUBLE_EQ(two.PredictUs(AllreduceAlgorithm::kHierarchical, 1 << 20),
                   ShmStepsUs(two, 1 << 20) + HierInterNodeUs(two, 1 << 20));
  EXPECT_DOUBLE_EQ(ShmStepsUs(two, 4000), 2 * 5 + 1);  // several nodes: always two barriers
  TopologyPlanner planner(m);
  for (size_t bytes : {size_t{4}, size_t{4096}, size_t{1} << 20, size_t{64} << 20})
    EXPECT_EQ(planner.Select({bytes, DataType::kFloat32, 4, 1, 4, true}),
              AllreduceAlgorithm::kHierarchical)
        << bytes;
}

TEST(StrategyCache, RoundTripsAndRejectsForeignOrCorruptFiles) {
  fs::path dir = TempDir("cache");
  ProbeResult probe;
  probe.shape.ranks_per_node = {2, 2};
  probe.has_intra = probe.has_inter = true;
  probe.intra = {"intra", 9.5, 4.25, 3.5};
  probe.inter = {"inter", 51, 0.126, 0};
  std::string fp = Fingerprint(probe.shape, "Ethernet", 10);
  TopologyPlanner planner(CostModel{probe.shape, probe.intra, probe.inter});
  SaveStrategy(dir.string(), fp, probe, planner.plan());
  std::string why;
  auto back = LoadStrategy(dir.string(), fp, &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_DOUBLE_EQ(back->intra.beta_GBps, 4.25);
  EXPECT_DOUBLE_EQ(back->intra.node_GBps, 3.5);
  EXPECT_DOUBLE_EQ(back->inter.alpha_us, 51);
  EXPECT_FALSE(back->has_shm);
  // With shared memory: its own fingerprint, and the level comes back.
  const std::string shm_fp = Fingerprint(probe.shape, "Ethernet", 10, true);
  EXPECT_NE(shm_fp, fp);
  probe.has_shm = true;
  probe.shm = {"shm", 6.5, 3.75};
  SaveStrategy(dir.string(), shm_fp, probe, planner.plan());
  auto shm = LoadStrategy(dir.string(), shm_fp, &why);
  ASSERT_TRUE(shm.has_value()) << why;
  EXPECT_TRUE(shm->has_shm);
  EXPECT_DOUBLE_EQ(shm->shm.alpha_us, 6.5);
  EXPECT_DOUBLE_EQ(shm->shm.beta_GBps, 3.75);
  EXPECT_FALSE(LoadStrategy(dir.string(), Fingerprint(probe.shape, "Ethernet", 100), &why));
  EXPECT_NE(why.find("no cached strategy"), std::string::npos) << why;
  std::ofstream(StrategyPath(dir.string(), fp)) << "{ not json";
  EXPECT_FALSE(LoadStrategy(dir.string(), fp, &why));
  EXPECT_NE(why.find("corrupt"), std::string::npos) << why;
  std::ofstream(StrategyPath(dir.string(), fp)) << R"({"format":"cdt-strategy","version":99})";
  EXPECT_FALSE(LoadStrategy(dir.string(), fp, &why));
  EXPECT_NE(why.find("version"), std::string::npos) << why;
}

TEST(Discovery, ProbesOnceThenReusesTheCacheWithTheSamePlan) {
  fs::path dir = TempDir("discover");
  cdt::testing::RankSetup setup;
  setup.host_ids = {"a", "a", "b", "b"};
  std::mutex mu;
  std::vector<std::vector<AllreduceAlgorithm>> plans;
  for (int start = 0; start < 2; ++start) {
    cdt::testing::RunRanks(
        4,
        [&](Communicator& comm) {
          DiscoveryOptions o;
          o.cache_dir = dir.string();
          o.probe.stream_bytes = 1 << 20;
          Discovery d = Discover(comm, o);
          EXPECT_EQ(d.from_cache, start == 1) << d.cache_note;
          EXPECT_TRUE(d.probe.has_intra);
          EXPECT_TRUE(d.probe.has_inter);
          EXPECT_GT(d.probe.inter.beta_GBps, 0);
          EXPECT_GT(d.probe.intra.node_GBps, 0);
          std::vector<AllreduceAlgorithm> algos;
          for (const auto& e : d.planner->plan()) algos.push_back(e.algorithm);
          std::lock_guard<std::mutex> lock(mu);
          plans.push_back(algos);
        },
        setup);
  }
  ASSERT_EQ(plans.size(), 8u);
  for (const auto& p : plans) EXPECT_EQ(p, plans[0]);  // every rank, both starts: the same plan
}

}  // namespace
}  // namespace cdt::topology

namespace cdt::topology {
namespace {

// 1 + 3 ranks: recursive doubling's first step already pairs rank 0 (alone on node 0) with rank 1
// across the uplink; with 2 + 2 the first step stays inside the nodes.
TEST(CostModel, UnequalNodesCountTheExchangesThatReallyCross) {
  CostModel even, uneven;
  even.shape.ranks_per_node = {2, 2};
  uneven.shape.ranks_per_node = {1, 3};
  for (CostModel* m : {&even, &uneven}) {
    m->intra = {"intra", 20, 2.0, 4.0};
    m->inter = {"inter", 60, 0.118, 0};
  }
  const double n = 4 << 20;
  // 2 + 2: one crossing step with 2 ranks per uplink; 1 + 3: two crossing steps, one rank each.
  const double link_us = n / (0.118 * 1e3);
  EXPECT_NEAR(even.PredictUs(AllreduceAlgorithm::kRecursiveDoubling, n), 2 * link_us,
              0.1 * link_us);
  EXPECT_NEAR(uneven.PredictUs(AllreduceAlgorithm::kRecursiveDoubling, n), 2 * link_us,
              0.1 * link_us);
  // Halving-doubling over 1 + 3: the n/2 step crosses (rank 0 with rank 2) and so does the n/4
  // step (0 with 1): 2·(n/2 + n/4) over the uplink — more than hier's 2(N-1)/N·n = n.
  EXPECT_GT(uneven.PredictUs(AllreduceAlgorithm::kHalvingDoubling, n),
            uneven.PredictUs(AllreduceAlgorithm::kHierarchical, n));
  TopologyPlanner planner(uneven);
  EXPECT_EQ(planner.Select({static_cast<size_t>(n), DataType::kFloat32, 4, 2, 3}),
            AllreduceAlgorithm::kHierarchical);
}

}  // namespace
}  // namespace cdt::topology

namespace cdt::topology {
namespace {

TEST(BucketSize, SlowLinksGetSmallBucketsFastOnesBigger) {
  CostModel slow;
  slow.shape.ranks_per_node = {1, 1};
  slow.inter = {"inter", 100, 0.0125, 0};  // 100 Mbit/s, 100 us
  EXPECT_EQ(RecommendedBucketBytes(slow), kMinBucketBytes);

  CostModel fast;  // 100 Gbit/s between two hosts, 50 us
  fast.shape.ranks_per_node = {1, 1};
  fast.inter = {"inter", 50, 12.5, 0};
  const size_t b = RecommendedBucketBytes(fast);
  EXPECT_GT(b, kMinBucketBytes);
  EXPECT_LE(b, kMaxBucketBytes);
  // The chosen size reaches the efficiency, the next smaller one does not.
  auto rate = [&](double n) { return n / BestAllreduceUs(fast, n); };
  EXPECT_GE(rate(double(b)), 0.8 * rate(double(1 << 30)));
  EXPECT_LT(rate(double(b / 2)), 0.8 * rate(double(1 << 30)));

  CostModel alone;
  alone.shape.ranks_per_node = {1};
  EXPECT_EQ(RecommendedBucketBytes(alone), kMaxBucketBytes);
}

}  // namespace
}  // namespace cdt::topology
