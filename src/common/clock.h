// The clock seam (issue 30): code that waits for a time or measures one takes a Clock, so that a
// test can run it on a FakeClock (tests/common/fake_clock.h) — hours of a carbon-aware plan in
// no time — while the program runs on SystemClock.
#pragma once

#include <chrono>
#include <thread>

#include "common/unix_time.h"

namespace cdt {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double Steady() const = 0;  // seconds on a monotonic clock (durations in one process)
  virtual double Unix() const = 0;    // seconds since the epoch (times other processes compare)
  virtual void SleepFor(double seconds) = 0;
};

class SystemClock : public Clock {
 public:
  double Steady() const override { return SteadySeconds(); }
  double Unix() const override { return UnixSeconds(); }
  void SleepFor(double seconds) override {
    if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
};

}  // namespace cdt
