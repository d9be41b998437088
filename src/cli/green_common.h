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

green::CarbonTrace LoadGreenTrace(const GreenOptions& o, const Environment& env);
// --start on the trace's clock (Unix seconds); throws when missing or outside the trace.
double GreenStart(const GreenOptions& o, const green::CarbonTrace& trace);

struct GreenJob {
  green::JobSpec spec;  // work in hours on the base count
  double power_kw = 0;  // at the base count
  bool power_assumed = false;
};
GreenJob MakeGreenJob(const GreenOptions& o, double job_hours, double power_kw, int deadline_hours);

struct GreenPlans {
  green::Plan plan;                // the strategy's, priced on the trace
  green::Plan baseline;            // carbon-agnostic, same job
  double forecast_carbon_kg = -1;  // with --forecast: what the plan expected
  std::vector<double> intensity;   // hourly from the start
};
GreenPlans PlanGreenJob(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                        const green::JobSpec& job);

// Contiguous running stretches of a plan (slots merged while the worker count stays).
struct Stretch {
  double start_h = 0, hours = 0;
  int workers = 0;
  double carbon_kg = 0, energy_kwh = 0;
};
std::vector<Stretch> Stretches(const green::Plan& plan);

void PrintGreenPlan(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                    const GreenJob& job, const GreenPlans& p);
nlohmann::json GreenPlanJson(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                             const GreenJob& job, const GreenPlans& p);
void WriteJsonFile(const std::string& path, const nlohmann::json& j);

}  // namespace cdt::cli
