// For a child process, right after fork() and before exec: have the kernel SIGKILL it when the
// process that forked it goes, however that goes. A parent killed with SIGKILL (the OOM killer,
// a scheduler's job kill, `kill -9`) runs no code of its own, and without this its children are
// reparented and keep running unsupervised, holding ports, memory and accelerators.
// The signal follows the *thread* that forked (prctl(2), PR_SET_PDEATHSIG): fork from a thread
// that outlives the child. It survives execve(2) (but not a set-user-ID binary).
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace cdt {

// `parent`: getpid() of the forking process, taken before fork(). Async-signal-safe.
inline void DieWithParent(pid_t parent) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // it went before the prctl
}

}  // namespace cdt
