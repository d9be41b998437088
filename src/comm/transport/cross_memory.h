// Single-copy reads from another process of this node: Linux cross-memory attach
// (process_vm_readv(2)), what Open MPI's shared-memory transport uses for large messages
// (opal/mca/smsc/cma) and MPICH's nemesis LMT. The kernel copies straight from the other
// process's pages into ours: one copy where going through a shared slot takes two.
//
// The kernel allows it when this process may ptrace the other (same user and the other dumpable,
// or CAP_SYS_PTRACE; Yama's ptrace_scope 1 further limits it to descendants). Nothing here is
// assumed: NodeArena probes every member at set-up (ProbeSingleCopy) and the node's ranks agree on
// the answer before a collective relies on it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace cdt::shm {

// Reads `bytes` at address `remote` of process `pid` into `local`, looping over short reads.
// Returns 0, or the errno of the failure (ESRCH: no such process; EPERM: not allowed; EFAULT: the
// remote range is not mapped; ENOSYS: no cross-memory attach in this kernel).
int ReadProcess(pid_t pid, uintptr_t remote, void* local, size_t bytes);

}  // namespace cdt::shm
