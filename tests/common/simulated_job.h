// A carbon-aware job whose steps advance a FakeClock (fake_clock.h) instead of training: the
// carbon-aware runner (src/green/carbon_aware_runner.h) drives it as it drives `train` children,
// so a plan across days of a grid trace runs in milliseconds
// (tests/unit/carbon_aware_runner_test.cc, bench/replan_study.cc). `total` steps at `step_s`
// seconds each, two seconds of start-up and one of exit per run, its checkpoint in memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fake_clock.h"
#include "green/carbon_aware_runner.h"

namespace cdt::testing {

class SimulatedJob : public green::CarbonAwareJob {
 public:
  SimulatedJob(FakeClock& clock, int64_t total, double step_s)
      : clock_(clock), total_(total), step_s_(step_s) {}

  green::RunResult Run(const green::RunRequest& r, const std::function<void()>& tick) override {
    requests.push_back(r);
    starts.push_back(clock_.Steady());
    green::RunResult out;
    out.first_step = r.calibration ? 0 : (r.resume ? checkpoint_ : 0);
    const int64_t end = r.stop_after > 0 ? std::min<int64_t>(r.stop_after, total_) : total_;
    out.steps = end - out.first_step;
    out.total_steps = total_;
    out.samples = static_cast<double>(out.steps) * r.batch * r.workers;
    out.started_unix = clock_.Unix() + 2;  // two seconds of start-up
    clock_.Advance(2);
    for (int64_t s = 0; s < out.steps; ++s) {
      clock_.Advance(step_s_);
      if (s % 50 == 0) tick();
    }
    out.wall_s = static_cast<double>(out.steps) * step_s_;
    clock_.Advance(1);  // exit
    if (!r.calibration) checkpoint_ = end;
    return out;
  }
  std::string checkpoint_location() const override { return "memory"; }

  std::vector<green::RunRequest> requests;
  std::vector<double> starts;  // fake steady seconds

 private:
  FakeClock& clock_;
  int64_t total_, checkpoint_ = 0;
  double step_s_;
};

}  // namespace cdt::testing
