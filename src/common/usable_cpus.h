// The number of CPUs this process may run on: its affinity mask, which `taskset`, a container's
// cpuset, numactl and launchers that bind ranks to cores (mpirun --bind-to, Slurm's
// --cpu-bind) all set. std::thread::hardware_concurrency counts the machine's CPUs instead, so a
// rank bound to 4 of 64 cores would start 64 compute threads that take turns on 4. A CFS quota
// (a container's `--cpus`, cgroup cpu.max) is not a mask and is not seen here, as in PyTorch.
#pragma once

#include <sched.h>

#include <algorithm>
#include <thread>

namespace cdt {

inline int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  // Fails (EINVAL) past CPU_SETSIZE (1024) CPUs; the machine's count is the answer there.
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace cdt
