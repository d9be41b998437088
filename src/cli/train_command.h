// `cann-dist-train train`: options, and the worker side (join the group, train, report).
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cdt/communicator.h"
#include "cli/environment.h"
#include "train/trainer.h"

namespace cdt::cli {

struct TrainCommandOptions {
  train::TrainOptions train;
  std::string json;
  bool energy_windows = false;  // --energy-windows: per-step energy (TrainOptions::energy_profiles)
  bool use_default_allocator = false;  // --use-default-allocator: see ConfigureAllocator
  bool fault_predict = false;  // --fault-predict: the health monitor on, a warning checkpoints
};

// The seed's journey commands give few options: fill what they leave out with the embedded
// defaults (a checkpoint directory for --checkpoint-incremental / --fault-predict) and return
// what was filled, in words, for the line that says so ("" = nothing). Throws
// cdt::Error(kInvalidArgument) for --fault-predict with --health-interval 0.
std::string ApplyJourneyDefaults(const CLI::App& cmd, TrainCommandOptions* o);

void AddTrainOptions(CLI::App* cmd, TrainCommandOptions* o);

// Rank 0 prints the summary and writes the JSON. Returns the exit code. `priority` may be null.
int RunTrainCommand(Communicator& comm, Communicator* priority, TrainCommandOptions o,
                    int local_world_size);

// Keeps freed heap memory in this worker process (common/heap_retention.h) unless
// --use-default-allocator or the environment already governs malloc (Environment::
// allocator_set_by). Call at the worker's start, before the dataset loads. Returns what governs
// malloc now, in words, for the result (JSON `allocator`).
std::string ConfigureAllocator(const Environment& env, bool use_default_allocator);

// The summary and the JSON of a finished run (rank 0); the exit code for this rank.
int ReportTrainResult(const train::TrainResult& r, const TrainCommandOptions& o, int rank);

}  // namespace cdt::cli
