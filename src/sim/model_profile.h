// ModelProfile: what the simulator needs to know about a model (docs/predict.md, "Model
// profiles"): the compute time of one training step per batch size and thread count, the
// gradient buckets in the order backward produces them, and what each compressor costs and
// saves on this gradient. `cann-dist-train profile` measures one on this machine; a profile can
// also be written from published figures (knowledge_base/model_profiles/), with the device it was
// measured on so that the simulator can scale it to another device by peak FLOPS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cdt::sim {

// One measured configuration: seconds per step (means over the measured steps).
struct ComputePoint {
  int batch = 0;    // samples per rank per step
  int threads = 1;  // compute threads of the rank (CPU); 0 = an accelerator
  double forward_s = 0;
  double backward_s = 0;
  double optimizer_s = 0;
  double other_s = 0;    // the rest of a step alone: data loading, bookkeeping
  double step_sd_s = 0;  // standard deviation of a step's time (stragglers, section "Steps")
};

struct CompressionCost {
  std::string name;             // fp16, int8, topk, powersgd, ...
  double wire_ratio = 1;        // fp32 bytes / bytes sent
  double seconds_per_byte = 0;  // encode + decode, per fp32 gradient byte, on the profiled device
};

// What a profile may claim (ParseModelProfile refuses more, naming the field): 10^15 parameters,
// buckets of at most 10^16 bytes (a bucket's size becomes a size_t message size in the simulated
// collectives, where 1e300 would not fit).
inline constexpr int64_t kMaxParameters = 1000000000000000;
inline constexpr double kMaxBucketBytes = 1e16;

struct ModelProfile {
  std::string model;
  std::string source;  // how it was obtained: a command line or a publication
  int64_t parameters = 0;
  std::vector<double> bucket_bytes;  // fp32 gradient bytes per bucket, in backward order
  // Which buckets the trainer sends on its second (priority) connection: the first layers',
  // which the next forward needs first (docs/training.md). Empty = none.
  std::vector<bool> bucket_priority;
  // When each bucket is ready, as a fraction of backward (measured from a timeline; backward's
  // cost is not proportional to bytes: a CNN's big fully connected layer is quick to
  // differentiate, its convolutions slow). Empty = in proportion to the bytes.
  std::vector<double> bucket_ready_fraction;
  // CPU profiles: how long a ready bucket waited for the communication thread while every core
  // computed (measured in the two-rank run; the scheduler's wake-up latency on this host).
  double comm_wakeup_s = 0;
  // CPU profiles: a collective's time in the same two-rank run, when the cores it needs also
  // compute, as a line seconds = alpha + per_byte x bytes over the buckets (0, 0 = not measured).
  // The simulator takes it over the cost model's idle-host time on a CPU host whose cores all
  // compute, scaled by the host's oversubscription.
  double loaded_alpha_s = 0, loaded_s_per_byte = 0;
  std::vector<ComputePoint> compute;
  std::string
      device;  // what `compute` was measured on (a knowledge-base accelerator name or a CPU)
  double device_tflops = 0;  // its peak (the precision the model trains in); 0 = unknown
  std::vector<CompressionCost> compression;

  double gradient_bytes() const;
  // Compute of one step on `threads` threads at `batch` samples: a least-squares line through
  // the points of that thread count (the nearest count measured), time = fixed + per-sample ×
  // batch, split into the phases in the measured proportions. Throws kInvalidArgument when the
  // profile has no compute points.
  ComputePoint StepAt(int batch, int threads) const;
  const CompressionCost* Compressor(const std::string& name) const;  // null: not profiled
};

// `v` with up to `digits` significant digits, for the assumption lines ("6335", "0.0123").
std::string Num(double v, int digits = 4);

// The profile document ("cdt-model-profile", version 1). Parse errors name `where` and the field.
ModelProfile ParseModelProfile(const std::string& json_text, const std::string& where);
std::string ModelProfileJson(const ModelProfile& p);

}  // namespace cdt::sim
