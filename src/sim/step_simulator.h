// The event-driven simulation of bucketed data-parallel steps (docs/predict.md, "Steps"): each
// rank's forward and backward as in the model profile (scaled to the cluster's device, slowed
// where ranks share too few cores), each gradient bucket handed to the communication thread when
// backward produces it, allreduced with the algorithm the topology planner would pick for its
// size on the cluster's link levels (compressed: fewer bytes, plus encode and decode), one
// bucket at a time, and the next forward waiting for each bucket's update before the layers that
// use it (`overlap_next_forward`, as the trainer does by default) or for all of them. Stragglers:
// each step's buckets start when the slowest of W ranks is ready, E[max of W] ≈ σ·√(2 ln W).
#pragma once

#include <string>
#include <vector>

#include "sim/cluster_profile.h"
#include "sim/model_profile.h"

namespace cdt::sim {

struct StepConfig {
  int batch = 32;                 // samples per rank per step
  std::string compress = "none";  // a compressor of the model profile, or "none"
  bool overlap_next_forward = true;
  // "auto": the algorithm the topology planner picks per bucket size (what the engine does);
  // else one algorithm for every bucket ("ring" for Horovod's and DDP's NCCL/Gloo rings).
  std::string algorithm = "auto";
  int steps = 8;  // simulated steps; the last one's period is the answer
};

struct BucketTiming {
  double bytes = 0, wire_bytes = 0;
  std::string algorithm;
  double ready_s = 0, start_s = 0, end_s = 0;  // in the last simulated step, from its start
};

struct StepPrediction {
  double step_s = 0;
  double compute_s = 0;           // forward + backward + optimizer + other, per rank
  double comm_s = 0;              // the communication thread's busy time per step
  double exposed_s = 0;           // step_s - compute_s: time the compute thread waited
  double straggler_s = 0;         // of which: waiting for the slowest rank
  double overlap = 0;             // 1 - (exposed communication) / comm_s
  double sync_wait_fraction = 0;  // exposed_s / step_s
  double samples_per_s = 0;       // the whole job's
  int threads = 0;                // CPU ranks: compute threads per rank
  double oversubscription = 1;    // CPU ranks: compute threads / cores of the host (>= 1)
  double compute_scale = 1;       // the profile's compute times were multiplied by this
  std::vector<BucketTiming> buckets;
  std::vector<std::string> assumptions;
};

// Throws kInvalidArgument for a compressor the profile does not have.
StepPrediction SimulateStep(const ModelProfile& model, const ClusterProfile& cluster,
                            const StepConfig& config);

// The same model on one rank of the same device (a CPU rank with all of one node's cores), the
// baseline of scaling efficiency: throughput / (world × this).
double SingleRankSamplesPerS(const ModelProfile& model, const ClusterProfile& cluster,
                             const StepConfig& config);

}  // namespace cdt::sim
