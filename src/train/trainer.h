// The data-parallel trainer behind `cann-dist-train train` (docs/training.md). This header is
// free of libtorch so that the CLI and tests include it cheaply; the implementation is in
// src/train/*.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::train {

// The outputs of fc1 in mlp and cnn (models.cc): the most row blocks --linear-blocks can make.
inline constexpr int kMlpHidden = 512, kCnnHidden = 128;
// The --model names MakeModel (models.cc) builds, as error messages list them.
inline constexpr const char* kModelNameList = "mlp, cnn or moe-transformer";

struct TrainOptions {
  std::string model = "cnn";                                      // mlp | cnn | moe-transformer
  int layers = 2, width = 64, heads = 4, experts = 8, top_k = 2;  // moe-transformer
  int linear_blocks = 1;                  // mlp, cnn: row blocks of fc1 (train/models.h; 1 = off)
  double aux_loss_weight = 0.01;          // moe load-balancing loss coefficient
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic
  std::string data_dir;                   // "" = /usr/share/datasets/fashion-mnist
  int64_t synthetic_samples = 60000;
  int64_t steps = 0;  // 0 = from epochs
  double epochs = 1;
  int batch_size = 64;               // per rank
  int accumulate = 1;                // micro-batches per step (local batch split)
  std::string optimizer = "sgd";     // sgd | adamw
  double lr = 0.1;                   // at reference_batch (Goyal et al.: 0.1 per 256)
  int64_t lr_reference_batch = 256;  // linear scaling; 0 = off
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t warmup_steps = 0;
  bool cosine = true;
  uint64_t seed = 1;
  double bucket_mb = 0;             // 0 = planned_bucket_bytes, else a quarter of the model
  size_t planned_bucket_bytes = 0;  // from the topology plan (`--adaptive-comm`); 0 = none
  // Apply each bucket's update just before the next forward uses it, so that communication also
  // overlaps the next forward (train/update_scheduler.h). Same arithmetic either way.
  bool overlap_next_forward = true;
  // Gradient compression (docs/compression.md): none | fp16 | bf16 | int8 | topk | randomk |
  // powersgd | signsgd | adaptive; error feedback wraps every lossy compressor unless turned off.
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
  int64_t eval_every = 0;              // steps; 0 = at the end only
  double target_accuracy = 0;          // stop at the first evaluation reaching it (0 = never)
  std::string checkpoint_dir;          // "" = no checkpoints
  int64_t checkpoint_every = 0;        // steps; 0 = at the end only (when a dir is given)
  // Checkpoint files (docs/checkpoint-format.md), written by rank 0 on a background thread.
  std::string checkpoint_codec = "zstd";  // zstd | lz4 | none
  bool checkpoint_incremental = false;
  int checkpoint_full_every = 10;
  // none | int8: increments store parameters and momenta as int8 differences from the last full
  // checkpoint (lossy; elastic/checkpoint_store.h, docs/checkpoint-format.md).
  std::string checkpoint_quantize = "none";
  int checkpoint_keep = 2;
  // >0: checkpoint at the Young/Daly interval sqrt(2 C MTBF) for this mean time between
  // failures (seconds), C the measured cost on the training thread (replaces checkpoint_every).
  double checkpoint_mtbf_s = 0;
  double health_interval_s = 1.0;  // health monitor: seconds between samples (0 = off)
  bool resume = false;
  int64_t stop_after = 0;    // stop (and checkpoint) after this step; 0 = run to the end
  bool progress = true;      // live progress line on rank 0 (stderr)
  int threads = 0;           // torch threads per rank; 0 = UsableCpus() / local ranks
  int local_world_size = 1;  // ranks sharing this host (for the thread default)
  int max_world_size = 0;    // elastic: the ranks the group may grow to (0 = this world)
  // Energy windows per step (Zeus-style begin/end around each step, green/energy_meter.h): the
  // hardware profiles file turns them on ("" = off). Each rank meters its own process.
  std::string energy_profiles;
  // Steps between re-splits of the global batch by the ranks' measured compute speed
  // (train/batch_balancer.h); 0 = off, every rank takes batch_size.
  int64_t balance_batches = 0;
  // Chrome-trace timeline of the first `timeline_steps` steps, every rank in one file written by
  // rank 0 (train/timeline.h; "" = none).
  std::string timeline;
  int64_t timeline_steps = 100;
  // What governs malloc in this process, in words, for the result (the CLI sets it up:
  // cli::ConfigureAllocator).
  std::string allocator;
};

// Throws cdt::Error(kInvalidArgument) naming the first bad option by its flag (train_options.cc).
void ValidateTrainOptions(const TrainOptions& o);

struct StepTimes {
  double forward_s = 0, backward_s = 0, comm_wait_s = 0, optimizer_s = 0;
};

struct TrainResult {
  int world_size = 1;
  std::string model;
  int64_t params = 0;
  int64_t steps = 0;        // steps this run executed
  int64_t total_steps = 0;  // the run's last step + 1 (what --steps / --epochs amount to)
  int64_t first_step = 0;   // 0, or the step resumed from
  int64_t samples = 0;      // global samples this run trained on
  double wall_s = 0;
  double started_unix = 0;  // when the training loop began (after start-up and data loading)
  double eval_s = 0;        // seconds spent evaluating (not in wall_s)
  double samples_per_s = 0;
  double test_accuracy = -1;  // -1 = not evaluated
  double final_loss = 0;
  std::vector<std::pair<int64_t, double>> loss_curve;  // (step, global mean loss)
  std::vector<std::pair<int64_t, double>> eval_curve;  // (step, test accuracy)
  double time_to_target_s = -1;  // training seconds until --target-accuracy was reached; -1 = not
  StepTimes step_time;           // totals over the run
  double bytes_fp32 = 0, bytes_wire = 0;
  int64_t direct_reductions =
      0;  // compression on, bucket sent by plain allreduce (gradient_reducer.h)
  int buckets = 0;
  size_t bucket_bytes = 0;
  std::string blas, blas_path;  // the BLAS libtorch's matrix products ran on (train/blas_library.h)
  std::string allocator;        // TrainOptions::allocator
  std::string bucket_source;    // "--bucket-mb", "topology plan" or "a quarter of the model"
  std::vector<size_t> bucket_elements;
  std::vector<bool> bucket_priority;  // which buckets ran on the priority channel
  // --balance-batches: each new split of the global batch, [(first step, per-rank batches)].
  std::vector<std::pair<int64_t, std::vector<int>>> batch_splits;
  std::vector<double> bucket_comm_s;  // per bucket: seconds on the communicator (totals)
  std::vector<double> bucket_wait_s;  // per bucket: seconds the training thread waited for it
  double overlap_ratio = 0;
  double sync_wait_fraction = 0;
  // Compression: what ran when ([step, phase, compressor of the first bucket, its parameter]),
  // and the run's error-feedback residual as a share of what was compressed (root of sums of
  // squares over buckets and steps).
  std::string compress = "none";
  std::string compress_values = "fp32";  // the type top-k's and random-k's values travel in
  struct CompressionPhase {
    int64_t step;
    std::string phase, compressor;
    double parameter;  // powersgd rank, top-k/random-k ratio, 0 otherwise
  };
  std::vector<CompressionPhase> compression_phases;
  double residual_pct = 0;
  bool params_consistent = false;
  std::string resumed_from;  // checkpoint file, if any
  std::string checkpoint;    // last checkpoint written, if any
  struct CheckpointStats {
    int written = 0, full = 0;
    double file_bytes = 0;   // all files written
    size_t state_bytes = 0;  // of the last checkpoint
    size_t last_full_bytes = 0, last_incremental_bytes = 0;
    double capture_s = 0;              // training thread: snapshot to memory (the blocking part)
    double blocked_s = 0;              // training thread: waiting for the previous write
    double encode_s = 0, write_s = 0;  // background thread
    size_t floats_quantised = 0;       // --checkpoint-quantize: values stored as int8 differences
    double max_abs_error = 0;          // the largest |restored - saved| among them
    int health = 0;                    // taken at once because a rank's health monitor warned
  } checkpoints;
  // Elastic runs (docs/elastic.md): one entry per failure the group recovered from in process.
  struct Recovery {
    std::string cause;      // what the survivors saw (the first error), and the injected fault
    std::vector<int> lost;  // worker ids that left the group
    double detected_after_s = 0;  // failure -> first survivor's collective failed
    double rto_s = 0;             // failure -> first step completed by the new group
    int64_t failed_step = 0;      // the step a survivor was running when it detected the failure
    int64_t resumed_step = 0;     // the first step the new group ran (its committed state)
    int64_t lost_steps = 0;       // failed_step - resumed_step: uncommitted work done again
    int world_before = 0, world_after = 0;
    int64_t generation = 0;  // the new group's
  };
  std::vector<Recovery> recoveries;
  int64_t generation = 0;  // of the group that finished
  // With TrainOptions::energy_profiles: what metered, every rank's joules summed, and rank 0's
  // per-step windows (joules of each step, IT energy before any PUE).
  struct Energy {
    std::string meter;
    bool modelled = false;
    double joules = 0;
    std::vector<double> step_j;
  } energy;
};

// What an elastic worker keeps across generations of its group (docs/elastic.md). The trainer
// fills and reads it; the caller (the elastic loop in src/cli/) owns it, sets the membership
// fields before each RunTraining and `pending` after a failure.
struct ElasticSession {
  int64_t generation = 0;
  int worker_id = 0;
  // Called at the start of every step with the step number: fault injection, and on rank 0
  // (`is_rank0`) a look at the store for workers waiting to join (`regroup_requested`: the group
  // then ends this generation after the step and re-forms with them; the trainer throws
  // cdt::Error(kAborted, "regroup ...") from a step boundary, its state snapshotted).
  std::function<void(int64_t step)> before_step;
  bool is_rank0 = false;
  bool regroup_requested = false;
  // Kept by the trainer: data loaded once, the last two committed states (the state after step
  // `step - 1`, copied in memory; ranks' steps differ by at most one when a group breaks, so the
  // older one is what every survivor holds), the running result.
  struct Snapshot {
    int64_t step = -1;
    std::shared_ptr<void> memory;  // the trainer's copy (train/elastic_state.h)
    int world = 0;                 // the size of the group that wrote it
  };
  Snapshot snapshots[2];       // [0] newest
  std::shared_ptr<void> data;  // the datasets (trainer-private type)
  int64_t current_step = 0;    // the step being run (for failed_step)
  TrainResult result;          // carried across generations
  double loop_start_unix = 0;  // first generation's training start (system clock)
  double eval_seconds = 0;
  // Set by the caller after a failure, consumed by the next generation's first completed step.
  struct Pending {
    bool active = false;
    std::string cause;
    std::vector<int> lost;
    double failure_unix = 0, detected_unix = 0;
    int64_t failed_step = 0;
    int world_before = 0;
  } pending;
};

// Trains on every rank of `comm` (all ranks call it with the same options). `priority`, when
// given, is a second communicator over the same ranks that carries the gradients the next
// forward needs first (train/gradient_reducer.h). Throws cdt::Error with the rank and the cause
// on bad options, missing data or communication failures.
// With `session` (elastic runs), the run starts from the newest state every rank holds (broadcast
// from rank 0, so new members receive it), snapshots its state at every step, and carries its
// result across generations; a communication failure propagates to the caller, which re-forms the
// group and calls again.
TrainResult RunTraining(Communicator& comm, const TrainOptions& options,
                        Communicator* priority = nullptr, ElasticSession* session = nullptr);

// Writes the session's newest committed state to options.checkpoint_dir (a group paused below
// --min-workers keeps it on disk too); the file written, or "" without a state or a directory.
std::string CheckpointSession(const TrainOptions& options, ElasticSession* session);

// Loads the datasets into `session` ahead of training (hot spares wait loaded).
void LoadSessionData(const TrainOptions& options, ElasticSession* session);

// The JSON document `train --json` writes (docs/training.md).
std::string TrainResultJson(const TrainResult& r);

}  // namespace cdt::train
