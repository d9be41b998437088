// Wall-clock seconds since the Unix epoch (system clock): for times that different processes
// compare — a fault's moment written by one worker, its recovery measured by another (elastic
// rto_s). Durations inside one process use steady_clock instead.
#pragma once

#include <chrono>

namespace cdt {

inline double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds on the steady clock: for durations inside one process.
inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace cdt
