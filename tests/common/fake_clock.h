// A Clock (common/clock.h) for tests: time moves only when the code under test sleeps or the test
// advances it, so that hours of a carbon-aware plan pass in no time. A fake of the outside world.
#pragma once

#include "common/clock.h"

namespace cdt::testing {

class FakeClock : public Clock {
 public:
  explicit FakeClock(double unix_start = 1.6e9) : unix_start_(unix_start) {}
  double Steady() const override { return now_; }
  double Unix() const override { return unix_start_ + now_; }
  void SleepFor(double seconds) override {
    if (seconds > 0) now_ += seconds, slept_ += seconds;
  }
  void Advance(double seconds) { now_ += seconds; }
  double slept() const { return slept_; }

 private:
  double unix_start_;
  double now_ = 1000;
  double slept_ = 0;
};

}  // namespace cdt::testing
