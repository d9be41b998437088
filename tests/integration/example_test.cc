// examples/cpp/custom_model.cc end to end, in real processes: a user-defined libtorch model
// trained with the library alone — the Trainer on two processes, the elastic driver surviving a
// worker that kills itself, the carbon-aware runner driving the trainer in process.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include "process_util.h"

namespace cdt {
namespace {

uint16_t FreePort() {  // bound and released: free for the moment after
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t n = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
  ::close(fd);
  return ntohs(a.sin_port);
}

const std::map<std::string, std::string> kEnv = {
    {"CDT_JOB_SECRET", "an example secret of the test, 32 bytes or more long"}};

// Runs `world` ranks of the example with `extra` arguments; their exit codes and rank 0's JSON.
std::vector<int> RunRanks(const std::string& tag, int world, std::vector<std::string> extra,
                          nlohmann::json* json) {
  const std::string port = std::to_string(FreePort()), out = TempPath(tag + ".json");
  std::vector<Proc> procs;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> argv = {
        CDT_EXAMPLE, "--rank", std::to_string(r), "--world", std::to_string(world),
        "--port",    port,     "--json",          out};
    argv.insert(argv.end(), extra.begin(), extra.end());
    procs.push_back(Spawn(argv, kEnv, TempPath(tag + "-" + std::to_string(r))));
  }
  std::vector<int> codes;
  for (const Proc& p : procs) codes.push_back(WaitFor(p.pid, std::chrono::seconds(300)));
  *json = nlohmann::json::parse(ReadFile(out));
  return codes;
}

TEST(Example, TwoProcessesTrainAUserDefinedModelWithTheTrainer) {
  nlohmann::json j;
  const std::vector<int> codes = RunRanks("plain", 2, {"--steps", "200"}, &j);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << ReadFile(TempPath("plain-0"));
  EXPECT_EQ(j["model"], "tinynet");
  EXPECT_EQ(j["world_size"], 2);
  EXPECT_EQ(j["steps"], 200);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  const auto& curve = j["loss_curve"];
  EXPECT_LT(curve.back()[1].get<double>(), curve.front()[1].get<double>());
  EXPECT_GT(j["test_accuracy"].get<double>(), 0.7);  // Fashion-MNIST, 200 steps of 64
}

TEST(Example, TheElasticDriverRecoversFromAWorkerThatKillsItself) {
  nlohmann::json j;
  const std::vector<int> codes =
      RunRanks("elastic", 3, {"--mode", "elastic", "--steps", "120", "--inject", "kill:2@20"}, &j);
  EXPECT_EQ(codes[0], 0) << ReadFile(TempPath("elastic-0"));
  EXPECT_EQ(codes[1], 0) << ReadFile(TempPath("elastic-1"));
  EXPECT_EQ(codes[2], 128 + SIGKILL);
  EXPECT_TRUE(j["params_consistent"].get<bool>());
  EXPECT_EQ(j["generation"], 1);
  ASSERT_EQ(j["recoveries"].size(), 1u) << j.dump();
  const auto& rec = j["recoveries"][0];
  EXPECT_EQ(rec["lost_workers"], nlohmann::json::array({2}));
  EXPECT_EQ(rec["world_after"], 2);
}

TEST(Example, TheCarbonAwareRunnerDrivesTheTrainerInProcess) {
  const std::string out = TempPath("green.json"), dir = TempPath("green-dir");
  Proc p = Spawn({CDT_EXAMPLE, "--mode", "green", "--steps", "300", "--trace",
                  std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv", "--profiles",
                  std::string(CDT_KNOWLEDGE_BASE) + "/hardware_profiles/devices.json", "--dir", dir,
                  "--json", out},
                 kEnv, TempPath("green.log"));
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(300)), 0) << ReadFile(TempPath("green.log"));
  const std::string log = ReadFile(TempPath("green.log"));
  EXPECT_NE(log.find("calibrating on 1 worker(s)"), std::string::npos) << log;
  EXPECT_NE(log.find("paused"), std::string::npos) << log;  // 05:00 is not California's cleanest
  const nlohmann::json j = nlohmann::json::parse(ReadFile(out));
  EXPECT_EQ(j["samples"].get<double>(), 300.0 * 32);
  // The report accounts what ran against the unpaused baseline. Whether pausing won depends on
  // how long this machine's start-up is against its training (a quarter second per trace hour
  // stretches a 0.8 s start-up over three dirty hours before the window): it did on the machine
  // this test was written on, it did not on 2026-12-03's CI machine (5.9 g against 4.6 g; the
  // closing note of issue 34 has the figures). What must hold anywhere: both are accounted and
  // the reduction is what they say.
  const double carbon = j["carbon_kg"].get<double>(),
               baseline = j["baseline_carbon_kg"].get<double>();
  EXPECT_GT(carbon, 0);
  EXPECT_GT(baseline, 0);
  EXPECT_NEAR(j["reduction"].get<double>(), 1 - carbon / baseline, 1e-9);
}

}  // namespace
}  // namespace cdt
