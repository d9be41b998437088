// The carbon-aware runner (docs/green.md, "Carbon-aware run"): calibrate the job on every worker
// count the plan may use, plan it on the trace under the deadline, follow the plan — run the
// job through each running stretch and pause it between them — meter its energy on the trace's
// clock, and account for it. It drives a CarbonAwareJob: the CLI's runs `train` child processes
// (cli/green_runtime.cc); an in-process one (the Python front end) can run the trainer itself.
// Anchors: CarbonScaler (resizing by marginal carbon), Wait-and-Scale / GAIA (suspend-resume).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "green/carbon_trace.h"
#include "green/energy_meter.h"
#include "green/planner.h"
#include "green/report.h"

namespace cdt::green {

// One run of the job, as the runner asks for it. A run starts — or resumes from the job's
// checkpoint — and pauses by stopping after a step with its checkpoint on disk.
struct RunRequest {
  std::string tag;  // names the run's files: "calibration-4", "run-2"
  int workers = 1;
  int batch = 64;            // per worker
  bool calibration = false;  // a short measuring run on a checkpoint of its own
  bool resume = false;       // continue from the job's checkpoint
  int64_t stop_after = 0;    // stop (checkpointed) after this step; 0 = at the job's end
  int64_t eval_every = 0;    // 0 = the job's own setting
};

// What a run measured (the trainer's TrainResult fields the runner uses).
struct RunResult {
  int64_t first_step = 0, steps = 0, total_steps = 0;
  double samples = 0;
  double wall_s = 0;          // the training loop's seconds (start-up and evaluation excluded)
  double eval_s = 0;          // evaluation seconds
  double started_unix = 0;    // when the training loop began (0 = not said)
  double test_accuracy = -1;  // -1 = not evaluated
};

// The most steps and seconds a run may report (2^40 steps; a year of wall time).
inline constexpr int64_t kMaxRunSteps = int64_t{1} << 40;
inline constexpr double kMaxRunSeconds = 366 * 86400.0;

// A run's result comes from another process (the CLI's `train` child writes it as JSON) or from
// user code (the Python job's dict): the runner checks every one with this before planning on it,
// so that a total_steps of INT64_MIN or a wall_s of 1e300 is refused, naming `run` and the field,
// instead of becoming a nonsense plan (or an out-of-range conversion). Throws
// cdt::Error(kInvalidArgument) when a count is outside 0..kMaxRunSteps, or a time or the sample
// count is negative, not finite or too large (kMaxRunSeconds; 10^18 samples).
void CheckRunResult(const RunResult& r, const std::string& run);

class CarbonAwareJob {
 public:
  virtual ~CarbonAwareJob() = default;
  // Runs `r` to its end; calls `tick` about every 200 ms while it runs (the runner meters energy
  // then). Throws cdt::Error naming the run when it fails; the job's checkpoint then holds the
  // last completed run.
  virtual RunResult Run(const RunRequest& r, const std::function<void()>& tick) = 0;
  virtual std::string checkpoint_location() const = 0;  // for messages
};

// Plans `job` from `start_unix` on the trace (the first plan from CarbonAwareOptions::start_unix,
// re-plans from the moment they are made; a planner on a forecast sees only the trace before it).
using PlanJob = std::function<Plans(const JobSpec& job, double start_unix)>;

struct CarbonAwareOptions {
  double start_unix = 0;  // the plan's hour 0, on the trace
  int base_workers = 1, min_workers = 1, max_workers = 1;
  int batch = 64;  // per worker, as the job was given
  int calibrate_steps = 30;
  double time_scale = 3600;  // wall seconds per trace hour (3600 = real time)
  double pue = 1.58;
  double deadline_hours = 0;    // 0 = three times the job
  bool green_priority = false;  // follow an infeasible plan anyway
  // Re-planning (the seed's run_adaptive_loop): every this many trace hours while paused, and
  // after every run, the work left is planned again from that moment, up to the deadline, on the
  // newest forecast. 0 = the first plan is followed to the end.
  double replan_hours = 0;
  // Batch control (the seed's rule, once per run; docs/green.md): with a cap > 0.
  double carbon_cap_kg = 0;
  int min_batch = 0, max_batch = 0;  // 0 = batch / 4, batch x 4
  std::string run_id;
  double embodied_kg = 0, lifetime_years = 4;
  // Progress lines ("calibrating", "paused until", "running steps"); the CLI prints them.
  std::function<void(const std::string&)> say;
  // The plan, once settled (the CLI prints it): the job as measured, its power, the plans.
  std::function<void(const JobSpec& job, double power_kw, const Plans& plans)> show_plan;
};

// Throws cdt::Error(kInvalidArgument) naming the flag for options the runner cannot follow.
void ValidateCarbonAwareOptions(const CarbonAwareOptions& o);

// Calibrates, plans, follows and accounts; returns the report (the caller writes it). Throws
// cdt::Error when a run fails or the plan cannot be made.
GreenReport RunCarbonAware(CarbonAwareJob& job, const CarbonTrace& trace, MeterSet& meter,
                           Clock& clock, const CarbonAwareOptions& options, const PlanJob& plan);

}  // namespace cdt::green
