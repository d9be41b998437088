#include "comm/transport/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>

namespace cdt::shm {

int ReadProcess(pid_t pid, uintptr_t remote, void* local, size_t bytes) {
  char* dst = static_cast<char*>(local);
  while (bytes > 0) {
    iovec to{dst, bytes};
    iovec from{reinterpret_cast<void*>(remote), bytes};
    const ssize_t n = ::process_vm_readv(pid, &to, 1, &from, 1, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EFAULT;  // nothing read and no error: the range ends here
    dst += n;
    remote += static_cast<uintptr_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace cdt::shm
