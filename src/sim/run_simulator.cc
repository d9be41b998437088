#include "sim/run_simulator.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "cdt/error.h"

namespace cdt::sim {
namespace {

constexpr double kHour = 3600;

// Bytes of what a recovery moves: parameters and the optimizer's momentum, fp32.
double StateBytes(const ModelProfile& m) { return 8.0 * m.parameters; }

// Lost time per failure for each strategy, before the Monte Carlo.
struct Costs {
  double fixed_s = 0;                      // detection + re-forming or restart + reload
  double checkpoint_s = 0;                 // blocking cost of one checkpoint (restart only)
  double interval_s = 0;                   // checkpoint interval (restart only)
  double redo_s = 0;                       // ours: the step the victim never finished
  double crash_rto_s = 0, hang_rto_s = 0;  // a dead worker's recovery, a hung one's
};

// A dead rank's sockets close: survivors fail at their next collective, on average half the gap
// between two of them. A hung one is found by the silent-peer timeout.
double CrashDetectionS(const StepPrediction& s) { return s.step_s / (s.buckets.size() + 1) / 2; }

double DetectionS(const ClusterProfile& c, const StepPrediction& s) {
  return (1 - c.recovery.hang_share) * CrashDetectionS(s) +
         c.recovery.hang_share * c.recovery.heartbeat_timeout_s;
}

Costs OursCosts(const ModelProfile& m, const ClusterProfile& c, const StepPrediction& s) {
  Costs k;
  const topology::LinkLevel& l = c.nodes() > 1 ? c.links.inter : c.links.intra;
  const double beta = l.beta_GBps > 0 ? l.beta_GBps * 1e9 : 1e9;
  // The replacement (a spare) receives the committed state from rank 0 over one link.
  const double state_s =
      StateBytes(m) / beta + l.alpha_us * 1e-6 * std::log2(std::max(2, c.world()));
  const double reform =
      c.recovery.rendezvous_s + c.recovery.connect_s_per_peer * (c.world() - 1) + state_s;
  k.fixed_s = DetectionS(c, s) + reform;
  k.redo_s = s.step_s;
  k.crash_rto_s = CrashDetectionS(s) + reform + k.redo_s;
  k.hang_rto_s = c.recovery.heartbeat_timeout_s + reform + k.redo_s;
  return k;
}

Costs RestartCosts(const ModelProfile& m, const ClusterProfile& c, double system_mtbf_s) {
  Costs k;
  k.checkpoint_s = StateBytes(m) / (c.recovery.checkpoint_GBps * 1e9);
  k.interval_s = system_mtbf_s > 0 ? YoungDalyIntervalS(k.checkpoint_s, system_mtbf_s) : 0;
  const double hang = c.recovery.hang_share * c.recovery.heartbeat_timeout_s;
  k.fixed_s = hang + c.recovery.restart_s + k.checkpoint_s;  // detect, restart, read it back
  k.crash_rto_s = c.recovery.restart_s + k.checkpoint_s;
  k.hang_rto_s = c.recovery.heartbeat_timeout_s + k.crash_rto_s;
  return k;
}

struct Trials {
  double mean_hours = 0, p90_hours = 0, lost_hours = 0;
};

// Monte Carlo of one strategy: `work_s` of failure-free training (checkpoint stalls included for
// restart), failures at exponential intervals of mean `mtbf_s`.
Trials Simulate(double work_s, double mtbf_s, const Costs& k, bool restart, int trials,
                uint64_t seed) {
  Trials out;
  if (!(mtbf_s > 0) || trials < 1) {
    out.mean_hours = out.p90_hours = work_s / kHour;
    return out;
  }
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> next(1.0 / mtbf_s);
  std::vector<double> hours;
  double lost_sum = 0;
  for (int t = 0; t < trials; ++t) {
    double done = 0, wall = 0, since_ckpt = 0;
    for (int guard = 0; done < work_s && guard < 10000000; ++guard) {
      const double x = next(rng);
      if (done + x >= work_s) {
        wall += work_s - done;
        done = work_s;
        break;
      }
      // Progress until the failure, then what it takes back.
      double lost = k.fixed_s;
      double progress = x;
      if (restart) {
        since_ckpt += x;
        const double redo = k.interval_s > 0 ? std::fmod(since_ckpt, k.interval_s) : since_ckpt;
        progress -= redo;
        lost += redo;
        since_ckpt = 0;
      } else {
        progress -= std::min(x, k.redo_s);
        lost += std::min(x, k.redo_s);
      }
      done += progress;
      wall += x + k.fixed_s;
      lost_sum += lost;
    }
    hours.push_back(wall / kHour);
  }
  std::sort(hours.begin(), hours.end());
  double sum = 0;
  for (double h : hours) sum += h;
  out.mean_hours = sum / hours.size();
  out.p90_hours = hours[std::min(hours.size() - 1, size_t(0.9 * hours.size()))];
  out.lost_hours = lost_sum / trials / kHour;
  return out;
}

// Mean facility power in kW during steady training.
double PowerKw(const ClusterProfile& c, const StepPrediction& s) {
  const double busy = s.step_s > 0 ? std::min(1.0, s.compute_s / s.step_s) : 1;
  const double per_rank = c.device_power_w * busy + c.device_idle_w * (1 - busy);
  return (c.world() * per_rank + c.nodes() * c.node_power_w) / 1000 * c.pue;
}

}  // namespace

double YoungDalyIntervalS(double checkpoint_s, double mtbf_s) {
  return std::sqrt(2 * checkpoint_s * mtbf_s);
}

RunPrediction SimulateRun(const ModelProfile& model, const ClusterProfile& c,
                          const StepConfig& step, const RunConfig& run) {
  RunPrediction p;
  p.step = SimulateStep(model, c, step);
  p.assumptions = p.step.assumptions;
  p.single_rank_samples_per_s = SingleRankSamplesPerS(model, c, step);
  p.scaling_efficiency = p.single_rank_samples_per_s > 0
                             ? p.step.samples_per_s / (c.world() * p.single_rank_samples_per_s)
                             : 0;
  p.samples_per_hour = p.step.samples_per_s * kHour;
  const double samples = run.samples > 0 ? run.samples : p.samples_per_hour;
  p.ideal_hours = p.samples_per_hour > 0 ? samples / p.samples_per_hour : 0;
  const double work_s = p.ideal_hours * kHour;

  // Failures.
  const double mtbf_h = c.node_mtbf_hours > 0 ? c.node_mtbf_hours / c.nodes() : 0;
  p.system_mtbf_hours = mtbf_h;
  const Costs ours = OursCosts(model, c, p.step), theirs = RestartCosts(model, c, mtbf_h * kHour);
  const Trials to = Simulate(work_s, mtbf_h * kHour, ours, false, run.trials, run.seed);
  const double ckpt_overhead = theirs.interval_s > 0 ? theirs.checkpoint_s / theirs.interval_s : 0;
  const Trials tr =
      Simulate(work_s * (1 + ckpt_overhead), mtbf_h * kHour, theirs, true, run.trials, run.seed);
  p.expected_failures = mtbf_h > 0 ? to.mean_hours / mtbf_h : 0;
  p.ours = {"in-process re-forming (cdt elastic)",
            ours.fixed_s + ours.redo_s,
            ours.crash_rto_s,
            ours.hang_rto_s,
            ours.redo_s,
            0,
            0,
            to.mean_hours,
            to.p90_hours,
            to.lost_hours};
  p.restart = {
      "restart everything from the last checkpoint (torchrun)",
      theirs.fixed_s,
      theirs.crash_rto_s,
      theirs.hang_rto_s,
      theirs.interval_s / 2,
      theirs.interval_s,
      ckpt_overhead,
      tr.mean_hours,
      tr.p90_hours,
      tr.lost_hours + (tr.mean_hours - tr.lost_hours) * ckpt_overhead / (1 + ckpt_overhead)};
  p.effective_samples_per_hour = to.mean_hours > 0 ? samples / to.mean_hours : 0;
  if (mtbf_h > 0) {
    p.assumptions.push_back(
        "failures: node MTBF " + Num(c.node_mtbf_hours) + " h (" + c.mtbf_source + "), " +
        std::to_string(int(c.recovery.hang_share * 100)) + "% of them hangs found by a " +
        Num(c.recovery.heartbeat_timeout_s) + " s timeout; a spare takes the lost node's place");
    // Fault prediction: an announced failure is drained before it happens (no detection, no
    // step redone); a false alarm costs one proactive snapshot, about a step.
    const double r = std::clamp(run.fault_prediction_recall, 0.0, 1.0);
    const double prec = std::clamp(run.fault_prediction_precision, 1e-3, 1.0);
    const double saved = r * p.expected_failures * (DetectionS(c, p.step) + ours.redo_s);
    const double false_alarms = r * p.expected_failures * (1 - prec) / prec;
    p.prediction_saved_hours = (saved - false_alarms * p.step.step_s) / kHour;
  }

  p.assumptions.push_back(
      "recovery, ours: a crash is seen at the survivors' next collective (half the gap between "
      "two), a hang after the silent-peer timeout; then a rendezvous round (" +
      Num(c.recovery.rendezvous_s) + " s), one connection per peer (" +
      Num(c.recovery.connect_s_per_peer) + " s each), the committed state (" +
      Num(StateBytes(model) / 1e9) +
      " GB: parameters and momentum) to the replacement, and the "
      "step the victim never finished done again");
  p.assumptions.push_back("recovery, restart everything: " + Num(c.recovery.restart_s) +
                          " s to restart every process, a checkpoint read and written at " +
                          Num(c.recovery.checkpoint_GBps) +
                          " GB/s, checkpoints at the Young/Daly interval, the work since the last "
                          "one done again");

  // Energy, carbon, cost.
  const double kw = PowerKw(c, p.step);
  if (kw > 0)
    p.assumptions.push_back("power: each device at " + Num(c.device_power_w) +
                            " W while computing and " + Num(c.device_idle_w) +
                            " W while waiting, each node " + Num(c.node_power_w) + " W more, PUE " +
                            Num(c.pue) + ": " + Num(kw) + " kW");
  p.energy_kwh = kw * to.mean_hours;
  if (kw <= 0) p.assumptions.push_back("no power figure for the devices: energy and carbon 0");
  if (run.carbon && kw > 0) {
    const double t0 = run.start_unix, len = to.mean_hours * kHour;
    p.carbon_kg = run.carbon->GramsPerKw(t0, t0 + len) * kw / 1000;
    p.best_start_unix = t0;
    p.carbon_best_kg = p.carbon_kg;
    for (int h = 1; run.deadline_hours > 0 && h * kHour + len <= run.deadline_hours * kHour; ++h) {
      const double s = t0 + h * kHour;
      if (s + len > run.carbon->end_unix()) break;
      const double kg = run.carbon->GramsPerKw(s, s + len) * kw / 1000;
      if (kg < p.carbon_best_kg) {
        p.carbon_best_kg = kg;
        p.best_start_unix = s;
      }
    }
  }
  p.cost = c.price_per_device_hour * c.world() * to.mean_hours;
  p.cost_basis = c.price_per_device_hour > 0 ? "rental per device-hour" : "";
  if (run.price && kw > 0) {
    const double t0 = p.best_start_unix > 0 ? p.best_start_unix : run.start_unix;
    p.cost += run.price->GramsPerKw(t0, t0 + to.mean_hours * kHour) * kw;
    p.cost_basis += std::string(p.cost_basis.empty() ? "" : " + ") + "energy at the price trace";
  }
  return p;
}

std::string RunPredictionJson(const RunPrediction& p, const ModelProfile& model,
                              const ClusterProfile& c, const StepConfig& step) {
  auto recovery = [](const RecoveryPrediction& r) {
    return nlohmann::json{{"strategy", r.strategy},
                          {"rto_s", r.rto_s},
                          {"rto_crash_s", r.rto_crash_s},
                          {"rto_hang_s", r.rto_hang_s},
                          {"lost_work_s", r.lost_work_s},
                          {"checkpoint_interval_s", r.checkpoint_interval_s},
                          {"checkpoint_overhead", r.checkpoint_overhead},
                          {"expected_hours", r.expected_hours},
                          {"p90_hours", r.p90_hours},
                          {"lost_hours", r.lost_hours}};
  };
  nlohmann::json buckets = nlohmann::json::array();
  for (const BucketTiming& b : p.step.buckets)
    buckets.push_back({{"bytes", b.bytes},
                       {"wire_bytes", b.wire_bytes},
                       {"algorithm", b.algorithm},
                       {"ready_s", b.ready_s},
                       {"start_s", b.start_s},
                       {"end_s", b.end_s}});
  nlohmann::json j = {{"format", "cdt-prediction"},
                      {"version", 1},
                      {"model", model.model},
                      {"cluster", c.name},
                      {"world_size", c.world()},
                      {"nodes", c.nodes()},
                      {"batch_per_rank", step.batch},
                      {"compress", step.compress},
                      {"samples_per_s", p.step.samples_per_s},
                      {"samples_per_hour", p.samples_per_hour},
                      {"effective_samples_per_hour", p.effective_samples_per_hour},
                      {"scaling_efficiency", p.scaling_efficiency},
                      {"single_rank_samples_per_s", p.single_rank_samples_per_s},
                      {"step_s", p.step.step_s},
                      {"compute_s", p.step.compute_s},
                      {"comm_s", p.step.comm_s},
                      {"exposed_s", p.step.exposed_s},
                      {"straggler_s", p.step.straggler_s},
                      {"sync_wait_fraction", p.step.sync_wait_fraction},
                      {"overlap", p.step.overlap},
                      {"buckets", buckets},
                      {"ideal_hours", p.ideal_hours},
                      {"system_mtbf_hours", p.system_mtbf_hours},
                      {"expected_failures", p.expected_failures},
                      {"recovery", {{"ours", recovery(p.ours)}, {"restart", recovery(p.restart)}}},
                      {"fault_prediction_saved_hours", p.prediction_saved_hours},
                      {"energy_kwh", p.energy_kwh},
                      {"carbon_kg", p.carbon_kg},
                      {"carbon_best_start_kg", p.carbon_best_kg},
                      {"best_start_unix", p.best_start_unix},
                      {"cost", p.cost},
                      {"cost_basis", p.cost_basis},
                      {"assumptions", p.assumptions}};
  return j.dump(1) + "\n";
}

}  // namespace cdt::sim
