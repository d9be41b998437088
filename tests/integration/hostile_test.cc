// The job against a hostile network and a careless neighbour, through the real CLI (issue 29,
// docs/security.md): a flood of idle connections under a low open-files limit, secrets on command
// lines, a planted job file.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "comm/transport/socket.h"
#include "flood.h"
#include "process_util.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;
namespace fs = std::filesystem;

uint16_t FreePort() {
  net::HostPort bound;
  net::Socket s = net::Listen("127.0.0.1", 0, &bound);
  return bound.port;
}

// The agent hosts the store; its workers wait two seconds before they connect, so the flood
// arrives first.
TEST(HostileNetwork, AnIdleConnectionFloodUnderALowFileLimitDoesNotStopTheJob) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_max < 2200) GTEST_SKIP() << "needs 2,200 open files for the flood";
  lim.rlim_cur = lim.rlim_max;
  setrlimit(RLIMIT_NOFILE, &lim);
  const uint16_t port = FreePort();
  const std::string out = TempPath("flood");
  const std::string cli = CDT_CLI;
  Proc job = Spawn(
      {"sh", "-c",
       "ulimit -n 512 && exec " + cli + " launch --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:" +
           std::to_string(port) + " -- sh -c 'sleep 2; exec " + cli +
           " bench allreduce --min-bytes 4K --max-bytes 16K --iters 3 --warmup 2'"},
      {}, out);
  const net::HostPort store{"127.0.0.1", port};
  std::vector<net::Socket> idle;
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    try {
      idle.push_back(
          net::ConnectUntil(store, net::DeadlineAfter(milliseconds(i == 0 ? 5000 : 200))));
    } catch (const Error&) {
      ++refused;  // the kernel's backlog was full for a moment: the flood goes on
    }
  }
  std::printf("opened %zu idle connections (%d attempts failed)\n", idle.size(), refused);
  EXPECT_GT(idle.size(), 1000u);
  const int rc = WaitFor(job.pid, std::chrono::seconds(90));
  const std::string text = ReadFile(out);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("16384"), std::string::npos) << text;  // the benchmark ran to its end
  EXPECT_TRUE(text.find("unauthenticated connections") != std::string::npos ||
              text.find("refused connections") != std::string::npos)
      << text;
  if (rc < 0) kill(job.pid, SIGKILL), waitpid(job.pid, nullptr, 0);
}

// 1,000 connections a second from another address (127.0.0.2) at the store for as long as a
// 4-worker job forms and trains (issue 41, item 8): the job forms, trains and exits 0. (This much
// held on the main branch before the admission change too; what changed is that a legitimate
// client slow to answer keeps its place: tests/unit/admission_test.cc.)
TEST(HostileNetwork, AFloodOfAThousandConnectionsASecondDuringRendezvousDoesNotStopTheJob) {
  const uint16_t port = FreePort();
  const std::string out = TempPath("flood-train"), json = TempPath("flood-train.json");
  testing::Flood flood({"127.0.0.1", port}, "127.0.0.2", 1000);
  std::this_thread::sleep_for(milliseconds(300));  // the flood runs before anyone rendezvouses
  Proc job = Spawn(
      {CDT_CLI, "train", "--no-progress", "--model", "cnn", "--dataset", "synthetic",
       "--synthetic-samples", "2000", "--nproc-per-node", "4", "--steps", "20", "--batch-size",
       "16", "--rdzv-endpoint", "127.0.0.1:" + std::to_string(port), "--json", json},
      {{"CDT_JOB_SECRET", "flood-train-secret-0123456789"}}, out);
  const int rc = WaitFor(job.pid, std::chrono::seconds(240));
  const std::string text = ReadFile(out);
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("trained cnn"), std::string::npos) << text;
  EXPECT_GT(flood.opened(), 1000) << "the flood did not run through the rendezvous";
  std::printf("flood: %d connections opened while the job formed and trained\n", flood.opened());
  if (rc < 0) kill(job.pid, SIGKILL), waitpid(job.pid, nullptr, 0);
}

// A job given its secret in the environment, and one given it with --job-secret: no process shows
// it in /proc/PID/cmdline while the job runs. (With the flag, the agent's own command line shows
// it from exec until main() overwrites it, a window no program can close: hence the warning, and
// the agent is looked at only once its workers run.)
TEST(HostileNetwork, NoProcessOfAJobShowsTheSecretOnItsCommandLine) {
  const std::string secret = "cmdline-test-" + std::to_string(getpid()) + "-0123456789abcdef";
  for (bool on_command_line : {false, true}) {
    const std::string out = TempPath(on_command_line ? "secret-flag" : "secret-env");
    std::vector<std::string> argv = {CDT_CLI, "bench",       "allreduce", "--nproc-per-node",
                                     "3",     "--min-bytes", "64K",       "--max-bytes",
                                     "4M",    "--iters",     "20"};
    std::map<std::string, std::string> env;
    if (on_command_line)
      argv.insert(argv.end(), {"--job-secret", secret});
    else
      env["CDT_JOB_SECRET"] = secret;
    Proc job = Spawn(argv, env, out);
    int workers = 0, shown = 0;
    std::string where;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    int status = 0;
    while (waitpid(job.pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < give_up) {
      std::map<pid_t, std::string> ours;
      DIR* proc = opendir("/proc");
      for (dirent* d; (d = readdir(proc)) != nullptr;) {
        if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
        std::string cmdline;
        try {
          std::ifstream f(std::string("/proc/") + d->d_name + "/cmdline");
          cmdline.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        } catch (const std::exception&) {
          continue;  // the process ended between opendir and the read (ESRCH): nothing to show
        }
        const std::string program = cmdline.substr(0, cmdline.find('\0'));  // argv[0]
        const std::string name = "cann-dist-train";  // not a path that merely holds the name
        if (program.size() >= name.size() &&
            program.compare(program.size() - name.size(), name.size(), name) == 0)
          ours[static_cast<pid_t>(std::stol(d->d_name))] = cmdline;
      }
      closedir(proc);
      const bool running = ours.size() > 1;  // the agent and at least one worker
      workers += running;
      for (const auto& [pid, cmdline] : ours) {
        if (pid == job.pid && !running) continue;
        if (cmdline.find(secret) != std::string::npos) {
          ++shown;
          where = std::to_string(pid) + (pid == job.pid ? " (the agent)" : " (a worker)");
        }
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(out);
    EXPECT_GT(workers, 0) << ReadFile(out);
    EXPECT_EQ(shown, 0) << "pid " << where << " showed the secret";
    if (on_command_line) {
      EXPECT_NE(ReadFile(out).find("--job-secret is visible"), std::string::npos) << ReadFile(out);
    }
  }
}

// `cann-dist-train secret` draws 256 bits, fresh each time; a short secret draws a warning (a
// recorded handshake lets anyone test guesses offline).
TEST(HostileNetwork, SecretsAreLongAndShortOnesAreWarnedAbout) {
  std::string secrets[2];
  for (auto& secret : secrets) {
    const std::string out = TempPath("secret");
    Proc p = Spawn({CDT_CLI, "secret"}, {}, out);
    ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(30)), 0);
    secret = ReadFile(out);
    ASSERT_EQ(secret.size(), 65u) << secret;  // 64 hex digits and a newline
    EXPECT_EQ(secret.find_first_not_of("0123456789abcdef\n"), std::string::npos) << secret;
  }
  EXPECT_NE(secrets[0], secrets[1]);
  const std::string out = TempPath("short-secret");
  Proc p = Spawn({CDT_CLI, "launch", "--nproc-per-node", "1", "--", "true"},
                 {{"CDT_JOB_SECRET", "hunter2"}}, out);
  ASSERT_EQ(WaitFor(p.pid, std::chrono::seconds(30)), 0) << ReadFile(out);
  EXPECT_NE(ReadFile(out).find("the job secret has 7 characters"), std::string::npos)
      << ReadFile(out);
}

}  // namespace
}  // namespace cdt
