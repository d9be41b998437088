#include "green/trace_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "cdt/error.h"
#include "green/forecaster.h"

namespace cdt::green {

Plans PlanOnTrace(const CarbonTrace& trace, double start, const JobSpec& job,
                  const TracePlanOptions& o) {
  double base_rate = 1;
  for (const auto& p : job.scaling)
    if (p.workers == job.base_workers) base_rate = p.work_per_hour;
  // Hour counts checked as doubles before they become ints (a job's work comes from a
  // calibration or the caller; 1e300 hours would be an out-of-range conversion).
  const double need = std::ceil(job.work / base_rate) + 1;
  if (!(need <= kMaxPlanHours) || job.deadline_hours > kMaxPlanHours)
    throw Error(ErrorCode::kInvalidArgument,
                "planning: the job's work " + std::to_string(job.work) + " at " +
                    std::to_string(base_rate) + " per hour on " + std::to_string(job.base_workers) +
                    " worker(s), deadline " + std::to_string(job.deadline_hours) +
                    " h, needs more than the " + std::to_string(kMaxPlanHours) +
                    " hours (10 years) a plan may cover");
  int hours = std::max(job.deadline_hours, static_cast<int>(std::max(need, 0.0)));
  if (!trace.constant()) {
    const double left = (trace.end_unix() - start) / 3600;  // start may be any --start
    hours = std::min(hours, static_cast<int>(std::clamp(left, -1.0, 1.0 * kMaxPlanHours)));
  }
  if (hours < job.deadline_hours)
    throw Error(ErrorCode::kInvalidArgument, "the trace " + trace.source() + " ends " +
                                                 std::to_string(hours) +
                                                 " h after the start; the deadline needs " +
                                                 std::to_string(job.deadline_hours) + " h");
  Plans p;
  p.intensity = trace.Hourly(start, hours);
  if (o.forecast) {
    const std::vector<double> f = ForecastHourly(trace, start, hours);
    const Plan planned = MakePlan(o.strategy, job, f, o.plan);
    p.forecast_carbon_kg = planned.carbon_kg;
    p.plan = Reprice(planned, job, p.intensity);
  } else {
    p.plan = MakePlan(o.strategy, job, p.intensity, o.plan);
  }
  try {
    p.baseline = MakePlan(Strategy::kAgnostic, job, p.intensity, o.plan);
  } catch (const Error&) {
    p.baseline.carbon_kg = 0;  // the trace ends before an unpaused run would: no baseline
    p.baseline.feasible = false;
  }
  return p;
}

}  // namespace cdt::green
