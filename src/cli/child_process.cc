#include "cli/child_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "cdt/error.h"
#include "common/die_with_parent.h"

namespace cdt::cli {

int RunChild(const std::string& exe, const std::vector<std::string>& args,
             const std::function<void()>& tick, const std::string& what) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, what + ": fork failed");
  if (pid == 0) {
    DieWithParent(parent);  // the work goes with whoever waits for it
    execv(exe.c_str(), argv.data());
    std::fprintf(stderr, "cann-dist-train: cannot run %s\n", exe.c_str());
    _exit(127);
  }
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) throw Error(ErrorCode::kIo, what + ": waitpid failed");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (tick) tick();
  }
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace cdt::cli
