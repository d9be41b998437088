// Elastic training end to end (`cann-dist-train elastic`, docs/elastic.md): workers really killed
// (SIGKILL) and really stopped (SIGSTOP) by scripted faults; the survivors re-form the group in
// process and train on from the committed state. Timings (rto_s) are measured by
// bench/run_elastic_recovery.sh, not asserted here.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "etcd_server.h"
#include "process_util.h"

namespace cdt {
namespace {

nlohmann::json Elastic(const std::string& tag, std::vector<std::string> elastic,
                       std::vector<std::string> train, int* exit_code = nullptr,
                       std::string* output = nullptr) {
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
  for (const auto& r : j["recoveries"])
    allowed_gaps.push_back(r["resumed_step"].get<int64_t>() - 1);
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

// Waits (up to `tries` x 20 ms) until rank 0's progress line shows a step: the group formed and
// trains. (The tests once waited for the autotuner's report, which shared memory made rare.)
void WaitForTraining(const std::string& out, int tries) {
  for (int i = 0; i < tries && ReadFile(out).find("[rank0]: step ") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

TEST(Elastic, WithoutFaultsItTrainsExactlyAsWithout) {
  const std::vector<std::string> args = {"--steps", "12", "--batch-size", "16"};
  nlohmann::json elastic = Elastic("nofault", {"--nproc-per-node", "2"}, args);
  // The same run through `train` without --elastic.
  const std::string json = TempPath("plain.json"), out = TempPath("plain");
  std::vector<std::string> argv = {
      CDT_CLI,     "train",     "--nproc-per-node",    "2",    "--no-progress", "--json", json,
      "--dataset", "synthetic", "--synthetic-samples", "4000", "--model",       "cnn",    "--seed",
      "5"};
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

TEST(Elastic, AKilledWorkerAmongSixteenCostsARecoveryNotTheJob) {
  // Issue 45: sixteen workers on one machine (shared memory between them), worker 5 killed: the
  // fifteen others re-form in process and finish the steps.
  nlohmann::json j = Elastic("kill16", {"--nproc-per-node", "16", "--inject", "kill:5@10"},
                             {"--steps", "20", "--batch-size", "16"});
  ASSERT_EQ(j["recoveries"].size(), 1u) << j.dump(2);
  const auto& r = j["recoveries"][0];
  EXPECT_EQ(r["lost_workers"], nlohmann::json({5}));
  EXPECT_EQ(r["world_before"], 16);
  EXPECT_EQ(r["world_after"], 15);
  EXPECT_EQ(j["world_size"], 15);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  ExpectEveryStepOnce(j);
  EXPECT_EQ(LastStep(j), 19);
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
  nlohmann::json j =
      Elastic("hang", {"--nproc-per-node", "3", "--inject", "hang:1@6", "--timeout", "2"},
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
  nlohmann::json j =
      Elastic("spare", {"--nproc-per-node", "3", "--spares", "1", "--inject", "kill:1@8"},
              {"--steps", "20", "--batch-size", "16"}, nullptr, &output);
  ASSERT_EQ(j["recoveries"].size(), 1u) << output;
  const auto& r = j["recoveries"][0];
  EXPECT_EQ(r["lost_workers"], nlohmann::json({1}));
  EXPECT_EQ(r["world_before"], 3);
  EXPECT_EQ(r["world_after"], 3);  // the spare (worker 3) stepped in
  EXPECT_EQ(j["world_size"], 3);
  EXPECT_TRUE(j["params_consistent"].get<bool>());  // it received the committed state
  ExpectEveryStepOnce(j);
  EXPECT_NE(output.find("spare worker 3 joins generation 1 as rank 2 of 3"), std::string::npos)
      << output;
  // Same world size, same global batches: the curve is the fault-free one (up to the order in
  // which the allreduce adds the ranks' contributions), so the committed state — parameters,
  // momentum, sampler position — came back whole.
  nlohmann::json fault_free =
      Elastic("spare-ref", {"--nproc-per-node", "3"}, {"--steps", "20", "--batch-size", "16"});
  std::map<int64_t, double> expect;
  for (auto& e : fault_free["loss_curve"]) expect[e[0].get<int64_t>()] = e[1].get<double>();
  for (auto& e : j["loss_curve"]) {
    const int64_t step = e[0].get<int64_t>();
    EXPECT_NEAR(e[1].get<double>(), expect.at(step), 1e-5 * std::fabs(expect.at(step)))
        << "step " << step;
  }
}

// The children of `parent` and whether each is a hot spare (CDT_SPARE=1 in its environment).
std::map<pid_t, bool> ChildrenOf(pid_t parent) {
  std::map<pid_t, bool> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::ifstream env(e.path() / "environ");
    const std::string vars((std::istreambuf_iterator<char>(env)), std::istreambuf_iterator<char>());
    out[static_cast<pid_t>(std::stol(name))] = vars.find("CDT_SPARE=1") != std::string::npos;
  }
  return out;
}

// Every worker killed, only a spare left: nobody holds the state, nobody opens a round. The spare
// waited for one forever, and its agent with it; now the job ends within the timeout, saying why.
TEST(Elastic, AJobWhoseEveryWorkerDiedEndsWithinTheTimeoutThoughASpareWaits) {
  const std::string out = TempPath("all-dead");
  Proc agent = Spawn({CDT_CLI,
                      "elastic",
                      "--nproc-per-node",
                      "2",
                      "--spares",
                      "1",
                      "--timeout",
                      "3",
                      "--",
                      "--no-progress",
                      "--dataset",
                      "synthetic",
                      "--synthetic-samples",
                      "40000",
                      "--model",
                      "cnn",
                      "--steps",
                      "100000",
                      "--batch-size",
                      "16"},
                     {}, out);
  std::map<pid_t, bool> children;
  for (int i = 0; i < 300 && children.size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    children = ChildrenOf(agent.pid);
  }
  ASSERT_EQ(children.size(), 3u) << ReadFile(out);
  std::this_thread::sleep_for(std::chrono::seconds(4));  // generation 0 formed and trains
  const auto killed_at = std::chrono::steady_clock::now();
  for (const auto& [pid, spare] : children)
    if (!spare) kill(pid, SIGKILL);
  const int rc = WaitFor(agent.pid, std::chrono::seconds(60));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  const std::string text = ReadFile(out);
  std::printf("the job ended %.1f s after its last worker died (timeout 3 s)\n", took);
  EXPECT_NE(rc, 0) << text;
  EXPECT_NE(rc, -1) << text;
  EXPECT_LE(took, 3 + 5.0) << text;
  EXPECT_NE(text.find("every worker of generation 0 (0, 1) is gone"), std::string::npos) << text;
}

TEST(Elastic, AnUnusedSpareLeavesQuietlyWhenTheJobEnds) {
  nlohmann::json j = Elastic("idle-spare", {"--nproc-per-node", "2", "--spares", "1"},
                             {"--steps", "6", "--batch-size", "16"});
  EXPECT_EQ(j["recoveries"].size(), 0u);
  EXPECT_EQ(j["world_size"], 2);
}

// Kill every process of a job (agent and workers, SIGKILL) while it checkpoints in the
// background, flip a byte in the newest checkpoint, restart with --resume: it continues from the
// newest checkpoint that verifies, with a warning about the other, at the same sample position
// (the loss curve is the uninterrupted one's).
TEST(Elastic, AfterKillingEveryProcessAResumeUsesTheNewestValidCheckpoint) {
  namespace fs = std::filesystem;
  const std::string dir = TempPath("killall-ckpt");
  fs::remove_all(dir);
  const std::vector<std::string> common = {
      CDT_CLI,     "train",     "--nproc-per-node",    "2",    "--model",       "cnn",
      "--dataset", "synthetic", "--synthetic-samples", "4000", "--seed",        "5",
      "--steps",   "2000",      "--batch-size",        "16",   "--no-progress", "--checkpoint-dir",
      dir};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = common;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  };
  std::vector<std::string> victim = {"setsid"};
  for (const auto& a : with({"--checkpoint-every", "4", "--checkpoint-incremental",
                             "--checkpoint-full-every", "3", "--checkpoint-keep", "10"}))
    victim.push_back(a);
  Proc p = Spawn(victim, {}, TempPath("killall.out"));
  auto checkpoints = [&] {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".cdtc") out.push_back(e.path().string());
    std::sort(out.begin(), out.end());
    return out;
  };
  for (int i = 0; i < 3000 && checkpoints().size() < 4; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(-p.pid, SIGKILL);  // the whole session: agent and workers
  WaitFor(p.pid, std::chrono::seconds(30));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // workers reaped by init
  const auto files = checkpoints();
  ASSERT_GE(files.size(), 4u) << ReadFile(TempPath("killall.out"));
  const std::string newest = files.back();
  auto step_of = [](const std::string& path) {
    return std::stoll(fs::path(path).filename().string().substr(5, 12));
  };
  const int64_t previous_step = step_of(files[files.size() - 2]);
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  const int64_t stop = previous_step + 8;
  const std::string json = TempPath("resumed.json"), ref_json = TempPath("reference.json");
  Proc r = Spawn(with({"--resume", "--stop-after", std::to_string(stop), "--json", json}), {},
                 TempPath("resumed.out"));
  ASSERT_EQ(WaitFor(r.pid, std::chrono::seconds(300)), 0) << ReadFile(TempPath("resumed.out"));
  const std::string output = ReadFile(TempPath("resumed.out"));
  EXPECT_NE(output.find("warning: checkpoint '" + newest + "'"), std::string::npos) << output;
  nlohmann::json resumed = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(resumed["first_step"], previous_step);
  // The uninterrupted run, in another directory.
  std::vector<std::string> ref = common;
  ref.back() = dir + "-reference";
  ref.insert(ref.end(), {"--stop-after", std::to_string(stop), "--json", ref_json});
  Proc u = Spawn(ref, {}, TempPath("reference.out"));
  ASSERT_EQ(WaitFor(u.pid, std::chrono::seconds(300)), 0) << ReadFile(TempPath("reference.out"));
  nlohmann::json whole = nlohmann::json::parse(ReadFile(ref_json));
  std::map<int64_t, double> expect;
  for (auto& e : whole["loss_curve"]) expect[e[0].get<int64_t>()] = e[1].get<double>();
  ASSERT_FALSE(resumed["loss_curve"].empty());
  for (auto& e : resumed["loss_curve"]) {
    const int64_t step = e[0].get<int64_t>();
    ASSERT_TRUE(expect.count(step)) << step;
    EXPECT_NEAR(e[1].get<double>(), expect[step], 1e-6 * std::fabs(expect[step]))
        << "step " << step;
  }
}

// Node 0's agent hosts the store. Killed (SIGKILL) mid-run, it takes the store with it; the
// workers need the store only to re-form a group, so a job without another failure finishes and
// reports (docs/elastic.md says what happens when a failure then comes: the job ends).
TEST(Elastic, TheJobOutlivesTheStoreHostingAgentUntilItNeedsARendezvous) {
  const std::string json = TempPath("agentkill.json"), out = TempPath("agentkill.out");
  Proc p = Spawn({"setsid", CDT_CLI, "elastic", "--nproc-per-node", "2", "--",
                  "--json", json, "--dataset", "synthetic", "--synthetic-samples", "4000",
                  "--model", "cnn", "--steps", "400", "--batch-size", "16"},
                 {}, out);
  // Let the group form and train a little, then kill the agent alone.
  WaitForTraining(out, 500);
  ::kill(p.pid, SIGKILL);
  WaitFor(p.pid, std::chrono::seconds(10));
  for (int i = 0; i < 3000 && ReadFile(json).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // Written in full, and rank 0 tried (one short reconnect) to report the job finished.
  for (int i = 0; i < 500 && ReadFile(out).find("cannot tell the agents") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ::kill(-p.pid, SIGKILL);  // whatever is left of the session
  ASSERT_FALSE(ReadFile(json).empty()) << ReadFile(out);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["steps"], 400);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  EXPECT_NE(ReadFile(out).find("cannot tell the agents the job finished"), std::string::npos)
      << ReadFile(out);
}

// A rank slowed down 4x from step 120 (a throttling device): the health monitor sees the step
// time drift, every rank checkpoints at once. Health samples every 0.05 s keep this short.
TEST(Elastic, ASlowingRankMakesTheHealthMonitorCheckpoint) {
  std::string output;
  const std::string dir = TempPath("health-ckpt");
  nlohmann::json j = Elastic("slow", {"--nproc-per-node", "2", "--inject", "slow:1=4@120"},
                             {"--steps", "200", "--batch-size", "16", "--health-interval", "0.05",
                              "--checkpoint-dir", dir},
                             nullptr, &output);
  EXPECT_NE(output.find("injected fault: slow x4.0 from step 120"), std::string::npos) << output;
  EXPECT_NE(output.find("slowdown: step time"), std::string::npos) << output;
  EXPECT_GE(j["checkpoints"]["health"].get<int>(), 1) << output;
  EXPECT_GE(j["checkpoints"]["written"].get<int>(), 2);  // the health one and the last
}

// With etcd as the rendezvous store (started by the test), the store outlives node 0's agent:
// kill the agent (SIGKILL), then a worker; nobody reports the dead worker, the survivors' round
// closes after its last call, and the job finishes on two workers.
TEST(Elastic, WithEtcdTheJobSurvivesItsAgentAndThenAWorker) {
  if (!testing::EtcdServer::available())
    GTEST_SKIP() << "etcd is not installed (Debian etcd-server)";
  testing::EtcdServer etcd;
  const std::string json = TempPath("etcd.json"), out = TempPath("etcd.out");
  Proc p = Spawn({"setsid",
                  CDT_CLI,
                  "elastic",
                  "--nproc-per-node",
                  "3",
                  "--rdzv-backend",
                  "etcd",
                  "--rdzv-endpoint",
                  etcd.endpoint(),
                  "--inject",
                  "kill:2@300",
                  "--",
                  "--json",
                  json,
                  "--dataset",
                  "synthetic",
                  "--synthetic-samples",
                  "4000",
                  "--model",
                  "cnn",
                  "--steps",
                  "400",
                  "--batch-size",
                  "16"},
                 {}, out);
  WaitForTraining(out, 1500);
  ::kill(p.pid, SIGKILL);  // the agent alone
  WaitFor(p.pid, std::chrono::seconds(10));
  for (int i = 0; i < 6000 && ReadFile(json).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(-p.pid, SIGKILL);
  ASSERT_FALSE(ReadFile(json).empty()) << ReadFile(out);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["recoveries"].size(), 1u) << ReadFile(out);
  EXPECT_EQ(j["recoveries"][0]["lost_workers"], nlohmann::json({2}));
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  ExpectEveryStepOnce(j);
}

// `fault-inject` talks to a running job: it finds the job's store through the file its agent
// left (mode 0600), queues the fault, and the workers carry it out within ten steps.
TEST(Elastic, FaultInjectKillsAWorkerOfARunningJob) {
  const std::string job = "fi-" + std::to_string(::getpid());
  const std::string json = TempPath("fi.json"), out = TempPath("fi.out");
  Proc p = Spawn({CDT_CLI,
                  "elastic",
                  "--nproc-per-node",
                  "3",
                  "--job-id",
                  job,
                  "--",
                  "--json",
                  json,
                  "--dataset",
                  "synthetic",
                  "--synthetic-samples",
                  "4000",
                  "--model",
                  "cnn",
                  "--steps",
                  "300",
                  "--batch-size",
                  "16"},
                 {}, out);
  WaitForTraining(out, 1500);
  const std::string inject_out = TempPath("fi-inject.out");
  Proc f = Spawn({CDT_CLI, "fault-inject", "--job-id", job, "--kill", "1"}, {}, inject_out);
  ASSERT_EQ(WaitFor(f.pid, std::chrono::seconds(30)), 0) << ReadFile(inject_out);
  EXPECT_NE(ReadFile(inject_out).find("queued kill:1@0 for job " + job), std::string::npos)
      << ReadFile(inject_out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(300)), 0) << ReadFile(out);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  ASSERT_EQ(j["recoveries"].size(), 1u) << ReadFile(out);
  EXPECT_EQ(j["recoveries"][0]["lost_workers"], nlohmann::json({1}));
  EXPECT_EQ(j["world_size"], 2);
}

// Young/Daly: checkpoints every sqrt(2 C MTBF) seconds, C measured. A short MTBF makes them
// frequent, a long one leaves only the first (which measures C) and the last.
TEST(Elastic, CheckpointIntervalFollowsYoungDaly) {
  auto run = [](const std::string& tag, const std::string& mtbf) {
    const std::string json = TempPath(tag + ".json"), out = TempPath(tag + ".out");
    Proc p = Spawn({CDT_CLI,
                    "train",
                    "--nproc-per-node",
                    "2",
                    "--no-progress",
                    "--json",
                    json,
                    "--dataset",
                    "synthetic",
                    "--synthetic-samples",
                    "4000",
                    "--model",
                    "cnn",
                    "--steps",
                    "150",
                    "--batch-size",
                    "16",
                    "--checkpoint-dir",
                    TempPath(tag + "-ckpt"),
                    "--checkpoint-mtbf",
                    mtbf},
                   {}, out);
    EXPECT_EQ(WaitFor(p.pid, std::chrono::seconds(300)), 0) << ReadFile(out);
    return nlohmann::json::parse(ReadFile(json))["checkpoints"]["written"].get<int>();
  };
  EXPECT_EQ(run("yd-long", "1000000"), 2);
  EXPECT_GE(run("yd-short", "0.5"), 4);
}

// Below --min-workers the group pauses — checkpoints and waits — instead of failing: worker 1
// hangs (SIGSTOP), worker 0 alone is below --min-workers 2 and pauses; the test then wakes the
// stopped worker (SIGCONT), which rejoins, and the job finishes on two.
TEST(Elastic, BelowMinWorkersTheGroupPausesCheckpointsAndWaits) {
  namespace fs = std::filesystem;
  const std::string dir = TempPath("pause-ckpt"), json = TempPath("pause.json"),
                    out = TempPath("pause.out");
  fs::remove_all(dir);
  Proc p = Spawn({CDT_CLI,
                  "elastic",
                  "--nproc-per-node",
                  "2",
                  "--min-workers",
                  "2",
                  "--timeout",
                  "2",
                  "--inject",
                  "hang:1@20",
                  "--",
                  "--no-progress",
                  "--json",
                  json,
                  "--dataset",
                  "synthetic",
                  "--synthetic-samples",
                  "4000",
                  "--model",
                  "cnn",
                  "--steps",
                  "60",
                  "--batch-size",
                  "16",
                  "--checkpoint-dir",
                  dir},
                 {}, out);
  for (int i = 0; i < 3000 && ReadFile(out).find("paused:") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const std::string text = ReadFile(out);
  ASSERT_NE(text.find("worker 0: paused: 1 worker(s) present, --min-workers 2"), std::string::npos)
      << text;
  EXPECT_NE(text.find("state checkpointed to " + dir), std::string::npos) << text;
  const auto at = text.find("worker 1 (pid ");
  ASSERT_NE(at, std::string::npos) << text;
  const int pid = std::stoi(text.substr(at + 14));
  ::kill(pid, SIGCONT);  // it comes back
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(300)), 0) << ReadFile(out);
  nlohmann::json j = nlohmann::json::parse(ReadFile(json));
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  ExpectEveryStepOnce(j);
}

TEST(Elastic, BadFaultSpecsAreRefusedBeforeAnyWorkerStarts) {
  int rc = 0;
  std::string output;
  Elastic("badspec", {"--nproc-per-node", "2", "--inject", "kill:1"}, {"--steps", "2"}, &rc,
          &output);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(output.find("--inject 'kill:1'"), std::string::npos) << output;
  Elastic("badslow", {"--nproc-per-node", "2", "--inject", "slow:1=0.5@3"}, {"--steps", "2"}, &rc,
          &output);
  EXPECT_EQ(rc, 2);
  EXPECT_NE(output.find("FACTOR must be a number from 1 to 1000"), std::string::npos) << output;
}

// A group that may grow (--nnodes 1:2, started by node 0 alone) is checked at the size it may
// reach: a per-rank batch that two workers could not take from the dataset is refused before the
// first step, naming the growth, rather than ending the job at the regroup that admits node 1.
TEST(Elastic, ABatchTheGrownGroupCouldNotTakeIsRefusedAtTheStart) {
  const std::string out = TempPath("grow-batch");
  Proc p = Spawn({CDT_CLI,
                  "elastic",
                  "--nnodes",
                  "1:2",
                  "--nproc-per-node",
                  "1",
                  "--rdzv-endpoint",
                  "127.0.0.1:" + std::to_string(testing::EtcdServer::FreePort()),
                  "--timeout",
                  "5",
                  "--",
                  "--no-progress",
                  "--dataset",
                  "synthetic",
                  "--synthetic-samples",
                  "4000",
                  "--model",
                  "mlp",
                  "--steps",
                  "2",
                  "--batch-size",
                  "2500"},
                 {{"CDT_JOB_SECRET", "grow-batch"}}, out);
  EXPECT_EQ(WaitFor(p.pid, std::chrono::seconds(120)), 2) << ReadFile(out);
  EXPECT_NE(ReadFile(out).find("--batch-size 2500 x up to 2 worker(s) = 5000 samples a step, more "
                               "than the 4000 training samples of synthetic; use --batch-size 2000 "
                               "or less (the group may grow to 2 workers: --nnodes MIN:MAX)"),
            std::string::npos)
      << ReadFile(out);
}

}  // namespace
}  // namespace cdt
