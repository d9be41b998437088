// RefusalLog: the lines a listener writes about connections it refuses, at most one per second and
// the rest counted into the next, so that a flood of 2,000 connections costs a few lines of
// stderr, not 2,000. Used by the store server and the peer handshake; one per listener, used by
// one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cdt/log.h"

namespace cdt {

class RefusalLog {
 public:
  // `prefix` starts every line, e.g. "cdt store 10.0.0.1:29500" or "cdt rank 3"; the lines are
  // warnings of `log`.
  RefusalLog(std::string prefix, Log log) : prefix_(std::move(prefix)), log_(std::move(log)) {}

  void Say(const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) {
      ++suppressed_;
      return;
    }
    next_ = now + std::chrono::seconds(1);
    const std::string more =
        suppressed_ > 0 ? " (and " + std::to_string(suppressed_) + " more in the last second)" : "";
    suppressed_ = 0;
    log_.Warning("{}: {}{}", prefix_, what, more);
  }

 private:
  std::string prefix_;
  Log log_;
  std::chrono::steady_clock::time_point next_{};
  uint64_t suppressed_ = 0;
};

}  // namespace cdt
