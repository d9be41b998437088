// `cann-dist-train green` (docs/green.md):
//   green --plan-only --trace FILE --start TIME --job-hours H --deadline H [--strategy ...]
//   green --carbon-aware --trace FILE --start TIME [--deadline H] [--time-scale S] [--certify]
//         -- <train options>
// Planning alone prints and writes the plan; the carbon-aware run calibrates the job (a short
// run measuring step time and power), plans it, and follows the plan: each running stretch is a
// `train --resume --stop-after N` on the same checkpoint directory, a pause is the checkpoint on
// disk and nothing running. Energy is metered on this host while the job runs, mapped onto the
// trace's clock (--time-scale S: one trace hour lasts S wall seconds, energy scaled by 3600/S),
// and reported as emissions.csv, JSON and HTML, optionally signed.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct GreenOptions {
  bool plan_only = false, carbon_aware = false, green_priority = false, certify = false,
       forecast = false;
  std::string trace, region, start, strategy = "suspend-resume", gap_policy = "interpolate";
  std::string json, report_dir = "green-report", run_id, price_trace;
  std::vector<double> weights = {0.6, 0.3, 0.1};
  double job_hours = 0, deadline = 0, power_kw = 0, time_scale = 3600, carbon_cap_kg = 0;
  double scaling_efficiency = 0.9, pue = 1.58, embodied_kg = 0, lifetime_years = 4;
  int workers = 0, min_workers = 0, max_workers = 0, calibrate_steps = 30;
  int min_batch = 0, max_batch = 0;     // batch control bounds (0 = batch / 4, batch x 4)
  std::vector<std::string> train_args;  // after `--`
};

void AddGreenOptions(CLI::App* cmd, GreenOptions* o);
int RunGreen(GreenOptions o, const Environment& env);

// The carbon-aware run (green_runtime.cc).
int RunCarbonAware(const GreenOptions& o, const Environment& env);

}  // namespace cdt::cli
