// The options of `cann-dist-train green` (green_command.h has the flags and docs/green.md their
// meaning), shared by the planning (green_command.cc, green_common.cc) and the carbon-aware run
// (green_runtime.cc).
#pragma once

#include <string>
#include <vector>

namespace cdt::cli {

struct GreenOptions {
  bool plan_only = false, carbon_aware = false, green_priority = false, certify = false,
       forecast = false;
  std::string trace, region, start, strategy = "suspend-resume", gap_policy = "interpolate";
  std::string json, report_dir = "green-report", run_id, price_trace;
  std::string carbon_provider, zone;  // a live provider's forecast instead of a trace's hours
  std::vector<double> weights = {0.6, 0.3, 0.1};
  double job_hours = 0, deadline = 0, power_kw = 0, time_scale = 3600, carbon_cap_kg = 0;
  // --replan-every: trace hours between re-plans of a carbon-aware run (0 = plan once).
  double replan_hours = 0;
  double scaling_efficiency = 0.9, pue = 1.58, embodied_kg = 0, lifetime_years = 4;
  int workers = 0, min_workers = 0, max_workers = 0, calibrate_steps = 30;
  int min_batch = 0, max_batch = 0;     // batch control bounds (0 = batch / 4, batch x 4)
  std::vector<std::string> train_args;  // after `--`
};

}  // namespace cdt::cli
