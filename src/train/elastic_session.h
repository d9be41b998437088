// What an elastic worker keeps across generations of its group (docs/elastic.md). Free of
// libtorch: the snapshot and the datasets are the trainer's types, declared here only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/train_result.h"

namespace cdt::train {

struct MemorySnapshot;  // train/elastic_state.h (libtorch)
struct Datasets;        // train/training_data.h (libtorch)

// What an elastic worker keeps across generations of its group (docs/elastic.md). The trainer
// fills and reads it; ElasticTraining (train/elastic_training.h) owns it for the elastic driver,
// sets the membership fields before each RunTraining and `pending` after a failure.
struct ElasticSession {
  int64_t generation = 0;
  int worker_id = 0;
  // Called at the start of every step with the step number (the driver's fault injection and
  // store polling); true while workers wait to join: the group then ends this generation after
  // the step and re-forms with them (the trainer throws cdt::Error(kAborted, "regroup ...") from
  // a step boundary, its state snapshotted).
  std::function<bool(int64_t step)> before_step;
  bool regroup_requested = false;  // the last answer of before_step
  // Kept by the trainer: data loaded once, the last two committed states (the state after step
  // `step - 1`, copied in memory; ranks' steps differ by at most one when a group breaks, so the
  // older one is what every survivor holds), the running result.
  struct Snapshot {
    int64_t step = -1;
    std::shared_ptr<MemorySnapshot> memory;  // the trainer's copy (train/elastic_state.h)
    int world = 0;                           // the size of the group that wrote it
  };
  Snapshot snapshots[2];                 // [0] newest
  std::shared_ptr<const Datasets> data;  // loaded once
  int64_t current_step = 0;              // the step being run (for failed_step)
  TrainResult result;                    // carried across generations
  double loop_start_unix = 0;            // first generation's training start (system clock)
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

}  // namespace cdt::train
