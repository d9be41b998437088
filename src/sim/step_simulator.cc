#include "sim/step_simulator.h"

#include <algorithm>
#include <cmath>

#include "cdt/error.h"
#include "topology/planner.h"

namespace cdt::sim {
namespace {

// Compressors whose messages are gathered, not summed (top-k's indices differ per rank, signSGD
// votes): every rank receives every other rank's share.
bool Gathers(const std::string& c) { return c == "topk" || c == "signsgd"; }

// Ring allgather of `per_rank` bytes from every rank, over the slowest level the ring crosses.
double AllgatherUs(const topology::CostModel& m, double per_rank) {
  const int p = m.shape.world();
  if (p < 2) return 0;
  const topology::LinkLevel& l = m.shape.nodes() > 1 ? m.inter : m.intra;
  // Across nodes each node's uplink carries every other node's shares.
  const double crossing = m.shape.nodes() > 1 ? per_rank * m.shape.max_ranks_per_node() : per_rank;
  return (p - 1) * l.alpha_us + (p - 1) * crossing / (l.beta_GBps * 1e3);
}

struct Compute {
  ComputePoint step;
  int threads = 0;
  double oversubscription = 1, scale = 1;
  bool saturated = false;  // CPU ranks: their compute threads occupy every core
};

Compute ComputeOf(const ModelProfile& model, const ClusterProfile& c, int batch,
                  std::vector<std::string>* notes) {
  Compute out;
  if (c.accelerator) {
    out.step = model.StepAt(batch, model.compute.front().threads);
    if (notes && !(model.device_tflops > 0 && c.device_tflops > 0))
      notes->push_back("no peak figure for the profile's device (" + model.device + ") or " +
                       c.device + ": the profile's step times are used unchanged");
    if (model.device_tflops > 0 && c.device_tflops > 0) {
      out.scale = model.device_tflops / c.device_tflops;
      if (notes && out.scale != 1)
        notes->push_back("compute scaled from the profile's " + model.device + " to " + c.device +
                         " by peak TFLOPS (" + Num(model.device_tflops) + " / " +
                         Num(c.device_tflops) + "): assumes the same share of peak");
    }
  } else {
    const int per_node = c.links.shape.max_ranks_per_node();
    const int on_host = c.one_host ? c.world() : per_node;
    out.threads =
        c.threads_per_rank > 0 ? c.threads_per_rank : std::max(1, c.host_cores / per_node);
    out.step = model.StepAt(batch, out.threads);
    out.oversubscription = std::max(1.0, double(on_host) * out.threads / c.host_cores);
    out.saturated = on_host * out.threads >= c.host_cores;
    out.scale = out.oversubscription;
    if (notes && out.oversubscription > 1)
      notes->push_back(std::to_string(on_host) + " ranks x " + std::to_string(out.threads) +
                       " thread(s) on " + std::to_string(c.host_cores) +
                       " cores: compute slowed by " + Num(out.oversubscription));
  }
  for (double* t : {&out.step.forward_s, &out.step.backward_s, &out.step.optimizer_s,
                    &out.step.other_s, &out.step.step_sd_s})
    *t *= out.scale;
  return out;
}

// Per bucket (backward order): what goes on the wire, by which algorithm, and the seconds of
// communication (plus encode and decode) it costs; out->buckets gets the first two.
std::vector<double> BucketCosts(const ModelProfile& model, const ClusterProfile& cluster,
                                const StepConfig& config, const Compute& cp, StepPrediction* out) {
  const int W = cluster.world();
  const CompressionCost* cc = nullptr;
  if (config.compress != "none") {
    cc = model.Compressor(config.compress);
    if (!cc)
      throw Error(ErrorCode::kInvalidArgument,
                  "model profile '" + model.model + "' has no cost for compressor '" +
                      config.compress + "' (profile it with --compressors " + config.compress +
                      ")");
  }
  if (config.algorithm != "auto") ParseAllreduceAlgorithm(config.algorithm);  // throws, naming them
  const topology::TopologyPlanner planner(cluster.links);
  AllreduceShape shape;
  shape.world_size = W;
  shape.num_nodes = cluster.nodes();
  shape.max_ranks_per_node = cluster.links.shape.max_ranks_per_node();
  shape.shared_memory = cluster.links.shared_memory;
  // A CPU host whose cores all compute: collectives take at least what the profile measured
  // them to take under that load.
  const bool loaded = !cluster.accelerator && cp.saturated && W > 1 &&
                      (model.loaded_alpha_s > 0 || model.loaded_s_per_byte > 0);
  if (loaded)
    out->assumptions.push_back("every core computes: a collective takes at least " +
                               Num(model.loaded_alpha_s * 1e3) + " ms + " +
                               Num(model.loaded_s_per_byte * 1e9) +
                               " ns/byte (measured under load by the profile's two-rank run) x " +
                               Num(cp.oversubscription) + " (oversubscription)");
  const size_t n = model.bucket_bytes.size();
  std::vector<double> comm(n, 0);
  out->buckets.resize(n);
  for (size_t i = 0; i < n; ++i) {
    BucketTiming& b = out->buckets[i];
    b.bytes = model.bucket_bytes[i];
    b.wire_bytes = cc ? b.bytes / cc->wire_ratio : b.bytes;
    if (W < 2) {
      b.algorithm = "none";
      continue;
    }
    double us = 0;
    if (cc && Gathers(config.compress)) {
      b.algorithm = "allgather";
      us = AllgatherUs(cluster.links, b.wire_bytes);
    } else {
      shape.bytes = static_cast<size_t>(b.wire_bytes);
      const AllreduceAlgorithm a = config.algorithm == "auto"
                                       ? planner.Select(shape)
                                       : ParseAllreduceAlgorithm(config.algorithm);
      b.algorithm = AllreduceAlgorithmName(a);
      us = cluster.links.PredictUs(a, b.wire_bytes);
    }
    if (loaded)
      us = std::max(us, 1e6 * (model.loaded_alpha_s + model.loaded_s_per_byte * b.wire_bytes) *
                            cp.oversubscription);
    comm[i] = us * 1e-6 + (cc ? cc->seconds_per_byte * b.bytes * cp.scale : 0);
  }
  return comm;
}

// The loss average: one small allreduce per step after the last bucket.
double LossAllreduceS(const ClusterProfile& cluster) {
  if (cluster.world() < 2) return 0;
  AllreduceShape shape;
  shape.bytes = 8;
  shape.world_size = cluster.world();
  shape.num_nodes = cluster.nodes();
  shape.max_ranks_per_node = cluster.links.shape.max_ranks_per_node();
  shape.shared_memory = cluster.links.shared_memory;
  const topology::TopologyPlanner planner(cluster.links);
  return cluster.links.PredictUs(planner.Select(shape), 8) * 1e-6;
}

// Each bucket's share of forward and backward time: from the measured ready times where the
// profile has them (differences of the fractions; the last bucket takes the rest), else its
// share of the bytes.
std::vector<double> TimeShares(const ModelProfile& model) {
  const size_t n = model.bucket_bytes.size();
  std::vector<double> share(n, 0);
  if (model.bucket_ready_fraction.size() == n) {
    double before = 0;
    for (size_t i = 0; i < n; ++i) {
      const double f = i + 1 == n ? 1.0 : std::max(before, model.bucket_ready_fraction[i]);
      share[i] = f - before;
      before = f;
    }
    return share;
  }
  const double total = std::max(1.0, model.gradient_bytes());
  for (size_t i = 0; i < n; ++i) share[i] = model.bucket_bytes[i] / total;
  return share;
}

// What the event loop needs beyond the profile's step.
struct Timing {
  std::vector<double> comm, share;
  std::vector<bool> priority;  // on the second connection
  double loss_s = 0, straggle_s = 0, wakeup_s = 0;
};

// The event loop over `steps` steps: the compute thread's clock `t` and the communication
// threads' `c` ([0] bulk, [1] the priority connection: the first layers' buckets, which the
// next forward needs first, do not queue behind the big ones); done[i] = when bucket i's reduced
// gradient (and so its update) is available. Fills out->step_s and the buckets' times.
void RunSteps(const ComputePoint& s, const Timing& x, const StepConfig& config,
              StepPrediction* out) {
  const size_t n = x.comm.size();
  std::vector<double> done(n, 0), ready(n, 0), start(n, 0);
  double t = 0, c[2] = {0, 0}, step_start = 0, prev_start = 0;
  for (int k = 0; k < std::max(2, config.steps); ++k) {
    prev_start = step_start;
    step_start = t;
    t += s.other_s;
    if (config.overlap_next_forward) {
      for (size_t j = n; j-- > 0;) {  // forward runs the first layers (the last bucket) first
        t = std::max(t, done[j]) + s.optimizer_s * x.share[j];
        t += s.forward_s * x.share[j];
      }
    } else {
      for (size_t j = 0; j < n; ++j) t = std::max(t, done[j]);
      t += s.optimizer_s + s.forward_s;
    }
    const double backward_start = t;
    for (size_t i = 0; i < n; ++i) {
      t += s.backward_s * x.share[i];
      ready[i] = t + x.straggle_s + x.wakeup_s;
      double& ch = c[x.priority[i] ? 1 : 0];
      start[i] = std::max(ch, ready[i]);
      ch = start[i] + x.comm[i];
      done[i] = ch;
    }
    t = backward_start + s.backward_s;
    c[0] += x.loss_s;  // the loss average follows the last bucket on the bulk channel
  }
  out->step_s = step_start - prev_start;
  for (size_t i = 0; i < n; ++i) {
    out->buckets[i].ready_s = ready[i] - step_start;
    out->buckets[i].start_s = start[i] - step_start;
    out->buckets[i].end_s = done[i] - step_start;
  }
}

}  // namespace

StepPrediction SimulateStep(const ModelProfile& model, const ClusterProfile& cluster,
                            const StepConfig& config) {
  StepPrediction out;
  const Compute cp = ComputeOf(model, cluster, config.batch, &out.assumptions);
  out.threads = cp.threads;
  out.oversubscription = cp.oversubscription;
  out.compute_scale = cp.scale;
  const ComputePoint& s = cp.step;
  const int W = cluster.world();
  const size_t n = model.bucket_bytes.size();

  Timing x;
  x.comm = BucketCosts(model, cluster, config, cp, &out);
  x.share = TimeShares(model);
  x.loss_s = LossAllreduceS(cluster);
  x.straggle_s = W > 1 ? s.step_sd_s * std::sqrt(2 * std::log(double(W))) : 0;
  // A CPU host whose cores all compute: a ready bucket waits for its thread to be scheduled.
  x.wakeup_s = !cluster.accelerator && W > 1 && cp.saturated ? model.comm_wakeup_s : 0;
  const bool two = config.overlap_next_forward && !model.bucket_priority.empty();
  x.priority.assign(n, false);
  for (size_t i = 0; two && i < n; ++i) x.priority[i] = model.bucket_priority[i];
  RunSteps(s, x, config, &out);

  for (double c : x.comm) out.comm_s += c;
  out.comm_s += x.loss_s;
  out.compute_s = s.forward_s + s.backward_s + s.optimizer_s + s.other_s;
  out.exposed_s = std::max(0.0, out.step_s - out.compute_s);
  out.straggler_s = std::min(out.exposed_s, x.straggle_s);
  const double exposed_comm = out.exposed_s - out.straggler_s;
  out.overlap = out.comm_s > 0 ? std::clamp(1 - exposed_comm / out.comm_s, 0.0, 1.0) : 1;
  out.sync_wait_fraction = out.step_s > 0 ? out.exposed_s / out.step_s : 0;
  out.samples_per_s = out.step_s > 0 ? double(W) * config.batch / out.step_s : 0;
  const bool measured_ready = model.bucket_ready_fraction.size() == n;
  out.assumptions.push_back("compute per step from the model profile (" + model.source +
                            "); the gradient in " + std::to_string(n) + " bucket(s), each ready " +
                            (measured_ready ? "when the profile's timeline saw it ready in backward"
                                            : "in proportion to its bytes through backward"));
  if (x.wakeup_s > 0)
    out.assumptions.push_back("every core computes: a ready bucket waits " + Num(x.wakeup_s * 1e3) +
                              " ms for its communication thread (measured by the profile)");
  if (W > 1)
    out.assumptions.push_back(std::string(two ? "two connections (the first layers' buckets on "
                                                "the second), one bucket at a time on each"
                                              : "one bucket on the wire at a time") +
                              "; each allreduce timed by the topology cost model with the "
                              "algorithm its planner picks");
  if (x.straggle_s > 0)
    out.assumptions.push_back("stragglers: each step waits sigma*sqrt(2 ln W) = " +
                              Num(x.straggle_s * 1e3) + " ms for the slowest rank");
  return out;
}

double SingleRankSamplesPerS(const ModelProfile& model, const ClusterProfile& cluster,
                             const StepConfig& config) {
  ClusterProfile one = cluster;
  one.links.shape.ranks_per_node = {1};
  one.one_host = false;
  return SimulateStep(model, one, config).samples_per_s;
}

}  // namespace cdt::sim
