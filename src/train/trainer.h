// The data-parallel trainer behind `cann-dist-train train` (docs/training.md). This header is
// free of libtorch so that the CLI and tests include it cheaply; the implementation is in
// src/train/*.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::train {

struct TrainOptions {
  std::string model = "cnn";          // mlp | cnn | moe-transformer
  int layers = 2, width = 64, heads = 4, experts = 8, top_k = 2;  // moe-transformer
  double aux_loss_weight = 0.01;      // moe load-balancing loss coefficient
  std::string dataset = "fashion-mnist";  // fashion-mnist | synthetic
  std::string data_dir;               // "" = /usr/share/datasets/fashion-mnist
  int64_t synthetic_samples = 60000;
  int64_t steps = 0;                  // 0 = from epochs
  double epochs = 1;
  int batch_size = 64;                // per rank
  int accumulate = 1;                 // micro-batches per step (local batch split)
  std::string optimizer = "sgd";      // sgd | adamw
  double lr = 0.05;                   // at reference_batch
  int64_t lr_reference_batch = 256;   // linear scaling; 0 = off
  double momentum = 0.9;
  double weight_decay = 0.0;
  int64_t warmup_steps = 0;
  bool cosine = true;
  uint64_t seed = 1;
  double bucket_mb = 0;               // 0 = planned_bucket_bytes, else a quarter of the model
  size_t planned_bucket_bytes = 0;    // from the topology plan (`--adaptive-comm`); 0 = none
  // Apply each bucket's update just before the next forward uses it, so that communication also
  // overlaps the next forward (train/update_scheduler.h). Same arithmetic either way.
  bool overlap_next_forward = true;
  // Gradient compression (docs/compression.md): none | fp16 | bf16 | int8 | topk | randomk |
  // powersgd | signsgd | adaptive; error feedback wraps every lossy compressor unless turned off.
  std::string compress = "none";
  double compress_ratio = 0.01;       // topk / randomk
  int powersgd_rank = 2;
  bool error_feedback = true;
  int64_t compress_interval = 50;     // adaptive: steps between decisions
  double compress_min_exposed = 0.05; // adaptive: compress only above this exposed share
  int64_t eval_every = 0;             // steps; 0 = at the end only
  double target_accuracy = 0;         // stop at the first evaluation reaching it (0 = never)
  std::string checkpoint_dir;         // "" = no checkpoints
  int64_t checkpoint_every = 0;       // steps; 0 = at the end only (when a dir is given)
  bool resume = false;
  int64_t stop_after = 0;             // stop (and checkpoint) after this step; 0 = run to the end
  bool progress = true;               // live progress line on rank 0 (stderr)
  int threads = 0;                    // torch intra-op threads per rank; 0 = cores / local ranks
  int local_world_size = 1;           // ranks sharing this host (for the thread default)
};

struct StepTimes {
  double forward_s = 0, backward_s = 0, comm_wait_s = 0, optimizer_s = 0;
};

struct TrainResult {
  int world_size = 1;
  std::string model;
  int64_t params = 0;
  int64_t steps = 0;           // steps this run executed
  int64_t first_step = 0;      // 0, or the step resumed from
  int64_t samples = 0;         // global samples this run trained on
  double wall_s = 0;
  double samples_per_s = 0;
  double test_accuracy = -1;   // -1 = not evaluated
  double final_loss = 0;
  std::vector<std::pair<int64_t, double>> loss_curve;   // (step, global mean loss)
  std::vector<std::pair<int64_t, double>> eval_curve;   // (step, test accuracy)
  double time_to_target_s = -1;  // training seconds until --target-accuracy was reached; -1 = not
  StepTimes step_time;          // totals over the run
  double bytes_fp32 = 0, bytes_wire = 0;
  int buckets = 0;
  size_t bucket_bytes = 0;
  std::string bucket_source;   // "--bucket-mb", "topology plan" or "a quarter of the model"
  std::vector<size_t> bucket_elements;
  std::vector<bool> bucket_priority;  // which buckets ran on the priority channel
  std::vector<double> bucket_comm_s;  // per bucket: seconds on the communicator (totals)
  std::vector<double> bucket_wait_s;  // per bucket: seconds the training thread waited for it
  double overlap_ratio = 0;
  double sync_wait_fraction = 0;
  // Compression: what ran when ([step, phase, compressor of the first bucket, its parameter]),
  // and the run's error-feedback residual as a share of what was compressed (root of sums of
  // squares over buckets and steps).
  std::string compress = "none";
  struct CompressionPhase {
    int64_t step;
    std::string phase, compressor;
    double parameter;   // powersgd rank, top-k/random-k ratio, 0 otherwise
  };
  std::vector<CompressionPhase> compression_phases;
  double residual_pct = 0;
  bool params_consistent = false;
  std::string resumed_from;     // checkpoint file, if any
  std::string checkpoint;       // last checkpoint written, if any
};

// Trains on every rank of `comm` (all ranks call it with the same options). `priority`, when
// given, is a second communicator over the same ranks that carries the gradients the next
// forward needs first (train/gradient_reducer.h). Throws cdt::Error with the rank and the cause
// on bad options, missing data or communication failures.
TrainResult RunTraining(Communicator& comm, const TrainOptions& options,
                        Communicator* priority = nullptr);

// The JSON document `train --json` writes (docs/training.md).
std::string TrainResultJson(const TrainResult& r);

}  // namespace cdt::train
