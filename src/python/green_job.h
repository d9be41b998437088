// cann_dist.green.GreenScheduler's engine half: the carbon-aware runner (green/carbon_aware_runner.h)
// driving a Python job in process. The runner calibrates the job, plans it on the trace under
// the deadline (green/trace_plan.h), runs it through each running stretch and pauses it between
// them, meters energy on the trace's clock and accounts for it.
//
// The Python object `job` answers run(request: dict) -> dict: request holds tag, workers, batch,
// calibration, resume, stop_after, eval_every and tick() (call it every step: the runner meters
// then); the result holds first_step, steps, total_steps, samples, wall_s, eval_s, started_unix,
// test_accuracy (python/cann_dist/green.py's TrainingJob does this for a training loop).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace cdt::python {

struct GreenRunConfig {
  std::string trace_path, profiles_path, strategy = "suspend-resume", run_id;
  double start_unix = -1;  // the plan's hour 0 on the trace; <0: today's hour of the trace's year
  double time_scale = 3600, pue = 1.58, deadline_hours = 0, carbon_cap_kg = 0;
  double replan_hours = 0;  // CarbonAwareOptions::replan_hours (0 = plan once)
  int batch = 64, calibrate_steps = 30, min_batch = 0, max_batch = 0;
  bool green_priority = false, forecast = false;
};

// The report as green_report.json's JSON; `say` gets the runner's progress lines; the report's
// emissions.csv row is appended to `emissions_csv` unless it is empty.
std::string RunGreenFromPython(const GreenRunConfig& config, pybind11::object job,
                               pybind11::object say, const std::string& emissions_csv);

}  // namespace cdt::python
