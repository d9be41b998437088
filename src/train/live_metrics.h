// What a running training reports about itself while it runs: each rank, about once a second and
// once more at the end (MetricsOptions::publish). The CLI's workers put it in the job's store,
// where `cann-dashboard` reads it (docs/dashboard.md, "The live document"). Free of libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cdt/communicator.h"
#include "train/train_result.h"

namespace cdt::train {

struct LiveMetrics {
  int rank = 0, world = 1, worker_id = 0;
  int64_t generation = 0;
  int64_t step = 0;      // the last step whose loss is known (global step number)
  int64_t end_step = 0;  // the run's last step + 1
  int64_t epoch = 0;
  bool finished = false;  // the run's end: the values below are the result's (TrainResultJson)
  double unix_time = 0;
  double wall_s = 0;  // training seconds so far (evaluation excluded; elastic: every generation)
  int64_t steps = 0, samples = 0;  // this rank's steps; the job's samples (all ranks)
  double samples_per_s = 0;        // the job's, over wall_s
  double loss = 0, test_accuracy = -1;
  std::vector<std::pair<int64_t, double>> loss_tail;  // the last kLossTail (step, loss)
  std::vector<std::pair<int64_t, double>> eval_curve;
  StepTimes step_time;  // totals (forward, backward, exposed communication, optimizer)
  double bytes_fp32 = 0, bytes_wire = 0, residual_pct = 0;
  double overlap_ratio = 0;  // 1 - exposed / communicator time of the gradient buckets
  std::string compress;
  std::vector<TrainResult::CompressionPhase> compression_phases;
  TrainResult::CheckpointStats checkpoints;
  std::vector<TrainResult::Recovery> recoveries;
  std::string energy_meter;
  double energy_j = 0;  // this rank's metered joules; finished: every rank's
  std::vector<double> bucket_comm_s, bucket_wait_s;
  CommStats comm;  // the bulk and priority channels together
  // Rank 0: the group as its communicator sees it.
  std::vector<int> node_of_rank;
  bool shares_memory = false;
  std::vector<std::pair<size_t, std::string>> algorithm_by_size;  // (bytes, `auto` resolves to)

  static constexpr size_t kLossTail = 240;
};

// The live document (JSON, format "cdt-live" version 1; docs/dashboard.md).
std::string LiveMetricsJson(const LiveMetrics& m);

}  // namespace cdt::train
