// The simulator (src/sim): profiles, the step and run simulations against hand-computed values,
// the knowledge base's shipped profiles, and every term of `assess`.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "sim/assessment.h"
#include "sim/cluster_profile.h"
#include "sim/model_profile.h"
#include "sim/run_simulator.h"
#include "sim/step_simulator.h"
#include "topology/planner.h"

namespace cdt::sim {
namespace {

namespace fs = std::filesystem;

const KnowledgeBase& Kb() {
  static const KnowledgeBase kb = LoadKnowledgeBase(CDT_KNOWLEDGE_BASE);
  return kb;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A model of 4 MB of gradients in one bucket, 10 ms forward and 20 ms backward at batch 32.
ModelProfile OneBucket() {
  ModelProfile m;
  m.model = "test";
  m.parameters = 1000000;
  m.bucket_bytes = {4e6};
  m.compute = {{32, 1, 0.010, 0.020, 0.002, 0.001, 0}};
  m.compression = {{"fp16", 2, 1e-10}};
  return m;
}

ClusterProfile TwoNodes(double inter_GBps) {
  ClusterProfile c;
  c.name = "two";
  c.device = "host CPU";
  c.host_cores = 1;
  c.threads_per_rank = 1;
  c.links.shape.ranks_per_node = {1, 1};
  c.links.inter = {"inter", 50, inter_GBps, 0};
  return c;
}

TEST(ModelProfile, RoundTripsAndFitsALinePerThreadCount) {
  ModelProfile m = OneBucket();
  // total = 5 ms + 1 ms per sample at 1 thread: points at 8 and 32.
  m.compute = {{8, 1, 0.004, 0.008, 0.001, 0, 0},
               {32, 1, 0.0123333, 0.0246667, 0.0, 0, 0},
               {32, 2, 0.006, 0.012, 0.0, 0, 0}};
  m.compute[1].optimizer_s = 0.037 - 0.0123333 - 0.0246667;
  const ModelProfile back = ParseModelProfile(ModelProfileJson(m), "test");
  ASSERT_EQ(back.compute.size(), 3u);
  EXPECT_EQ(back.gradient_bytes(), 4e6);
  const ComputePoint at16 = back.StepAt(16, 1);
  EXPECT_NEAR(at16.forward_s + at16.backward_s + at16.optimizer_s + at16.other_s, 0.005 + 0.016,
              1e-6);
  // Three threads asked, two measured: the nearest count's points (one point: proportional).
  const ComputePoint at64 = back.StepAt(64, 3);
  EXPECT_NEAR(at64.forward_s + at64.backward_s, 2 * 0.018, 1e-9);
}

TEST(ModelProfile, ErrorsNameTheFileAndField) {
  try {
    ParseModelProfile(R"({"format":"cdt-model-profile","version":1,"model":"m","parameters":5,
                          "compute":[{"batch":0,"forward_s":1,"backward_s":1}]})",
                      "m.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: compute[0]: batch"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ParseModelProfile("[1,2]", "x"), Error);
  EXPECT_THROW(ParseModelProfile(R"({"format":"other"})", "x"), Error);
}

TEST(ClusterProfile, ResolvesDevicesAndNicsFromTheKnowledgeBase) {
  const ClusterProfile c = ParseClusterProfile(
      R"({"format":"cdt-cluster-profile","version":1,"nodes":4,"ranks_per_node":8,
          "device":"NVIDIA A100 SXM","nic":"RoCE 200G",
          "intra":{"alpha_us":3,"beta_GBps":150},"faults":{"node_mtbf_hours":1000}})",
      "c.json", Kb());
  EXPECT_EQ(c.world(), 32);
  EXPECT_TRUE(c.accelerator);
  EXPECT_DOUBLE_EQ(c.device_tflops, 312);
  EXPECT_DOUBLE_EQ(c.device_power_w, 400);
  EXPECT_DOUBLE_EQ(c.links.inter.beta_GBps, 200 * 0.9 / 8);  // line rate x efficiency, bytes
  EXPECT_DOUBLE_EQ(c.node_mtbf_hours, 1000);
  EXPECT_THROW(ParseClusterProfile(R"({"format":"cdt-cluster-profile","version":1,"nodes":2,
                                       "ranks_per_node":1,"device":"host CPU","host_cores":2})",
                                   "no-nic.json", Kb()),
               Error);
  try {
    ParseClusterProfile(R"({"format":"cdt-cluster-profile","version":1,"nodes":1,
                            "device":"Abacus 2000"})",
                        "d.json", Kb());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d.json: device"), std::string::npos) << e.what();
  }
}

TEST(ClusterProfile, FaultPatternsGiveTheNodeMtbf) {
  // Two causes at 1e-4 and 3e-4 per node-hour: 2,500 h.
  EXPECT_DOUBLE_EQ(NodeMtbfFromFaultPatterns(
                       R"({"causes":[{"per_node_hour":1e-4},{"per_node_hour":3e-4}]})", "f"),
                   2500);
}

TEST(StepSimulator, OneRankIsItsComputeAlone) {
  ClusterProfile c = TwoNodes(1);
  c.links.shape.ranks_per_node = {1};
  const StepPrediction p = SimulateStep(OneBucket(), c, {});
  EXPECT_NEAR(p.step_s, 0.033, 1e-12);
  EXPECT_NEAR(p.samples_per_s, 32 / 0.033, 1e-6);
  EXPECT_EQ(p.exposed_s, 0);
}

TEST(StepSimulator, ACommunicationBoundStepAddsTheAllreduceAndItsCompression) {
  const ClusterProfile c = TwoNodes(0.01);  // 10 MB/s: 4 MB take about 0.4 s
  const StepPrediction p = SimulateStep(OneBucket(), c, {});
  const topology::TopologyPlanner planner(c.links);
  AllreduceShape s;
  s.bytes = 4000000;
  s.world_size = 2;
  s.num_nodes = 2;
  const double comm = c.links.PredictUs(planner.Select(s), 4e6) * 1e-6;
  const double loss =
      c.links.PredictUs(planner.Select({8, DataType::kFloat32, 2, 2, 1, false}), 8) * 1e-6;
  // One bucket: the next forward waits for it and its update; only the next batch's loading
  // (1 ms) runs meanwhile.
  EXPECT_NEAR(p.step_s, 0.032 + comm, 1e-9);
  EXPECT_NEAR(p.comm_s, comm + loss, 1e-9);
  EXPECT_NEAR(p.exposed_s, comm - 0.001, 1e-9);
  EXPECT_NEAR(p.overlap, 1 - (comm - 0.001) / (comm + loss), 1e-9);
  // fp16 halves the bytes and adds 1e-10 s per fp32 byte.
  StepConfig half;
  half.compress = "fp16";
  const StepPrediction h = SimulateStep(OneBucket(), c, half);
  EXPECT_EQ(h.buckets[0].wire_bytes, 2e6);
  const double comm16 =
      c.links.PredictUs(planner.Select({2000000, DataType::kFloat32, 2, 2, 1, false}), 2e6) * 1e-6;
  EXPECT_NEAR(h.step_s, 0.032 + comm16 + 4e6 * 1e-10, 1e-9);
  StepConfig unknown;
  unknown.compress = "zip";
  EXPECT_THROW(SimulateStep(OneBucket(), c, unknown), Error);
}

TEST(StepSimulator, EarlyBucketsHideBehindBackward) {
  ModelProfile m = OneBucket();
  m.bucket_bytes = {1e6, 1e6, 1e6, 1e6};
  const ClusterProfile c = TwoNodes(1);  // 1 GB/s: 1 ms a bucket, backward 5 ms a bucket
  const StepPrediction p = SimulateStep(m, c, {});
  // Only the last bucket's allreduce (and the loss) can be exposed.
  EXPECT_LT(p.exposed_s, p.comm_s / 2);
  EXPECT_GT(p.overlap, 0.5);
}

TEST(StepSimulator, MeasuredReadyTimesAndThePriorityConnectionChangeWhatHides) {
  // A big bucket first in backward order (a CNN's fully connected layer), then a small one (its
  // convolutions, which the next forward needs first).
  ModelProfile m = OneBucket();
  m.bucket_bytes = {4e6, 4e4};
  const ClusterProfile c = TwoNodes(0.4);  // 400 MB/s: the big bucket takes about 10 ms
  const StepPrediction bytes = SimulateStep(m, c, {});
  // Ready early (the layer is quick to differentiate): its allreduce hides behind backward.
  m.bucket_ready_fraction = {0.1, 1.0};
  const StepPrediction early = SimulateStep(m, c, {});
  // Ready a tenth into backward's 20 ms, not when 99% of the bytes are.
  EXPECT_NEAR(early.buckets[1].ready_s - early.buckets[0].ready_s, 0.020 * 0.9, 1e-9);
  EXPECT_NEAR(bytes.buckets[1].ready_s - bytes.buckets[0].ready_s, 0.020 * 4e4 / 4.04e6, 1e-9);
  EXPECT_LT(early.step_s, bytes.step_s);
  // On the second connection the small bucket no longer queues behind the big one.
  m.bucket_priority = {false, true};
  const StepPrediction two = SimulateStep(m, c, {});
  EXPECT_NEAR(two.buckets[1].start_s, two.buckets[1].ready_s, 1e-12);
  EXPECT_LE(two.step_s, early.step_s);
  StepConfig one_channel;
  one_channel.overlap_next_forward = false;  // without deferred updates there is one connection
  EXPECT_GE(SimulateStep(m, c, one_channel).buckets[1].start_s,
            SimulateStep(m, c, one_channel).buckets[0].end_s);
}

TEST(StepSimulator, ABusyHostSlowsCollectivesToWhatTheProfileMeasuredUnderLoad) {
  ModelProfile m = OneBucket();
  m.loaded_alpha_s = 0.001;
  m.loaded_s_per_byte = 1e-9;         // 4 MB: 4 ms more
  ClusterProfile c = TwoNodes(1000);  // an idle link: about 0.1 ms (two latencies)
  c.one_host = true;
  c.host_cores = 2;  // two ranks of one thread: every core computes, no oversubscription
  const StepPrediction p = SimulateStep(m, c, {});
  EXPECT_NEAR(p.buckets[0].end_s - p.buckets[0].start_s, 0.001 + 4e6 * 1e-9, 1e-9);
  c.host_cores = 4;  // spare cores: the idle-host cost model stands
  EXPECT_LT(SimulateStep(m, c, {}).buckets[0].end_s - SimulateStep(m, c, {}).buckets[0].start_s,
            1e-3);
}

TEST(StepSimulator, StragglersCostSigmaTimesRootTwoLogW) {
  ModelProfile m = OneBucket();
  m.compute[0].step_sd_s = 0.001;
  m.compute[0].other_s = 0;  // nothing else to hide the wait behind
  ClusterProfile c = TwoNodes(1000);
  c.links.shape.ranks_per_node.assign(64, 1);
  const StepPrediction p = SimulateStep(m, c, {});
  EXPECT_NEAR(p.straggler_s, 0.001 * std::sqrt(2 * std::log(64.0)), 1e-9);
}

TEST(StepSimulator, RanksSharingTooFewCoresSlowDown) {
  ClusterProfile c = TwoNodes(1000);
  c.one_host = true;  // both emulated nodes on one core
  const StepPrediction p = SimulateStep(OneBucket(), c, {});
  EXPECT_DOUBLE_EQ(p.oversubscription, 2);
  EXPECT_NEAR(p.compute_s, 2 * 0.033, 1e-12);
}

TEST(StepSimulator, ScalesAPublishedProfileByPeakFlops) {
  ModelProfile m = OneBucket();
  m.compute[0].threads = 0;
  m.device_tflops = 100;
  ClusterProfile c = TwoNodes(1000);
  c.accelerator = true;
  c.device_tflops = 400;
  EXPECT_NEAR(SimulateStep(m, c, {}).compute_s, 0.033 / 4, 1e-12);
}

TEST(RunSimulator, YoungDalyInterval) {
  EXPECT_DOUBLE_EQ(YoungDalyIntervalS(60, 3600 * 10), std::sqrt(2 * 60 * 36000.0));
}

TEST(RunSimulator, FailuresCostTheRestartStrategyMoreThanOurs) {
  ModelProfile m = OneBucket();
  m.parameters = 100000000;  // 800 MB of state: restart reloads it
  ClusterProfile c = TwoNodes(1);
  c.device_power_w = 300;
  c.device_idle_w = 50;
  RunConfig r;
  r.samples = 32 * 2 / SimulateStep(m, c, {}).step_s * 3600 * 10;  // ten hours' worth
  const RunPrediction none = SimulateRun(m, c, {}, r);
  EXPECT_NEAR(none.ideal_hours, 10, 1e-9);
  EXPECT_NEAR(none.ours.expected_hours, 10, 1e-9);
  EXPECT_EQ(none.expected_failures, 0);
  c.node_mtbf_hours = 4;  // two nodes: one failure every 2 h
  const RunPrediction p = SimulateRun(m, c, {}, r);
  EXPECT_NEAR(p.system_mtbf_hours, 2, 1e-12);
  EXPECT_NEAR(p.expected_failures, 5, 1.5);
  EXPECT_GT(p.restart.lost_hours, 10 * p.ours.lost_hours);
  EXPECT_GT(p.restart.expected_hours, p.ours.expected_hours);
  EXPECT_NEAR(p.restart.checkpoint_interval_s,
              YoungDalyIntervalS(8e8 / (c.recovery.checkpoint_GBps * 1e9), 2 * 3600), 1e-9);
  // Energy: two ranks at 300 W busy, 50 W waiting, for the run's hours.
  const double busy = p.step.compute_s / p.step.step_s;
  EXPECT_NEAR(p.energy_kwh, 2 * (300 * busy + 50 * (1 - busy)) / 1000 * p.ours.expected_hours,
              1e-9);
}

TEST(RunSimulator, TheBestStartWithinTheDeadlineHasLessCarbon) {
  std::vector<green::CarbonInterval> hours;
  for (int h = 0; h < 48; ++h)
    hours.push_back({h * 3600.0, (h + 1) * 3600.0, h < 10 ? 500.0 : 100.0});
  const green::CarbonTrace trace("test", "T", hours);
  ClusterProfile c = TwoNodes(1);
  c.device_power_w = 1000;
  c.device_idle_w = 1000;
  RunConfig r;
  r.carbon = &trace;
  r.deadline_hours = 24;
  r.samples = SimulateStep(OneBucket(), c, {}).samples_per_s * 3600 * 2;  // two hours
  const RunPrediction p = SimulateRun(OneBucket(), c, {}, r);
  EXPECT_NEAR(p.carbon_kg, 2 * 2 * 500 / 1000.0, 1e-6);       // 2 kW for 2 h at 500 g
  EXPECT_NEAR(p.carbon_best_kg, 2 * 2 * 100 / 1000.0, 1e-6);  // from hour 10
  EXPECT_DOUBLE_EQ(p.best_start_unix, 10 * 3600.0);
}

TEST(RunSimulator, CostIsRentalPlusEnergyAtTheHourlyPrice) {
  std::vector<green::CarbonInterval> hours;
  for (int h = 0; h < 4; ++h) hours.push_back({h * 3600.0, (h + 1) * 3600.0, h < 1 ? 0.5 : 0.1});
  const green::CarbonTrace price("prices", "T", hours);  // per kWh: 0.5 the first hour, then 0.1
  ClusterProfile c = TwoNodes(1);
  c.device_power_w = 500;
  c.device_idle_w = 500;  // 1 kW whatever the step does
  c.price_per_device_hour = 2;
  RunConfig r;
  r.price = &price;
  r.samples = SimulateStep(OneBucket(), c, {}).samples_per_s * 3600 * 2;  // two hours
  const RunPrediction p = SimulateRun(OneBucket(), c, {}, r);
  EXPECT_NEAR(p.energy_kwh, 2, 1e-9);
  EXPECT_NEAR(p.cost, 2 * 2 * 2 + (0.5 + 0.1),
              1e-6);  // 2 devices x 2 h x 2, then 1 kWh at each price
  EXPECT_NE(p.cost_basis.find("price trace"), std::string::npos);
}

TEST(KnowledgeBase, EveryShippedProfileParses) {
  int models = 0, clusters = 0;
  for (const auto& e :
       fs::directory_iterator(std::string(CDT_KNOWLEDGE_BASE) + "/model_profiles")) {
    EXPECT_NO_THROW(ParseModelProfile(Slurp(e.path()), e.path())) << e.path();
    ++models;
  }
  for (const auto& e :
       fs::directory_iterator(std::string(CDT_KNOWLEDGE_BASE) + "/cluster_profiles")) {
    EXPECT_NO_THROW(ParseClusterProfile(Slurp(e.path()), e.path(), Kb())) << e.path();
    ++clusters;
  }
  EXPECT_GE(models, 2);
  EXPECT_GE(clusters, 3);
  for (const auto& e : fs::directory_iterator(std::string(CDT_KNOWLEDGE_BASE) + "/fault_patterns"))
    EXPECT_GT(NodeMtbfFromFaultPatterns(Slurp(e.path()), e.path()), 0) << e.path();
}

// assess: each term of the index and each level's criterion, on documents written the way
// `train --json` and `green` write them.
nlohmann::json Job() {
  return {{"world_size", 4},
          {"model", "cnn"},
          {"samples_per_s", 1200.0},
          {"sync_wait_fraction", 0.1},
          {"wall_s", 100.0},
          {"params_consistent", true},
          {"allreduce_selection", "topology-planner"},
          {"elastic", true},
          {"comm", {{"overlap_ratio", 0.6}}},
          {"compression", {{"compressor", "adaptive"}, {"phases", {{{"step", 0}}}}}},
          {"checkpoints", {{"written", 3}}},
          {"energy", {{"joules", 50.0}}},
          {"recoveries", {{{"rto_s", 0.2}}, {{"rto_s", 0.3}}}}};
}

TEST(Assess, PinsEachTermOfTheGreenDistributedIndex) {
  AssessInputs in;
  in.job_json = Job().dump();
  in.job_where = "job.json";
  in.baseline_json =
      nlohmann::json{{"world_size", 1}, {"model", "cnn"}, {"samples_per_s", 400.0}}.dump();
  in.baseline_where = "one.json";
  in.green_json =
      nlohmann::json{{"carbon_kg", 0.6}, {"baseline_carbon_kg", 1.0}, {"reduction", 0.4}}.dump();
  in.green_where = "green_report.json";
  const Assessment a = Assess(in);
  EXPECT_DOUBLE_EQ(a.scaling_efficiency, 1200.0 / (4 * 400));  // 0.75
  EXPECT_DOUBLE_EQ(a.fault_tolerance, 1 - 0.5 / 100);          // recovery seconds over wall
  EXPECT_DOUBLE_EQ(a.carbon_reduction, 0.4);
  EXPECT_DOUBLE_EQ(a.green_distributed_index, 0.75 * 0.995 * 0.4);
  EXPECT_EQ(a.level, 5);
  // Without a baseline: 1 - sync wait; without a report: no carbon term.
  in.baseline_json.clear();
  in.green_json.clear();
  const Assessment b = Assess(in);
  EXPECT_DOUBLE_EQ(b.scaling_efficiency, 0.9);
  EXPECT_EQ(b.carbon_reduction, 0);
  EXPECT_EQ(b.green_distributed_index, 0);
  EXPECT_EQ(b.level, 4);
}

TEST(Assess, LevelsAreCumulative) {
  nlohmann::json j = Job();
  j["allreduce_selection"] = "fixed thresholds";  // L2 unmet: L1, whatever comes after
  AssessInputs in;
  in.job_json = j.dump();
  in.job_where = "job.json";
  EXPECT_EQ(Assess(in).level, 1);
  j["elastic"] = false;
  in.job_json = j.dump();
  EXPECT_EQ(Assess(in).fault_tolerance, 0);  // a failure would end the run
  j["world_size"] = 1;
  in.job_json = j.dump();
  EXPECT_EQ(Assess(in).level, 0);
  in.baseline_json =
      nlohmann::json{{"world_size", 2}, {"model", "cnn"}, {"samples_per_s", 1.0}}.dump();
  in.baseline_where = "two.json";
  EXPECT_THROW(Assess(in), Error);  // a baseline must be one rank
}

}  // namespace
}  // namespace cdt::sim
