// The carbon-aware runner (src/green/carbon_aware_runner.h) driving an in-process job, as the
// Python front end will: the job's steps advance a FakeClock (tests/common/fake_clock.h) instead
// of training, so a plan across a day of California's 2022 grid runs in milliseconds. The trace,
// the planner, the accounting and the meter (the model, reading this process) are the real ones.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "fake_clock.h"
#include "green/carbon_aware_runner.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"
#include "green/planner.h"

namespace cdt::green {
namespace {

// A job of `total` steps at `step_s` seconds each on the base count (faster with more workers:
// samples per step grow with the workers, steps shrink), with its checkpoint in memory.
class InProcessJob : public CarbonAwareJob {
 public:
  InProcessJob(testing::FakeClock& clock, int64_t total, double step_s)
      : clock_(clock), total_(total), step_s_(step_s) {}

  RunResult Run(const RunRequest& r, const std::function<void()>& tick) override {
    requests.push_back(r);
    starts.push_back(clock_.Steady());
    RunResult out;
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

  std::vector<RunRequest> requests;
  std::vector<double> starts;  // fake steady seconds

 private:
  testing::FakeClock& clock_;
  int64_t total_, checkpoint_ = 0;
  double step_s_;
};

TEST(CarbonAwareRunner, FollowsTheSuspendResumePlanThroughTheCleanHoursOnAFakeClock) {
  const CarbonTrace trace =
      ReadCarbonTrace(std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv");
  testing::FakeClock clock;
  InProcessJob job(clock, 4000, 3.6);  // 4 trace hours of stepping at --time-scale 3600
  MeterSetOptions mo;
  mo.profiles_path = std::string(CDT_KNOWLEDGE_BASE) + "/hardware_profiles/devices.json";
  mo.try_hardware = false;
  MeterSet meter(mo);
  CarbonAwareOptions o;
  o.start_unix = *ParseIsoTime("2022-03-14T05:00:00Z");
  o.deadline_hours = 24;
  o.calibrate_steps = 30;
  o.run_id = "test";
  std::vector<std::string> said;
  o.say = [&](const std::string& line) { said.push_back(line); };
  Plans shown;
  o.show_plan = [&](const JobSpec&, double, const Plans& p) { shown = p; };
  const GreenReport r = RunCarbonAware(job, trace, meter, clock, o, [&](const JobSpec& spec) {
    Plans p;
    p.intensity = trace.Hourly(o.start_unix, spec.deadline_hours);
    PlanOptions po;
    po.contiguous_partial = true;
    p.plan = MakePlan(Strategy::kSuspendResume, spec, p.intensity, po);
    p.baseline = MakePlan(Strategy::kAgnostic, spec, p.intensity, po);
    return p;
  });

  ASSERT_GE(job.requests.size(), 2u);
  EXPECT_TRUE(job.requests[0].calibration);
  EXPECT_EQ(job.requests[0].stop_after, 30);
  // Every run after the calibration resumes the job's checkpoint, and together they cover it.
  int64_t steps = 0;
  for (size_t i = 1; i < job.requests.size(); ++i) {
    EXPECT_FALSE(job.requests[i].calibration);
    EXPECT_EQ(job.requests[i].resume, i > 1) << i;
  }
  for (const RunInterval& a : r.actual) EXPECT_GT(a.end_unix, a.start_unix);
  steps = static_cast<int64_t>(r.samples / 64);
  EXPECT_EQ(steps, 4000);
  // The plan put the job into the day's cleanest hours: the runner waited on the clock (not in
  // real time) until each stretch, and each run began at its stretch's start.
  const std::vector<Stretch> stretches = Stretches(shown.plan);
  ASSERT_EQ(stretches.size() + 1, job.requests.size());
  EXPECT_GT(stretches.front().start_h, 0);  // 05:00 in California is not the cleanest hour
  EXPECT_GT(clock.slept(), 3600);
  bool paused = false;
  for (const std::string& line : said) paused |= line.find("paused") != std::string::npos;
  EXPECT_TRUE(paused);
  for (size_t i = 0; i < stretches.size(); ++i) {
    const double planned = o.start_unix + 3600 * stretches[i].start_h;
    EXPECT_NEAR(r.actual[i].start_unix, planned, 5) << i;  // started on time, start-up ahead
  }
  EXPECT_LT(r.carbon_kg, r.baseline_carbon_kg);
  EXPECT_GT(r.energy_kwh, 0);
}

}  // namespace
}  // namespace cdt::green
