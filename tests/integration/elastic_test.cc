// Elastic training end to end (`cann-dist-train elastic`, docs/elastic.md): workers really killed
// (SIGKILL) and really stopped (SIGSTOP) by scripted faults; the survivors re-form the group in
// process and train on from the committed state. Timings (rto_s) are measured by
// bench/run_elastic_recovery.sh, not asserted here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "process_util.h"

namespace cdt {
namespace {

nlohmann::json Elastic(const std::string& tag, std::vector<std::string> elastic, std::vector<std::string> train,
                       int* exit_code = nullptr, std::string* output = nullptr) {
  const std::string out = TempPath(tag), json = TempPath(tag + ".json");
  std::vector<std::string> argv = {CDT_CLI, "elastic"};
  argv.insert(argv.end(), elastic.begin(), elastic.end());
  argv.insert(argv.end(), {"--", "--no-progress", "--json", json, "--dataset", "synthetic",
                           "--synthetic-samples", "4000", "--model", "cnn", "--seed", "5"});
  argv.insert(argv.end(), train.begin(), train.end());
  Proc p = Spawn(argv, {}, out);
  const int rc = WaitFor(p.pid, std::chrono::seconds(300));
  if (output) *output = ReadFile(out);
  if (exit_code) {
    *exit_code = rc;
    return {};
  }
  EXPECT_EQ(rc, 0) << ReadFile(out);
  return nlohmann::json::parse(ReadFile(json));
}

std::vector<int64_t> Steps(const nlohmann::json& j) {
  std::vector<int64_t> out;
  for (auto& e : j["loss_curve"]) out.push_back(e[0].get<int64_t>());
  return out;
}

// Every step once, in order: what a failure left uncommitted was done again, nothing skipped.
// One loss may be missing: that of the step just before a resumed one, when the failure came
// before that step's global loss (summed over the old group, the lost worker included) arrived.
void ExpectEveryStepOnce(const nlohmann::json& j) {
  std::vector<int64_t> allowed_gaps;
  for (const auto& r : j["recoveries"]) allowed_gaps.push_back(r["resumed_step"].get<int64_t>() - 1);
  int64_t expect = 0;
  for (int64_t step : Steps(j)) {
    if (step == expect + 1 &&
        std::find(allowed_gaps.begin(), allowed_gaps.end(), expect) != allowed_gaps.end())
      ++expect;
    ASSERT_EQ(step, expect) << j["loss_curve"] << " recoveries " << j["recoveries"];
    ++expect;
  }
}

int64_t LastStep(const nlohmann::json& j) { return j["loss_curve"].back()[0].get<int64_t>(); }

TEST(Elastic, WithoutFaultsItTrainsExactlyAsWithout) {
  const std::vector<std::string> args = {"--steps", "12", "--batch-size", "16"};
  nlohmann::json elastic = Elastic("nofault", {"--nproc-per-node", "2"}, args);
  // The same run through `train` without --elastic.
  const std::string json = TempPath("plain.json"), out = TempPath("plain");
  std::vector<std::string> argv = {CDT_CLI, "train", "--nproc-per-node", "2", "--no-progress", "--json", json,
                                   "--dataset", "synthetic", "--synthetic-samples", "4000", "--model", "cnn",
                                   "--seed", "5"};
  argv.insert(argv.end(), args.begin(), args.end());
  Proc p = Spawn(argv, {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(300)), 0) << ReadFile(out);
  nlohmann::json plain = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(elastic["loss_curve"], plain["loss_curve"]);
  EXPECT_EQ(elastic["recoveries"].size(), 0u);
  EXPECT_EQ(elastic["generation"], 0);
}

TEST(Elastic, AKilledWorkerCostsARecoveryNotTheJob) {
  // One epoch of 4000 samples: 4 x 16 per step before the kill, 3 x 16 after.
  nlohmann::json j = Elastic("kill", {"--nproc-per-node", "4", "--inject", "kill:2@15"},
                             {"--epochs", "1", "--batch-size", "16"});
  ASSERT_EQ(j["recoveries"].size(), 1u) << j.dump(2);
  const auto& r = j["recoveries"][0];
  EXPECT_EQ(r["lost_workers"], nlohmann::json({2}));
  EXPECT_EQ(r["world_before"], 4);
  EXPECT_EQ(r["world_after"], 3);
  // Worker 2 died before step 15's forward: step 14's gradients may not have reached everyone,
  // so the committed state is that before step 14 or 15, never older.
  const int64_t resumed = r["resumed_step"].get<int64_t>();
  EXPECT_GE(resumed, 14);
  EXPECT_LE(resumed, 15);
  EXPECT_GE(r["rto_s"].get<double>(), r["detected_after_s"].get<double>());
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_EQ(j["generation"], 1);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  ExpectEveryStepOnce(j);
  // The epoch's remaining samples, re-partitioned among three: none skipped, none twice.
  const int64_t left = 4000 - resumed * 64;
  EXPECT_EQ(LastStep(j) + 1, resumed + (left + 47) / 48);
}

TEST(Elastic, TwoFailuresShrinkTheGroupTwiceAndRankZeroMayGo) {
  nlohmann::json j = Elastic("kill2", {"--nproc-per-node", "4", "--inject", "kill:0@8,kill:3@20"},
                             {"--steps", "30", "--batch-size", "16"});
  ASSERT_EQ(j["recoveries"].size(), 2u) << j.dump(2);
  EXPECT_EQ(j["recoveries"][0]["lost_workers"], nlohmann::json({0}));
  EXPECT_EQ(j["recoveries"][1]["lost_workers"], nlohmann::json({3}));
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  ExpectEveryStepOnce(j);
  EXPECT_EQ(LastStep(j), 29);
}

TEST(Elastic, AHungWorkerIsLeftBehindAfterTheTimeout) {
  std::string output;
  nlohmann::json j = Elastic("hang", {"--nproc-per-node", "3", "--inject", "hang:1@6", "--timeout", "2"},
                             {"--steps", "16", "--batch-size", "16"}, nullptr, &output);
  ASSERT_EQ(j["recoveries"].size(), 1u) << output;
  EXPECT_EQ(j["recoveries"][0]["lost_workers"], nlohmann::json({1}));
  EXPECT_EQ(j["world_size"], 2);
  ExpectEveryStepOnce(j);
  // The stopped worker is killed by its agent once the job is done.
  EXPECT_NE(output.find("worker 1"), std::string::npos) << output;
}

TEST(Elastic, AHotSpareTakesTheLostWorkersPlace) {
  std::string output;
  nlohmann::json j = Elastic("spare", {"--nproc-per-node", "3", "--spares", "1", "--inject", "kill:1@8"},
                             {"--steps", "20", "--batch-size", "16"}, nullptr, &output);
  ASSERT_EQ(j["recoveries"].size(), 1u) << output;
  const auto& r = j["recoveries"][0];
  EXPECT_EQ(r["lost_workers"], nlohmann::json({1}));
  EXPECT_EQ(r["world_before"], 3);
  EXPECT_EQ(r["world_after"], 3);  // the spare (worker 3) stepped in
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_TRUE(j["params_consistent"].get<bool>());  // it received the committed state
  ExpectEveryStepOnce(j);
  EXPECT_NE(output.find("spare worker 3 joins generation 1 as rank 2 of 3"), std::string::npos) << output;
}

TEST(Elastic, AnUnusedSpareLeavesQuietlyWhenTheJobEnds) {
  nlohmann::json j = Elastic("idle-spare", {"--nproc-per-node", "2", "--spares", "1"},
                             {"--steps", "6", "--batch-size", "16"});
  EXPECT_EQ(j["recoveries"].size(), 0u);
  EXPECT_EQ(j["world_size"], 2);
}

TEST(Elastic, BadFaultSpecsAreRefusedBeforeAnyWorkerStarts) {
  int rc = 0;
  std::string output;
  Elastic("badspec", {"--nproc-per-node", "2", "--inject", "kill:1"}, {"--steps", "2"}, &rc, &output);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(output.find("--inject 'kill:1'"), std::string::npos) << output;
}

}  // namespace
}  // namespace cdt
