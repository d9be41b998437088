// Carbon-aware job planning (docs/green.md): given a job's work, how fast and at what power it runs
// on each worker count, an hourly carbon-intensity series (the trace, or a forecast) from the
// start, and a deadline, produce an hourly plan — which hours run, on how many workers — that
// minimises carbon. Strategies:
//  - agnostic: run at the base worker count from the start until done (the baseline).
//  - suspend-resume: run at the base count in the cleanest hours before the deadline (Let's Wait
//    Awhile). All running hours do the same work, so the cheapest ones are optimal; the last hour
//    may be partial and goes to the cheapest remaining hour.
//  - elastic: CarbonScaler's marginal greedy — every hour offers increments (0 -> min workers,
//    then +1 worker up to max), each with its marginal work and marginal carbon; take increments
//    by carbon per unit of work until the job is done. Exact for a concave throughput curve with
//    power linear in workers; the suspend-resume plan is also a candidate, so elastic is never
//    worse than it.
//  - weighted: the same greedy on a score mixing efficiency (energy per work relative to the base
//    count), carbon and price (the seed's weights 0.6 / 0.3 / 0.1).
// A deadline or carbon cap that cannot be met yields feasible = false, the reason, and the best
// plan there is (the work it completes by the deadline, or the carbon it needs).
#pragma once

#include <string>
#include <vector>

namespace cdt::green {

enum class Strategy { kAgnostic, kSuspendResume, kElastic, kWeighted };
Strategy ParseStrategy(const std::string& name);  // agnostic | suspend-resume | elastic | weighted
const char* StrategyName(Strategy s);

// The longest plan there is: ten years of hours. A job needing more (a calibration gone wrong, a
// tiny --time-scale) is refused before any hour count becomes an int.
inline constexpr int kMaxPlanHours = 87600;

struct WorkerPoint {
  int workers = 1;
  double work_per_hour = 1;  // job units per hour at this count
  double power_kw = 0;       // the whole allocation's power
};

struct JobSpec {
  double work = 0;                   // job units (e.g. base-worker hours, or steps)
  std::vector<WorkerPoint> scaling;  // ascending worker counts; front() is the minimum
  int base_workers = 1;              // agnostic and suspend-resume run on this many
  int deadline_hours = 24;           // from the start
  double carbon_cap_kg = 0;          // 0 = none
  // What one more running stretch costs (start-up and exit), in job units at the base count;
  // < 0 = unknown. With PlanOptions::contiguous_partial and a known cost, the partial hour goes
  // into the cheapest free hour as a stretch of its own when that, restart included, emits less
  // than running it next to a stretch.
  double restart_work = -1;
};

// Throughput w^(1 + log2 e) (efficiency e per doubling, concave for e <= 1), power linear in w:
// a scaling curve when only one worker count was measured. base: throughput and power at `base`.
std::vector<WorkerPoint> ScalingCurve(int min_workers, int max_workers, int base,
                                      double base_work_per_hour, double base_power_kw,
                                      double efficiency_per_doubling);

struct PlanWeights {
  double efficiency = 0.6, carbon = 0.3, cost = 0.1;
};

struct PlanOptions {
  PlanWeights weights;
  std::vector<double> price_per_kwh;  // hourly, for `weighted`; empty = flat
  // suspend-resume: put the partial hour next to a running stretch (each stretch costs a restart
  // at run time), not in the cheapest hour anywhere. Slightly above the optimum.
  bool contiguous_partial = false;
};

struct PlanSlot {
  int hour = 0;         // from the start
  double offset = 0;    // where in the hour the slot starts (0..1)
  double fraction = 1;  // of the hour it lasts
  int workers = 0;
  double work = 0, energy_kwh = 0, carbon_kg = 0;
};

struct Plan {
  std::string strategy;
  std::vector<PlanSlot> slots;  // running slots in hour order (pauses are the hours missing)
  double work = 0, energy_kwh = 0, carbon_kg = 0, cost = 0;
  double finish_hours = 0;  // end of the last running slot
  bool feasible = true;
  std::string reason;  // why not feasible
  std::string note;    // e.g. which candidate won
};

// `intensity`: gCO2/kWh per hour from the start, at least deadline_hours long (throws otherwise).
Plan MakePlan(Strategy strategy, const JobSpec& job, const std::vector<double>& intensity,
              const PlanOptions& options = {});

// The same slots priced on other intensities (a plan made on a forecast, paid on what happened).
Plan Reprice(const Plan& plan, const JobSpec& job, const std::vector<double>& intensity);

// The strategy's plan and the carbon-agnostic baseline of a job, priced on the trace from the
// start (the CLI plans with the user's strategy, weights, forecast and price trace).
struct Plans {
  Plan plan, baseline;
  double forecast_carbon_kg = -1;  // with a forecast: what the plan expected
  std::vector<double> intensity;   // hourly from the start
};
// Contiguous running stretches of a plan (slots merged while the worker count stays).
struct Stretch {
  double start_h = 0, hours = 0;
  int workers = 0;
  double carbon_kg = 0, energy_kwh = 0;
};
std::vector<Stretch> Stretches(const Plan& plan);

}  // namespace cdt::green
