// What a training run reports (docs/training.md, the JSON of `train --json`). Free of libtorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cdt::train {

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
  std::string allreduce_selection;  // TrainOptions::allreduce_selection
  bool elastic = false;             // run by the elastic driver (recovers in process)
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

// The JSON document `train --json` writes (docs/training.md; result_json.cc).
std::string TrainResultJson(const TrainResult& r);

}  // namespace cdt::train
