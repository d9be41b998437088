// What `green --plan-only` and `green --carbon-aware` share: the trace, the job, the plans.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/environment.h"
#include "cli/green_options.h"
#include "green/carbon_trace.h"
#include "green/planner.h"

namespace cdt::cli {

using green::Stretch;
using green::Stretches;

green::CarbonTrace LoadGreenTrace(const GreenOptions& o, const Environment& env);
// --start on the trace's clock (Unix seconds); throws when missing or outside the trace.
double GreenStart(const GreenOptions& o, const green::CarbonTrace& trace);

struct GreenJob {
  green::JobSpec spec;  // work in hours on the base count
  double power_kw = 0;  // at the base count
  bool power_assumed = false;
};
GreenJob MakeGreenJob(const GreenOptions& o, double job_hours, double power_kw, int deadline_hours);

using GreenPlans = green::Plans;  // the strategy's plan and the carbon-agnostic baseline
GreenPlans PlanGreenJob(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                        const green::JobSpec& job);

void PrintGreenPlan(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                    const GreenJob& job, const GreenPlans& p);
nlohmann::json GreenPlanJson(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                             const GreenJob& job, const GreenPlans& p);
void WriteJsonFile(const std::string& path, const nlohmann::json& j);

}  // namespace cdt::cli
