// Helpers for tests that run real processes: spawn with output to a file, wait with a limit.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/die_with_parent.h"

namespace cdt {

inline std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "cdt_it_" + std::to_string(getpid()) + "_" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Proc {
  pid_t pid = -1;
  std::string out;  // file with its stdout + stderr
};

inline Proc Spawn(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env, const std::string& out) {
  Proc p;
  p.out = out;
  const pid_t parent = getpid();
  p.pid = fork();
  if (p.pid == 0) {
    cdt::DieWithParent(parent);
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    FILE* f = freopen(out.c_str(), "w", stdout);
    (void)f;
    dup2(fileno(stdout), 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return p;
}

// Waits up to `limit` for pid; returns its exit code (128+sig if killed), or -1 on timeout.
inline int WaitFor(pid_t pid, std::chrono::seconds limit) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

#ifdef CDT_CLI
// Runs cann-dist-train with `args` (output to a temporary file named by `tag`), up to 300 s;
// its exit code, and everything it printed in *output.
inline int RunCli(const std::string& tag, const std::vector<std::string>& args,
                  std::string* output, const std::map<std::string, std::string>& env = {}) {
  const std::string out = TempPath(tag);
  std::vector<std::string> argv = {CDT_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  Proc p = Spawn(argv, env, out);
  const int rc = WaitFor(p.pid, std::chrono::seconds(300));
  *output = ReadFile(out);
  return rc;
}
#endif

}  // namespace cdt
