// Multi-process tests over real TCP: the full correctness sweep in separate processes, kill -9 and
// SIGSTOP of a rank mid-allreduce (survivors must fail with a typed error within timeout + 2 s and
// then form a working generation 1), and the launcher (`cann-dist-train launch`, `bench --check`,
// mpirun).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "comm/store/tcp_store_server.h"
#include "process_util.h"

namespace cdt {
namespace {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t Field(const std::string& text, const std::string& key) {
  size_t at = text.find(key + "=");
  if (at == std::string::npos) return -1;
  return std::stoll(text.substr(at + key.size() + 1));
}

struct Job {
  TcpStoreServer server{"127.0.0.1", 0, "it-secret"};
  std::vector<Proc> procs;

  void Start(int n, const std::vector<std::string>& args, int timeout_ms, const std::string& tag) {
    for (int r = 0; r < n; ++r) {
      std::vector<std::string> argv = {CDT_TEST_WORKER};
      argv.insert(argv.end(), args.begin(), args.end());
      procs.push_back(Spawn(argv,
                            {{"RANK", std::to_string(r)},
                             {"WORLD_SIZE", std::to_string(n)},
                             {"MASTER_ADDR", "127.0.0.1"},
                             {"MASTER_PORT", std::to_string(server.address().port)},
                             {"CDT_JOB_SECRET", "it-secret"},
                             {"CDT_TIMEOUT_MS", std::to_string(timeout_ms)}},
                            TempPath(tag + "_rank" + std::to_string(r))));
    }
  }
  ~Job() {
    for (auto& p : procs) {
      if (p.pid <= 0) continue;  // already reaped; kill(-1, ...) would signal every process we own
      kill(p.pid, SIGCONT);
      kill(p.pid, SIGKILL);
      waitpid(p.pid, nullptr, 0);
    }
  }

  // Waits for every rank (240 s each): each must exit 0 having printed `expect`.
  void ExpectEveryRankExitsWith(const std::string& expect) {
    for (auto& p : procs) {
      const int rc = WaitFor(p.pid, std::chrono::seconds(240));
      const std::string out = ReadFile(p.out);
      EXPECT_EQ(rc, 0) << out;
      EXPECT_NE(out.find(expect), std::string::npos) << out;
      p.pid = -1;
    }
    procs.clear();
  }
};

class SweepTest : public ::testing::TestWithParam<int> {};

TEST_P(SweepTest, EveryAlgorithmTypeAndCountAcrossProcesses) {
  const int n = GetParam();
  Job job;
  job.Start(n, {"sweep"}, 60000, "sweep" + std::to_string(n));
  job.ExpectEveryRankExitsWith("wrong=0");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SweepTest, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// Worlds of 16-128 ranks on this machine (issue 45), two emulated nodes so the node arenas and
// TCP between them both carry: every collective once, bitwise against its closed form. 128 is the
// first world past the mesh listener's old backlog (tcp_mesh.cc: 2 x 127 dials against 128), which
// did not form within the 120 s timeout; it now forms and checks in ~6 s, 256 ranks in ~26 s.
class ManyRanksTest : public ::testing::TestWithParam<int> {};

TEST_P(ManyRanksTest, EveryCollectiveIsExact) {
  const int n = GetParam();
  Job job;
  job.Start(n, {"collectives"}, 120000, "many" + std::to_string(n));
  job.ExpectEveryRankExitsWith("world=" + std::to_string(n) + " wrong=0");
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ManyRanksTest, ::testing::Values(16, 32, 64, 128),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

// Kills (or stops) rank 2 of 4 while they allreduce; checks the survivors.
void FailOneRank(int signal_number) {
  const int timeout_ms = 3000;
  Job job;
  job.Start(4, {"fail-and-recover", "3"}, timeout_ms, "fail" + std::to_string(signal_number));
  // Wait until every rank is in its allreduce loop.
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (auto& p : job.procs)
    while (ReadFile(p.out).find("RUNNING") == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), until)
          << "rank did not start: " << ReadFile(p.out);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const int64_t fault_ns = MonotonicNs();
  ASSERT_EQ(kill(job.procs[2].pid, signal_number), 0);
  for (int r : {0, 1, 3}) {
    int rc = WaitFor(job.procs[r].pid, std::chrono::seconds(60));
    std::string out = ReadFile(job.procs[r].out);
    ASSERT_EQ(rc, 0) << "rank " << r << ":\n" << out;
    job.procs[r].pid = -1;
    int64_t detected = Field(out, "detected_ns");
    ASSERT_GT(detected, 0) << out;
    double seconds = (detected - fault_ns) / 1e9;
    std::printf("rank %d detected the %s of rank 2 after %.3f s (timeout %.1f s): %s\n", r,
                signal_number == SIGKILL ? "kill -9" : "SIGSTOP", seconds, timeout_ms / 1e3,
                out.substr(out.find("MESSAGE"))
                    .substr(0, out.substr(out.find("MESSAGE")).find('\n'))
                    .c_str());
    EXPECT_LE(seconds, timeout_ms / 1e3 + 2.0) << out;
    EXPECT_TRUE(out.find("code=peer lost") != std::string::npos ||
                out.find("code=timeout") != std::string::npos ||
                out.find("code=aborted") != std::string::npos)
        << out;
    if (signal_number == SIGKILL) {  // the socket or the shared-memory pidfd names the dead rank
      EXPECT_NE(out.substr(out.find("MESSAGE")).find("rank 2"), std::string::npos) << out;
    }
    EXPECT_NE(out.find("RECOVERED"), std::string::npos) << out;
    EXPECT_NE(out.find("world=3 sum=3"), std::string::npos) << out;
  }
  // The ranks share memory on this host (auto = hierarchical in shared memory): the segments'
  // names went as soon as every rank had mapped them, so neither failure leaves one behind.
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec))
    EXPECT_EQ(entry.path().filename().string().rfind("cdt-it-", 0), std::string::npos)
        << "left behind: " << entry.path();
}

TEST(FailureDetection, KillDashNineMidAllreduce) { FailOneRank(SIGKILL); }
TEST(FailureDetection, SigstopMidAllreduce) { FailOneRank(SIGSTOP); }

TEST(Launcher, SetsTorchrunVariablesForEveryWorker) {
  std::string out = TempPath("launch_env");
  Proc p = Spawn({CDT_CLI, "launch", "--nproc-per-node", "3", "--", "sh", "-c",
                  "echo rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK/$LOCAL_WORLD_SIZE "
                  "master=$MASTER_ADDR:$MASTER_PORT job=$CDT_JOB_ID"},
                 {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(30)), 0) << ReadFile(out);
  std::string text = ReadFile(out);
  for (int r = 0; r < 3; ++r)
    EXPECT_NE(text.find("rank=" + std::to_string(r) + " world=3 local=" + std::to_string(r) +
                        "/3 master=127.0.0.1:"),
              std::string::npos)
        << text;
}

TEST(Launcher, FirstFailureStopsTheOthersAndIsReturned) {
  std::string out = TempPath("launch_fail");
  auto start = std::chrono::steady_clock::now();
  Proc p = Spawn({CDT_CLI, "launch", "--nproc-per-node", "3", "--", "sh", "-c",
                  "if [ \"$RANK\" = 1 ]; then sleep 0.3; exit 7; fi; exec sleep 60"},
                 {}, out);
  int rc = WaitFor(p.pid, std::chrono::seconds(30));
  EXPECT_EQ(rc, 7) << ReadFile(out);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(ReadFile(out).find("rank 1 (local rank 1"), std::string::npos) << ReadFile(out);
}

// A bad launch option is refused before anything starts, naming the flag, the environment
// variable it may have come from, and the value.
TEST(Launcher, BadLaunchOptionsNameTheirFlagVariableAndValue) {
  struct Case {
    std::vector<std::string> args;
    std::map<std::string, std::string> env;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{},
       {{"CDT_NNODES", "2"}, {"CDT_NODE_RANK", "5"}},
       "--node-rank (CDT_NODE_RANK) must be in 0..1 for --nnodes 2, not 5"},
      {{"--nproc-per-node", "0"},
       {},
       "--nproc-per-node (CDT_NPROC_PER_NODE) must be between 1 and 1024, not 0"},
      {{}, {{"CDT_NNODES", "abc"}}, "CDT_NNODES='abc'"}};
  for (const Case& c : cases) {
    std::string out = TempPath("launch_bad");
    std::vector<std::string> cmd = {CDT_CLI, "launch"};
    cmd.insert(cmd.end(), c.args.begin(), c.args.end());
    cmd.insert(cmd.end(), {"--", "true"});
    Proc p = Spawn(cmd, c.env, out);
    EXPECT_EQ(WaitFor(p.pid, std::chrono::seconds(30)), 2) << ReadFile(out);
    EXPECT_NE(ReadFile(out).find(c.says), std::string::npos) << ReadFile(out);
  }
}

// CDT_SHM_SLOT_BYTES=-1 became a slot of size_t(-1) bytes, a segment laid out for 4 KiB slots
// and rank 1 killed by SIGSEGV as 4 MiB chunks went in (issue 41, item 2). Refused: exit 2,
// naming the variable and its range.
TEST(Launcher, AWrappingSharedMemorySlotSizeIsRefusedNamingTheVariable) {
  for (const char* bad : {"-1", "0", "4095", "1073741825", "12abc", "99999999999999999999"}) {
    std::string out = TempPath("shm_slot_bad");
    Proc p = Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "2", "--min-bytes", "4M",
                    "--max-bytes", "4M"},
                   {{"CDT_SHM_SLOT_BYTES", bad}}, out);
    EXPECT_EQ(WaitFor(p.pid, std::chrono::seconds(60)), 2) << bad << ": " << ReadFile(out);
    EXPECT_NE(ReadFile(out).find(std::string("CDT_SHM_SLOT_BYTES='") + bad +
                                 "': expected a whole number from 4096 to 1073741824"),
              std::string::npos)
        << ReadFile(out);
    EXPECT_EQ(ReadFile(out).find("signal"), std::string::npos) << ReadFile(out);
  }
}

TEST(Launcher, BenchAllreduceAllAlgorithmsChecked) {
  std::string out = TempPath("bench"), json = TempPath("bench.json");
  Proc p =
      Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "4", "--algo", "all", "--min-bytes",
             "1K", "--max-bytes", "1M", "--iters", "3", "--check", "--json", json},
            {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(120)), 0) << ReadFile(out);
  std::string doc = ReadFile(json);
  EXPECT_NE(doc.find("\"world_size\": 4"), std::string::npos) << doc;
  for (const char* algo : {"ring", "rd", "rhd", "tree", "hier", "auto"})
    EXPECT_NE(doc.find(std::string("\"algo\": \"") + algo + "\""), std::string::npos) << algo;
  EXPECT_EQ(doc.find("WRONG"), std::string::npos) << doc;
}

// --device host-standin: the buffers behind the device staging pipeline (small chunks: many
// through 3 slots), across processes, every algorithm exact; --device cuda where this build or
// machine has no GPU is refused naming why, before any rank hangs.
TEST(Launcher, BenchAllreduceOnDeviceBuffersIsExact) {
  std::string out = TempPath("bench_device"), json = TempPath("bench_device.json");
  Proc p = Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "3", "--algo", "all",
                  "--min-bytes", "4", "--max-bytes", "1M", "--iters", "2", "--warmup", "2", "--check", "--device",
                  "host-standin", "--staging-chunk", "64K", "--json", json},
                 {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(180)), 0) << ReadFile(out);
  const std::string doc = ReadFile(json);
  EXPECT_EQ(doc.find("WRONG"), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"device\": \"host stand-in (no device)\""), std::string::npos) << doc;
  std::string refused = TempPath("bench_cuda");
  Proc q = Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "2", "--device", "cuda:0"},
                 {{"CUDA_VISIBLE_DEVICES", ""}}, refused);
  EXPECT_EQ(WaitFor(q.pid, std::chrono::seconds(60)), 2) << ReadFile(refused);
  EXPECT_NE(ReadFile(refused).find("--device cuda:0: "), std::string::npos) << ReadFile(refused);
}

// Same-node ranks share memory unless CDT_SHM=0: topo-scan shows the measured "shm" level (and
// the plan's hierarchical allreduce) only then, and `bench --check` is exact either way.
// --encrypt across processes: every algorithm, every element checked, over sealed TCP (shared
// memory off, so every byte crosses a sealed connection).
TEST(Launcher, EncryptedBenchAllreduceIsExactForEveryAlgorithm) {
  std::string out = TempPath("bench_sealed"), json = TempPath("bench_sealed.json");
  Proc p =
      Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "3", "--algo", "all", "--min-bytes",
             "4", "--max-bytes", "1M", "--iters", "2", "--check", "--encrypt", "--json", json},
            {{"CDT_SHM", "0"}}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(180)), 0) << ReadFile(out);
  const std::string doc = ReadFile(json);
  EXPECT_EQ(doc.find("WRONG"), std::string::npos) << doc;
  for (const char* algo : {"ring", "rd", "rhd", "tree", "auto"})
    EXPECT_NE(doc.find(std::string("\"algo\": \"") + algo + "\""), std::string::npos) << algo;
}

TEST(Launcher, TopoScanShowsTheSharedMemoryLevelUnlessTurnedOff) {
  for (const char* shm : {"1", "0"}) {
    std::string out = TempPath(std::string("toposcan") + shm);
    std::string json = TempPath(std::string("toposcan") + shm + ".json");
    Proc p = Spawn(
        {CDT_CLI, "topo-scan", "--nproc-per-node", "3", "--cache-dir", "none", "--json", json},
        {{"CDT_SHM", shm}}, out);
    ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(120)), 0) << ReadFile(out);
    const auto doc = nlohmann::json::parse(ReadFile(json));
    bool has_shm = false;
    for (const auto& level : doc.at("levels"))
      if (level.at("name") == "shm") {
        has_shm = true;
        EXPECT_GT(level.at("alpha_us").get<double>(), 0) << level;
        EXPECT_GT(level.at("beta_GBps").get<double>(), 0) << level;
      }
    EXPECT_EQ(has_shm, std::string(shm) == "1") << doc.dump(2);
    if (std::string(shm) == "1") {
      for (const auto& e : doc.at("plan")) EXPECT_EQ(e.at("algorithm"), "hier") << doc.dump(2);
      EXPECT_NE(ReadFile(out).find("level     : shm"), std::string::npos) << ReadFile(out);
    }
    std::string bench = TempPath(std::string("shmbench") + shm);
    Proc b =
        Spawn({CDT_CLI, "bench", "allreduce", "--nproc-per-node", "3", "--algo", "auto",
               "--min-bytes", "4", "--max-bytes", "4M", "--iters", "3", "--warmup", "2", "--check"},
              {{"CDT_SHM", shm}}, bench);
    ASSERT_EQ(WaitFor(b.pid, std::chrono::seconds(120)), 0) << ReadFile(bench);
    EXPECT_NE(ReadFile(bench).find("every element of every size matched"), std::string::npos)
        << ReadFile(bench);
  }
}

// Every algorithm from 4 bytes up. On a machine with fewer cores than ranks this used to print
// nothing for minutes: the warm-up and the autotuner each asked for 4 MiB of traffic per size, a
// million and two million calls at 4 bytes (issue 29). Worlds 3 and 7 run the benchmark's own
// warm-up (bounded now at 0.5 s a size); the others warm up twice, to keep CI short (the autotuner
// still decides `auto` first).
class SmallMessageBench : public ::testing::TestWithParam<int> {};

TEST_P(SmallMessageBench, EveryAlgorithmFromFourBytesFinishesAndIsExact) {
  const int n = GetParam();
  std::string out = TempPath("bench-small" + std::to_string(n));
  std::string json = TempPath("bench-small" + std::to_string(n) + ".json");
  std::vector<std::string> cmd = {CDT_CLI,
                                  "bench",
                                  "allreduce",
                                  "--nproc-per-node",
                                  std::to_string(n),
                                  "--algo",
                                  "all",
                                  "--min-bytes",
                                  "4",
                                  "--max-bytes",
                                  "4K",
                                  "--iters",
                                  "2",
                                  "--check",
                                  "--timeout",
                                  "20",
                                  "--json",
                                  json};
  if (n != 3 && n != 7) cmd.insert(cmd.end(), {"--warmup", "2"});
  Proc p = Spawn(cmd, {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(150)), 0) << ReadFile(out);
  const auto doc = nlohmann::json::parse(ReadFile(json));
  std::set<std::pair<std::string, size_t>> rows;
  for (const auto& row : doc.at("results")) {
    rows.emplace(row.at("algo").get<std::string>(), row.at("bytes").get<size_t>());
    EXPECT_EQ(row.at("check"), "ok") << row.dump();
  }
  for (const char* algo : {"ring", "rd", "rhd", "tree", "hier", "auto"})
    for (size_t bytes = 4; bytes <= 4096; bytes *= 4)
      EXPECT_EQ(rows.count({algo, bytes}), 1u) << algo << " " << bytes << "\n" << doc.dump(1);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SmallMessageBench, ::testing::Range(2, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

TEST(Launcher, BenchCompressReportsEveryCompressor) {
  // Two ranks over TCP: every compressor's row, its wire bytes as the compressor defines them
  // (fp16 half of fp32, PowerSGD (rows + cols) r floats + the vector), errors within reason.
  std::string out = TempPath("bench-compress"), json = TempPath("bench-compress.json");
  Proc p = Spawn({CDT_CLI, "bench", "compress", "--nproc-per-node", "2", "--shape", "96x130,7",
                  "--iters", "3", "--warmup", "1", "--json", json},
                 {}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(120)), 0) << ReadFile(out);
  std::string doc = ReadFile(json);
  EXPECT_NE(doc.find("\"world_size\": 2"), std::string::npos) << doc;
  EXPECT_NE(doc.find("\"layout\": \"96x130,7\""), std::string::npos) << doc;
  for (const char* name :
       {"none", "fp16", "bf16", "int8", "topk", "randomk", "powersgd", "signsgd"})
    EXPECT_NE(doc.find(std::string("\"compressor\": \"") + name + "\""), std::string::npos) << name;
  const size_t n = 96 * 130 + 7;
  EXPECT_NE(doc.find("\"wire_bytes\": " + std::to_string(2 * n)), std::string::npos)
      << doc;  // fp16
  EXPECT_NE(doc.find("\"wire_bytes\": " + std::to_string(4 * ((96 + 130) * 2 + 7))),
            std::string::npos)
      << doc;  // powersgd, rank 2
  // 16-bit sparse values: random-k at its default 75% sends 2 bytes a value.
  std::string out16 = TempPath("bench-compress-fp16"),
              json16 = TempPath("bench-compress-fp16.json");
  Proc h =
      Spawn({CDT_CLI, "bench", "compress", "--nproc-per-node", "2", "--shape", "96x130,7",
             "--compressors", "randomk,topk", "--values", "fp16", "--iters", "2", "--json", json16},
            {}, out16);
  ASSERT_EQ(WaitFor(h.pid, std::chrono::seconds(120)), 0) << ReadFile(out16);
  const std::string doc16 = ReadFile(json16);
  const size_t k75 = (3 * n + 3) / 4;  // ceil(0.75 n)
  EXPECT_NE(doc16.find("\"wire_bytes\": " + std::to_string(2 * k75)), std::string::npos) << doc16;
  EXPECT_NE(doc16.find("\"param\": \"k=0.75/fp16\""), std::string::npos) << doc16;
  // Bad options are refused by the launcher before any worker starts, naming the option: one
  // line, without the launcher's "exited with status 2; stopping the other workers" after it.
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"--shape", "96y130"}, "--shape"},
      {{"--compressors", "fp16,zstd"}, "--compressors: unknown compressor 'zstd'"},
      {{"--powersgd-rank", "0"}, "--powersgd-rank"},
      {{"--ratio", "1.5"}, "--ratio"},
      {{"--values", "int4"}, "--values 'int4'"}};
  for (const auto& [args, says] : refused) {
    std::string bad = TempPath("bench-compress-bad");
    std::vector<std::string> cmd = {CDT_CLI, "bench", "compress", "--nproc-per-node", "2"};
    cmd.insert(cmd.end(), args.begin(), args.end());
    Proc q = Spawn(cmd, {}, bad);
    EXPECT_EQ(WaitFor(q.pid, std::chrono::seconds(60)), 2) << ReadFile(bad);
    EXPECT_NE(ReadFile(bad).find(says), std::string::npos) << ReadFile(bad);
    EXPECT_EQ(ReadFile(bad).find("stopping the other workers"), std::string::npos) << ReadFile(bad);
  }
  // A size that is not a whole number of floats was benchmarked as one float less, silently.
  std::string odd = TempPath("bench-compress-odd");
  Proc r = Spawn({CDT_CLI, "bench", "compress", "--size", "6"}, {}, odd);
  EXPECT_EQ(WaitFor(r.pid, std::chrono::seconds(60)), 2) << ReadFile(odd);
  EXPECT_NE(ReadFile(odd).find("--size: 6 bytes"), std::string::npos) << ReadFile(odd);
}

TEST(Launcher, ForwardsSigtermToWorkers) {
  std::string out = TempPath("launch_sigterm");
  Proc p = Spawn(
      {CDT_CLI, "launch", "--nproc-per-node", "2", "--", "sh", "-c",
       "trap 'echo got-term-$RANK; exit 0' TERM; echo ready-$RANK; while :; do sleep 0.05; done"},
      {}, out);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ReadFile(out).find("ready-1") == std::string::npos ||
         ReadFile(out).find("ready-0") == std::string::npos) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << ReadFile(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(p.pid, SIGTERM);
  int rc = WaitFor(p.pid, std::chrono::seconds(20));
  std::string text = ReadFile(out);
  EXPECT_EQ(rc, 128 + SIGTERM) << text;
  EXPECT_NE(text.find("got-term-0"), std::string::npos) << text;
  EXPECT_NE(text.find("got-term-1"), std::string::npos) << text;
}

// An agent killed with SIGKILL forwards nothing; its workers must not run on unsupervised
// (holding their ports and memory) after it.
TEST(Launcher, WorkersDoNotOutliveAnAgentKilledWithSigkill) {
  std::string out = TempPath("launch_sigkill");
  Proc p = Spawn({CDT_CLI, "launch", "--nproc-per-node", "2", "--", "sh", "-c",
                  "echo worker-$RANK-pid=$$; exec sleep 120"},
                 {}, out);
  std::vector<pid_t> workers;
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int r = 0; r < 2; ++r) {
    const std::string key = "worker-" + std::to_string(r) + "-pid=";
    std::string text;
    while ((text = ReadFile(out)).find(key) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << text;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    workers.push_back(std::stoi(text.substr(text.find(key) + key.size())));
  }
  kill(p.pid, SIGKILL);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(10)), 128 + SIGKILL);
  // Gone: no such process, or a zombie waiting for whoever adopted it to reap it.
  auto running = [](pid_t pid) {
    std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const auto paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
  };
  until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (pid_t w : workers) {
    while (running(w) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(running(w)) << "worker pid " << w << " still runs after its agent was killed";
    if (running(w)) kill(w, SIGKILL);
  }
}

TEST(Launcher, WorkersRunUnderSrunEnvironment) {
  // What srun gives each task; rank 0 hosts the store at MASTER_ADDR:MASTER_PORT.
  std::vector<Proc> procs;
  for (int r = 0; r < 2; ++r)
    procs.push_back(Spawn({CDT_CLI, "bench", "allreduce", "--backend", "tcp", "--min-bytes", "4K",
                           "--max-bytes", "64K", "--iters", "3", "--check"},
                          {{"SLURM_PROCID", std::to_string(r)},
                           {"SLURM_NTASKS", "2"},
                           {"SLURM_LOCALID", std::to_string(r)},
                           {"SLURM_NTASKS_PER_NODE", "2"},
                           {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", "29733"},
                           {"CDT_JOB_SECRET", "srun-test"}},
                          TempPath("srun" + std::to_string(r))));
  for (auto& p : procs) EXPECT_EQ(WaitFor(p.pid, std::chrono::seconds(60)), 0) << ReadFile(p.out);
  EXPECT_NE(ReadFile(procs[0].out).find("every element of every size matched"), std::string::npos)
      << ReadFile(procs[0].out);
}

TEST(Launcher, WorkersRunUnderMpirun) {
  if (system("command -v mpirun > /dev/null 2>&1") != 0) GTEST_SKIP() << "mpirun not installed";
  for (const char* backend : {"mpi", "tcp"}) {
    std::string out = TempPath(std::string("mpirun_") + backend);
    Proc p = Spawn({"mpirun",
                    "--allow-run-as-root",
                    "--oversubscribe",
                    "-np",
                    "3",
                    "--mca",
                    "btl",
                    "self,tcp",
                    "-x",
                    "MASTER_ADDR=127.0.0.1",
                    "-x",
                    "MASTER_PORT=29731",
                    "-x",
                    "CDT_JOB_SECRET=mpi-test",
                    CDT_CLI,
                    "bench",
                    "allreduce",
                    "--backend",
                    backend,
                    "--min-bytes",
                    "4K",
                    "--max-bytes",
                    "256K",
                    "--iters",
                    "3",
                    "--check"},
                   {}, out);
    ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(120)), 0) << ReadFile(out);
    std::string text = ReadFile(out);
    EXPECT_NE(text.find(std::string("backend ") + backend), std::string::npos) << text;
    EXPECT_NE(text.find("every element of every size matched"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace cdt
