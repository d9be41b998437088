// Futex wait and wake on a 32-bit word in memory shared between processes (FUTEX_WAIT/FUTEX_WAKE
// without FUTEX_PRIVATE_FLAG). libstdc++'s std::atomic::wait uses process-private futexes, which
// never wake a waiter in another process: that is why the same-node transport (the
// NodeArena) calls the system call itself.
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <ctime>

namespace cdt::shm {

// Sleeps while *word == expected, at most `timeout`; returns on a wake, a changed word, a signal or
// the timeout alike (callers look again).
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                      std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

inline void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace cdt::shm
