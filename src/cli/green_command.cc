#include "cli/green_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/green_common.h"
#include "cli/green_runtime.h"
#include "green/forecaster.h"
#include "green/iso_time.h"
#include "green/planner.h"

namespace cdt::cli {

void AddGreenOptions(CLI::App* cmd, GreenOptions* o) {
  cmd->add_flag("--plan-only", o->plan_only, "print the carbon-aware plan of a job; train nothing");
  cmd->add_flag("--carbon-aware", o->carbon_aware, "train (options after --) following the plan");
  cmd->add_option(
      "--trace", o->trace,
      "carbon intensity: dc-rl CSV, timestamp,gco2_per_kwh CSV or Carbon Aware SDK JSON");
  cmd->add_option("--region", o->region,
                  "without --trace: the annual average of this country (ISO alpha-3, WORLD, EU)");
  cmd->add_option("--carbon-provider", o->carbon_provider,
                  "plan on a live forecast from now: electricitymaps | watttime | carbon-aware-sdk "
                  "(CDT_CARBON_URL, CDT_CARBON_TOKEN; --trace then stands in when it fails)");
  cmd->add_option("--zone", o->zone,
                  "--carbon-provider's zone, region or location (DE, CAISO_NORTH, eastus)");
  cmd->add_option("--start", o->start,
                  "trace time the job starts, ISO 8601 UTC (e.g. 2022-03-14T05:00:00Z)");
  cmd->add_option("--gap-policy", o->gap_policy, "trace gaps: fail | interpolate | hold")
      ->capture_default_str();
  cmd->add_option("--job-hours", o->job_hours, "--plan-only: hours the job runs on --workers");
  cmd->add_option("--deadline", o->deadline,
                  "hours from the start by which the job must finish (default 3 x job)");
  cmd->add_option("--strategy", o->strategy, "agnostic | suspend-resume | elastic | weighted")
      ->capture_default_str();
  cmd->add_option("--power-kw", o->power_kw,
                  "--plan-only: the job's power on --workers (default 0.3 kW per worker)");
  cmd->add_option("--workers", o->workers,
                  "the job's base worker count (default --min-workers, else 1)");
  cmd->add_option(
      "--min-workers", o->min_workers,
      "elastic / weighted: fewest workers in a running hour (--carbon-aware: on this node)");
  cmd->add_option("--max-workers", o->max_workers,
                  "elastic / weighted: most workers in a running hour");
  cmd->add_option("--scaling-efficiency", o->scaling_efficiency,
                  "throughput kept per doubling of workers (w^(1+log2 e))")
      ->capture_default_str();
  cmd->add_option("--weights", o->weights, "weighted: efficiency carbon cost weights")
      ->expected(3)
      ->delimiter(',');
  cmd->add_option("--price-trace", o->price_trace,
                  "weighted: hourly price CSV `timestamp,price_per_kwh`");
  cmd->add_option("--carbon-cap-kg", o->carbon_cap_kg,
                  "carbon budget of the job (0 = none); --carbon-aware also adapts the batch to it "
                  "(docs/green.md)");
  cmd->add_option("--min-batch", o->min_batch,
                  "batch control: smallest per-rank batch (default batch / 4)");
  cmd->add_option("--max-batch", o->max_batch,
                  "batch control: largest per-rank batch (default batch x 4)");
  cmd->add_flag("--forecast", o->forecast,
                "plan on the forecast from the trace's past, not on the trace itself");
  cmd->add_option("--replan-every", o->replan_hours,
                  "--carbon-aware: revise the plan every this many trace hours while paused and "
                  "after each run, on the forecast made then (0 = plan once; docs/green.md)")
      ->capture_default_str();
  cmd->add_option("--time-scale", o->time_scale,
                  "--carbon-aware: wall seconds per trace hour (3600 = real time)")
      ->capture_default_str();
  cmd->add_flag(
      "--green-priority", o->green_priority,
      "carbon before the deadline: follow the cleanest plan even when it misses the deadline "
      "(without it an infeasible plan falls back to running now)");
  cmd->add_flag("--certify", o->certify, "sign the report (cert issue) when the run ends");
  cmd->add_option("--report-dir", o->report_dir,
                  "emissions.csv, green_report.{json,html}, checkpoints")
      ->capture_default_str();
  cmd->add_option("--run-id", o->run_id, "run id in the reports (default: start time and pid)");
  cmd->add_option("--pue", o->pue,
                  "power usage effectiveness (industry average 1.58, hyperscale ~1.1)")
      ->capture_default_str();
  cmd->add_option("--embodied-kg", o->embodied_kg,
                  "SCI M: embodied emissions of the hardware used (kg)")
      ->capture_default_str();
  cmd->add_option("--lifetime-years", o->lifetime_years, "SCI M: the hardware's expected lifetime")
      ->capture_default_str();
  cmd->add_option("--calibrate-steps", o->calibrate_steps,
                  "--carbon-aware: steps of the calibration run")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the plan / run summary here");
  cmd->add_option("train_args", o->train_args, "-- train options (--carbon-aware)");
}

int RunGreen(GreenOptions o, const Environment& env) {
  if (o.plan_only == o.carbon_aware)
    throw Error(ErrorCode::kInvalidArgument,
                "green: give exactly one of --plan-only and --carbon-aware");
  if (o.carbon_aware) {
    // The seed's journey command gives no trace and no training: the embedded defaults, said.
    std::string used;
    if (o.trace.empty() && o.region.empty()) {
      o.trace = env.knowledge_base + "/carbon_traces/CISO_2022.csv";
      used += "--trace " + o.trace + "; ";
    }
    if (o.train_args.empty()) {
      o.train_args = {"--model", "cnn", "--epochs", "1"};
      used += "-- --model cnn --epochs 1 (Fashion-MNIST); ";
    }
    if (!used.empty()) {
      used.resize(used.size() - 2);
      std::printf("cann-dist-train green: defaults used: %s\n", used.c_str());
      std::fflush(stdout);
    }
    return RunCarbonAware(o, env);
  }
  if (!o.train_args.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "green --plan-only trains nothing: drop the options after --");
  if (!(o.job_hours > 0))
    throw Error(ErrorCode::kInvalidArgument, "green --plan-only needs --job-hours > 0");
  const green::CarbonTrace trace = LoadGreenTrace(o, env);
  const double start = GreenStart(o, trace);
  const int deadline = static_cast<int>(std::ceil(o.deadline > 0 ? o.deadline : 3 * o.job_hours));
  const GreenJob job = MakeGreenJob(o, o.job_hours, o.power_kw, deadline);
  const GreenPlans p = PlanGreenJob(o, trace, start, job.spec);
  PrintGreenPlan(o, trace, start, job, p);
  if (!o.json.empty()) WriteJsonFile(o.json, GreenPlanJson(o, trace, start, job, p));
  return p.plan.feasible ? 0 : 3;
}

}  // namespace cdt::cli
