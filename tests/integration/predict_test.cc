// profile, predict and assess through the CLI (docs/predict.md): a model measured here and
// simulated, the shipped 1,024-rank scenario, bad profiles refused with the file and field, and
// a real elastic run with the topology planner assessed. No timing is asserted: how close the
// predictions come is bench/run_predictor_validation.sh's business (docs/benchmarks.md).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "process_util.h"

namespace cdt {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const nlohmann::json& j) { std::ofstream(path) << j.dump(1); }

TEST(Predict, ProfilesAModelHereAndSimulatesItOnTwoEmulatedNodes) {
  const std::string profile = TempPath("mlp.profile.json");
  std::string out;
  ASSERT_EQ(RunCli("profile",
                   {"profile",
                    "--model",
                    "mlp",
                    "--batch-sizes",
                    "16,32",
                    "--threads",
                    "1",
                    "--steps",
                    "6",
                    "--repeats",
                    "1",
                    "--compressors",
                    "fp16",
                    "--json",
                    profile,
                    "--",
                    "--dataset",
                    "synthetic",
                    "--synthetic-samples",
                    "2000"},
                   &out),
            0)
      << out;
  const nlohmann::json p = nlohmann::json::parse(ReadFile(profile));
  EXPECT_EQ(p["format"], "cdt-model-profile");
  ASSERT_EQ(p["compute"].size(), 2u) << out;  // two batch sizes on one thread
  for (const auto& c : p["compute"]) EXPECT_GT(c["backward_s"].get<double>(), 0);
  const size_t buckets = p["bucket_bytes"].size();
  ASSERT_GE(buckets, 1u);
  EXPECT_EQ(p["bucket_priority"].size(), buckets);        // the two-rank run's layout
  EXPECT_EQ(p["bucket_ready_fraction"].size(), buckets);  // from its timeline
  double bytes = 0;
  for (const auto& b : p["bucket_bytes"]) bytes += b.get<double>();
  EXPECT_EQ(bytes, 4.0 * p["parameters"].get<double>());
  ASSERT_EQ(p["compression"].size(), 1u);
  EXPECT_NEAR(p["compression"][0]["wire_ratio"].get<double>(), 2, 0.01);  // fp16

  const std::string cluster = TempPath("two-nodes.cluster.json");
  Write(cluster, {{"format", "cdt-cluster-profile"},
                  {"version", 1},
                  {"name", "two emulated nodes"},
                  {"nodes", 2},
                  {"ranks_per_node", 1},
                  {"device", "host CPU"},
                  {"host_cores", 2},
                  {"one_host", true},
                  {"threads_per_rank", 1},
                  {"nic", "tbf 100mbit"},
                  {"faults", {{"node_mtbf_hours", 2}}}});
  const std::string json = TempPath("prediction.json");
  ASSERT_EQ(RunCli("predict",
                   {"predict", "--model", profile, "--cluster", cluster, "--batch-size", "32",
                    "--samples", "1e6", "--json", json},
                   &out),
            0)
      << out;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(r["world_size"], 2);
  EXPECT_EQ(r["buckets"].size(), buckets);
  EXPECT_GT(r["samples_per_s"].get<double>(), 0);
  EXPECT_GT(r["scaling_efficiency"].get<double>(), 0);
  EXPECT_LE(r["scaling_efficiency"].get<double>(), 1.0001);
  // The mlp's 2.1 MB of gradients take about 0.2 s at 100 Mbit/s: the wait is most of a step.
  EXPECT_GT(r["sync_wait_fraction"].get<double>(), 0.3) << out;
  EXPECT_GT(r["expected_failures"].get<double>(), 0);
  EXPECT_LT(r["recovery"]["ours"]["lost_hours"].get<double>(),
            r["recovery"]["restart"]["lost_hours"].get<double>());
  EXPECT_FALSE(r["assumptions"].empty());
  EXPECT_NE(out.find("assumptions:"), std::string::npos);
}

TEST(Predict, SimulatesTheSeedsThousandCardScenarioFromTheKnowledgeBase) {
  const std::string json = TempPath("seed.json");
  std::string out;
  ASSERT_EQ(RunCli("seed",
                   {"predict", "--model", "moe-bert-ascend910", "--cluster",
                    "seed-1024-ascend910-roce200", "--samples", "1e9", "--trace",
                    std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv", "--start",
                    "2022-06-01T00:00:00Z", "--deadline", "72", "--json", json},
                   &out, {{"CDT_KNOWLEDGE_BASE", CDT_KNOWLEDGE_BASE}}),
            0)
      << out;
  const nlohmann::json r = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(r["world_size"], 1024);
  EXPECT_EQ(r["nodes"], 128);
  EXPECT_GT(r["expected_failures"].get<double>(), 0);  // Llama 3's rates, 128 nodes
  EXPECT_LT(r["recovery"]["ours"]["rto_s"].get<double>(),
            r["recovery"]["restart"]["rto_s"].get<double>());
  EXPECT_LE(r["carbon_best_start_kg"].get<double>(), r["carbon_kg"].get<double>());
  EXPECT_GT(r["energy_kwh"].get<double>(), 0);
}

TEST(Predict, RefusesABadProfileNamingTheFileAndField) {
  const std::string cluster = TempPath("bad.cluster.json");
  Write(cluster, {{"format", "cdt-cluster-profile"},
                  {"version", 1},
                  {"nodes", 2},
                  {"ranks_per_node", 1},
                  {"device", "host CPU"},
                  {"host_cores", 2},
                  {"nic", "carrier pigeon"}});
  std::string out;
  EXPECT_EQ(RunCli("bad", {"predict", "--model", "resnet101-p100", "--cluster", cluster}, &out,
                   {{"CDT_KNOWLEDGE_BASE", CDT_KNOWLEDGE_BASE}}),
            2);
  EXPECT_NE(out.find("carrier pigeon"), std::string::npos) << out;
  EXPECT_NE(out.find("RoCE 200G"), std::string::npos) << out;  // the names it knows
  EXPECT_EQ(RunCli("missing", {"predict", "--model", "no-such-model", "--cluster", cluster}, &out,
                   {{"CDT_KNOWLEDGE_BASE", CDT_KNOWLEDGE_BASE}}),
            2);
  EXPECT_NE(out.find("resnet101-p100"), std::string::npos) << out;  // lists what there is
}

TEST(Assess, AnElasticRunWithThePlannerAndAdaptiveCompressionIsLevelFour) {
  const std::string dir = TempPath("assess-ckpt"), job = TempPath("assess-job.json"),
                    json = TempPath("assessment.json");
  fs::remove_all(dir);
  std::string out;
  ASSERT_EQ(RunCli("assess-run",
                   {"elastic",
                    "--nproc-per-node",
                    "3",
                    "--adaptive-comm",
                    "--cache-dir",
                    "none",
                    "--inject",
                    "kill:2@20",
                    "--",
                    "--model",
                    "mlp",
                    "--dataset",
                    "synthetic",
                    "--synthetic-samples",
                    "4000",
                    "--steps",
                    "60",
                    "--batch-size",
                    "32",
                    "--compress",
                    "adaptive",
                    "--checkpoint-dir",
                    dir,
                    "--energy-windows",
                    "--no-progress",
                    "--json",
                    job},
                   &out),
            0)
      << out;
  ASSERT_EQ(RunCli("assess", {"assess", job, "--json", json}, &out), 0) << out;
  const nlohmann::json a = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(a["criteria"].size(), 5u);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(a["criteria"][l]["met"].get<bool>()) << out;
  EXPECT_FALSE(a["criteria"][4]["met"].get<bool>());  // no carbon report
  EXPECT_EQ(a["level"], 4) << out;
  const double ft = a["fault_tolerance"].get<double>();
  EXPECT_GT(ft, 0);  // one recovery, measured
  EXPECT_LT(ft, 1);
  EXPECT_EQ(a["green_distributed_index"].get<double>(), 0);
}

}  // namespace
}  // namespace cdt
