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
#include "green/trace_plan.h"
#include "simulated_job.h"

namespace cdt::green {
namespace {

using InProcessJob = testing::SimulatedJob;

// The model meter (this process, no hardware counters) and a job from 05:00 on 2022-03-14 with a
// day's deadline, as both tests run it.
MeterSetOptions ModelledMeter() {
  MeterSetOptions mo;
  mo.profiles_path = std::string(CDT_KNOWLEDGE_BASE) + "/hardware_profiles/devices.json";
  mo.try_hardware = false;
  return mo;
}

CarbonAwareOptions DayAheadOptions() {
  CarbonAwareOptions o;
  o.start_unix = *ParseIsoTime("2022-03-14T05:00:00Z");
  o.deadline_hours = 24;
  o.calibrate_steps = 30;
  return o;
}

TEST(CarbonAwareRunner, FollowsTheSuspendResumePlanThroughTheCleanHoursOnAFakeClock) {
  const CarbonTrace trace =
      ReadCarbonTrace(std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv");
  testing::FakeClock clock;
  InProcessJob job(clock, 4000, 3.6);  // 4 trace hours of stepping at --time-scale 3600
  MeterSet meter(ModelledMeter());
  CarbonAwareOptions o = DayAheadOptions();
  o.run_id = "test";
  std::vector<std::string> said;
  o.say = [&](const std::string& line) { said.push_back(line); };
  Plans shown;
  o.show_plan = [&](const JobSpec&, double, const Plans& p) { shown = p; };
  const GreenReport r =
      RunCarbonAware(job, trace, meter, clock, o, [&](const JobSpec& spec, double start) {
        EXPECT_EQ(start, o.start_unix);  // planned once: no re-plan unless asked
        Plans p;
        p.intensity = trace.Hourly(start, spec.deadline_hours);
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

// --replan-every 1 on the forecast: while paused, and after each run, the work left is planned
// again from that moment on the forecast made then (the forecaster sees only the trace before
// it); the job still runs every step before the deadline, in cleaner hours than the baseline.
TEST(CarbonAwareRunner, RevisesThePlanEveryHourOnTheNewestForecast) {
  const CarbonTrace trace =
      ReadCarbonTrace(std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv");
  testing::FakeClock clock;
  InProcessJob job(clock, 4000, 3.6);
  MeterSet meter(ModelledMeter());
  CarbonAwareOptions o = DayAheadOptions();
  o.replan_hours = 1;
  o.run_id = "replan";
  std::vector<std::string> said;
  o.say = [&](const std::string& line) { said.push_back(line); };
  std::vector<double> starts;
  std::vector<int> deadlines;
  TracePlanOptions t;
  t.forecast = true;
  t.plan.contiguous_partial = true;
  const GreenReport r =
      RunCarbonAware(job, trace, meter, clock, o, [&](const JobSpec& spec, double start) {
        starts.push_back(start);
        deadlines.push_back(spec.deadline_hours);
        return PlanOnTrace(trace, start, spec, t);
      });
  // The first plan (a few rounds that settle its run count) from the start, then the re-plans.
  size_t first_replan = 0;
  while (first_replan < starts.size() && starts[first_replan] == o.start_unix) ++first_replan;
  ASSERT_GE(first_replan, 1u);
  ASSERT_GE(starts.size() - first_replan, 2u) << "re-planned at least twice";
  for (size_t i = first_replan; i < starts.size(); ++i) {
    EXPECT_GT(starts[i], starts[i - 1]) << i;
    // Each re-plan plans to the same deadline: the hours left, whole.
    EXPECT_LE(starts[i] + 3600.0 * deadlines[i], o.start_unix + 3600.0 * 24 + 1e-6) << i;
  }
  bool replanned = false;
  for (const std::string& line : said) replanned |= line.find("re-planned at") != std::string::npos;
  EXPECT_TRUE(replanned);
  bool noted = false;
  for (const std::string& n : r.notes) noted |= n.find("the plan was revised") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_EQ(static_cast<int64_t>(r.samples / 64), 4000);  // every step, once
  for (const RunInterval& a : r.actual)
    EXPECT_LE(a.end_unix, o.start_unix + 24 * 3600.0 + 60) << "finished by the deadline";
  EXPECT_LT(r.carbon_kg, r.baseline_carbon_kg);
}

}  // namespace
}  // namespace cdt::green
