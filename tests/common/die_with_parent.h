// For a test's child process, right after fork(): have the kernel SIGKILL it when the test
// process goes, however it goes. A test killed by ctest's timeout or by SIGTERM runs no
// destructors, and its etcd server or launched job otherwise stays up, holding ports and CPU.
// The signal follows the thread that forked: fork from the test's own thread.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace cdt::testing {

// `parent`: getpid() of the test process, taken before fork().
inline void DieWithParent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // it went before the prctl
}

}  // namespace cdt::testing
