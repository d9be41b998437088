// A whole run (docs/predict.md, "Runs"): the steady step of step_simulator.h repeated until the
// job's samples are trained, with failures drawn from the cluster's MTBF (Monte Carlo, seeded),
// each costing detection, recovery and lost work; checkpoints at the Young/Daly interval
// √(2·δ·M) for a restart-everything launcher; energy from the devices' power, carbon from an
// hourly trace (and the best start within a deadline), cost from rental and energy prices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "green/carbon_trace.h"
#include "sim/cluster_profile.h"
#include "sim/model_profile.h"
#include "sim/step_simulator.h"

namespace cdt::sim {

struct RunConfig {
  double samples = 0;  // to train in all; 0 = one hour of steady training
  int trials = 200;    // Monte Carlo runs of the failure process
  uint64_t seed = 1;
  const green::CarbonTrace* carbon = nullptr;  // null: no carbon
  const green::CarbonTrace* price = nullptr;   // hourly energy price per kWh; null: none
  double start_unix = 0;                       // when the run starts (trace time)
  double deadline_hours = 0;  // > 0 with a trace: also the start within it with least carbon
  double fault_prediction_recall = 0;     // share of failures a predictor announces in time
  double fault_prediction_precision = 1;  // share of its alarms that are real
};

// How one recovery strategy fares (ours: in-process re-forming; theirs: restart everything from
// the last checkpoint, as torchrun does).
struct RecoveryPrediction {
  std::string strategy;
  double rto_s = 0;  // failure -> first step of the new group (mean over kinds)
  double rto_crash_s = 0, rto_hang_s = 0;    // of a dead worker, of a hung one
  double lost_work_s = 0;                    // work done again per failure (mean)
  double checkpoint_interval_s = 0;          // Young/Daly for restart; 0 when none is needed
  double checkpoint_overhead = 0;            // share of time spent blocked on checkpoints
  double expected_hours = 0, p90_hours = 0;  // wall time of the run, Monte Carlo
  double lost_hours = 0;                     // mean hours lost to failures and checkpoints
};

struct RunPrediction {
  StepPrediction step;
  double single_rank_samples_per_s = 0;
  double scaling_efficiency = 0;
  double samples_per_hour = 0;  // failure-free
  double ideal_hours = 0;       // failure-free run time
  double expected_failures = 0;
  double system_mtbf_hours = 0;
  RecoveryPrediction ours, restart;
  double effective_samples_per_hour = 0;     // ours, failures included
  double energy_kwh = 0;                     // facility energy (IT x PUE), ours with failures
  double carbon_kg = 0, carbon_best_kg = 0;  // starting now; at the best start within the deadline
  double best_start_unix = 0;
  double cost = 0;  // rental + energy, in the price's currency
  std::string cost_basis;
  double prediction_saved_hours = 0;  // what fault prediction saves in expectation (ours)
  std::vector<std::string> assumptions;
};

RunPrediction SimulateRun(const ModelProfile& model, const ClusterProfile& cluster,
                          const StepConfig& step, const RunConfig& run);

// Young/Daly: the checkpoint interval that minimises lost time, √(2·δ·M) (δ: the blocking cost
// of one checkpoint, M: the system's MTBF, both in seconds).
double YoungDalyIntervalS(double checkpoint_s, double mtbf_s);

// The JSON of a prediction (docs/predict.md, "Output").
std::string RunPredictionJson(const RunPrediction& p, const ModelProfile& model,
                              const ClusterProfile& cluster, const StepConfig& step);

}  // namespace cdt::sim
