// The trainer's options (docs/training.md), one slice per component: each component is built
// from its own slice (train/trainer.h lists them). Free of libtorch: the CLI, the tests and the
// Python front end include it cheaply. ValidateTrainOptions (train_options.cc) refuses bad ones
// naming the flag a user typed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "cdt/log.h"
#include "common/file_system.h"

namespace cdt::train {

struct LiveMetrics;  // train/live_metrics.h

// The outputs of fc1 in mlp and cnn (models.cc): the most row blocks --linear-blocks can make.
inline constexpr int kMlpHidden = 512, kCnnHidden = 128;
// The --model names MakeModel (models.cc) builds, as error messages list them.
inline constexpr const char* kModelNameList = "mlp, cnn, moe-transformer, resnet18 or resnet50";

// The built-in models (train/models.h).
struct ModelOptions {
  std::string name = "cnn";       // mlp | cnn | moe-transformer | resnet18 | resnet50
  int layers = 2;                 // moe-transformer
  int width = 64;                 // moe-transformer token width
  int heads = 4;                  // moe-transformer attention heads
  int experts = 8;                // moe-transformer experts per layer
  int top_k = 2;                  // moe-transformer experts per token
  int linear_blocks = 1;          // mlp, cnn: row blocks of fc1 (train/models.h; 1 = off)
  double aux_loss_weight = 0.01;  // moe load-balancing loss coefficient
};

// Data: the datasets, the global batch and how it is split among the ranks.
struct DataOptions {
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic
  std::string dir;                        // "" = /usr/share/datasets/fashion-mnist
  int64_t synthetic_samples = 60000;
  int batch_size = 64;  // per rank
  int accumulate = 1;   // micro-batches per step (local batch split)
  // Steps between re-splits of the global batch by the ranks' measured compute speed
  // (train/batch_balancer.h); 0 = off, every rank takes batch_size.
  int64_t balance_batches = 0;
};

// The optimizer and its learning-rate schedule.
struct OptimizerOptions {
  std::string name = "sgd";          // sgd | adamw
  double lr = 0.1;                   // at reference_batch (Goyal et al.: 0.1 per 256)
  int64_t lr_reference_batch = 256;  // linear scaling; 0 = off
  double momentum = 0.9;
  double weight_decay = 0.0;
  // Linear warm-up steps; -1 = automatic (train/lr_schedule.h: when the rate is scaled up with
  // the global batch, round(5 log2 scale) steps, at most a quarter of the run; else none).
  int64_t warmup_steps = -1;
  bool cosine = true;
  // LARC clip mode (train/larc.h): each layer's step at most this fraction of its weights' norm;
  // 0 = off; -1 = automatic (0.05 when the rate is scaled up, else off).
  double larc_trust = -1;
};

// Gradient reduction: buckets, overlap, compression (docs/compression.md).
struct ReductionOptions {
  double bucket_mb = 0;             // 0 = planned_bucket_bytes, else a quarter of the model
  size_t planned_bucket_bytes = 0;  // from the topology plan (`--adaptive-comm`); 0 = none
  // Apply each bucket's update just before the next forward uses it, so that communication also
  // overlaps the next forward (train/update_scheduler.h). Same arithmetic either way.
  bool overlap_next_forward = true;
  // none | fp16 | bf16 | int8 | topk | randomk | powersgd | signsgd | adaptive; error feedback
  // wraps every lossy compressor unless turned off.
  std::string compress = "none";
  // topk / randomk: share of elements sent; 0 = the compressor's default
  // (compress::DefaultRatio: top-k 1%, random-k 75%).
  double compress_ratio = 0;
  // topk / randomk: the type the kept values travel in, fp32 | fp16 | bf16
  // (compress::CompressorOptions::sparse_values).
  std::string compress_values = "fp32";
  int powersgd_rank = 2;
  // powersgd: buckets whose matrices would save fewer bytes go uncompressed, in one allreduce
  // (compress::CompressorOptions::powersgd_min_saved_bytes).
  size_t powersgd_min_saved_bytes = 16 << 10;
  bool error_feedback = true;
  // topk / randomk / signsgd with SGD momentum: the error-feedback wrapper keeps the momentum and
  // compresses the velocity, the optimizer runs without (DGC's momentum correction,
  // compress/error_feedback.h).
  bool momentum_correction = true;
  int64_t compress_interval = 50;      // adaptive: steps between decisions
  double compress_min_exposed = 0.05;  // adaptive: compress only above this exposed share
};

// Checkpoint files (docs/checkpoint-format.md), written by rank 0 on a background thread, and the
// health monitor that can ask for one early.
struct CheckpointOptions {
  std::string dir;             // "" = no checkpoints
  int64_t every = 0;           // steps; 0 = at the end only (when a dir is given)
  std::string codec = "zstd";  // zstd | lz4 | none
  bool incremental = false;
  int full_every = 10;
  // none | int8: increments store parameters and momenta as int8 differences from the last full
  // checkpoint (lossy; elastic/checkpoint_store.h, docs/checkpoint-format.md).
  std::string quantize = "none";
  int keep = 2;
  // >0: checkpoint at the Young/Daly interval sqrt(2 C MTBF) for this mean time between
  // failures (seconds), C the measured cost on the training thread (replaces `every`).
  double mtbf_s = 0;
  double health_interval_s = 1.0;  // health monitor: seconds between samples (0 = off)
  bool resume = false;             // continue from the newest valid checkpoint in `dir`
  const FileSystem* fs = nullptr;  // where the files are; null: the process's (a test: a fake)
};

// What the run reports besides its result: evaluation, progress, timeline, energy.
struct MetricsOptions {
  int64_t eval_every = 0;      // steps; 0 = at the end only
  double target_accuracy = 0;  // stop at the first evaluation reaching it (0 = never)
  bool progress = true;        // live progress line on rank 0 (stderr)
  // Energy windows per step (Zeus-style begin/end around each step, green/energy_meter.h): the
  // hardware profiles file turns them on ("" = off). Each rank meters its own process.
  std::string energy_profiles;
  // Chrome-trace timeline of the first `timeline_steps` steps, every rank in one file written by
  // rank 0 (train/timeline.h; "" = none).
  std::string timeline;
  int64_t timeline_steps = 100;
  // Called on every rank about every `publish_every_s` seconds of training and once more at the
  // end (train/live_metrics.h; the dashboard's source); null = nothing published. It runs on the
  // training thread between steps: keep it short (a store write).
  std::function<void(const LiveMetrics&)> publish;
  double publish_every_s = 1.0;
};

struct TrainOptions {
  ModelOptions model;
  DataOptions data;
  OptimizerOptions optimizer;
  ReductionOptions reduction;
  CheckpointOptions checkpoint;
  MetricsOptions metrics;
  // The run: how long, from which seed, on how many threads.
  int64_t steps = 0;  // 0 = from epochs
  double epochs = 1;
  int64_t stop_after = 0;    // stop (and checkpoint) after this step; 0 = run to the end
  uint64_t seed = 1;         // model initialisation, data order, compressors' random draws
  int threads = 0;           // torch threads per rank; 0 = UsableCpus() / local ranks
  int local_world_size = 1;  // ranks sharing this host (for the thread default)
  int max_world_size = 0;    // elastic: the ranks the group may grow to (0 = this world)
  // What governs malloc in this process, in words, for the result (the CLI sets it up:
  // cli::ConfigureAllocator).
  std::string allocator;
  // How the communicator picks an algorithm per message size, in words, for the result (the
  // CLI sets it: "topology-planner" with --adaptive-comm, "forced <algo>" with CDT_ALLREDUCE_ALGO,
  // "rules file" with CDT_ALLREDUCE_RULES, else "fixed thresholds"); `assess` reads it.
  std::string allreduce_selection = "fixed thresholds";
  // Where the run's lines go (each rank's start "[rank<r>]: "); the CLI's honours CDT_LOG_LEVEL.
  Log log;
};

// Gradient bucket bytes: explicit --bucket-mb, else the topology plan's size, else a quarter of
// the model (at least 256 KiB, at most DDP's 25 MiB) so that even a small model is cut into
// several buckets that can overlap backward. `source` receives which.
size_t BucketBytes(const ReductionOptions& o, int64_t params, std::string* source);

// Throws cdt::Error(kInvalidArgument) naming the first bad option by its flag (train_options.cc).
// `builtin_model`: false when a library user brings the model (ModelFactory, trainer.h); its
// name and the built-in models' sizes are then not checked.
void ValidateTrainOptions(const TrainOptions& o, bool builtin_model = true);

}  // namespace cdt::train
