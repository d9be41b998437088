// A job planned on a carbon trace from a start: the strategy's plan and the carbon-agnostic
// baseline over the hours the deadline allows (`green --plan-only`, `green --carbon-aware`,
// cann_dist.green.GreenScheduler).
#pragma once

#include "green/carbon_trace.h"
#include "green/planner.h"

namespace cdt::green {

struct TracePlanOptions {
  Strategy strategy = Strategy::kSuspendResume;
  PlanOptions plan;       // weights, hourly prices (from the start), contiguous partial hour
  bool forecast = false;  // plan on ForecastHourly's forecast, priced on what the trace says
};

// Throws cdt::Error(kInvalidArgument) when the trace ends before the deadline.
Plans PlanOnTrace(const CarbonTrace& trace, double start, const JobSpec& job,
                  const TracePlanOptions& options);

}  // namespace cdt::green
