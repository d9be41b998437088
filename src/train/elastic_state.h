// The trainer's side of elastic training (docs/elastic.md): the committed state a new group
// starts from, the step count after a change of world size, the recovery record. libtorch;
// include only from src/train .cc files.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "cdt/communicator.h"
#include "train/checkpoint.h"
#include "train/elastic_session.h"

namespace cdt::train {

// The training state copied in memory: parameters and buffers, the optimizer's state (SGD's
// momentum buffers, AdamW's moments and step counts), the CPU generator, the position. Taking
// one copies into the previous one's tensors (no allocation once shapes are known): about a
// millisecond for the cnn, where serialising it (CaptureState) cost 12% of the step time.
struct MemorySnapshot {
  Position at;
  std::vector<torch::Tensor> model;  // parameters, then buffers
  std::vector<torch::Tensor>
      optimizer;               // per parameter, a fixed number of slots (undefined = none)
  std::vector<int64_t> steps;  // AdamW: per parameter; -1 = no state
  torch::Tensor rng;
};
// `buffers_before`: the buffers to keep instead of the model's (as they were before the step's
// forward, which moved batch norm's statistics); empty = the model's own.
void TakeMemorySnapshot(torch::nn::Module& model, torch::optim::Optimizer& opt, const Position& at,
                        MemorySnapshot* into,
                        const std::vector<torch::Tensor>& buffers_before = {});
// Throws cdt::Error(kInvalidArgument) for an optimizer other than SGD and AdamW.
void ApplyMemorySnapshot(const MemorySnapshot& s, torch::nn::Module& model,
                         torch::optim::Optimizer& opt);

// Steps left in an --epochs run from `at` with a global batch of `global_batch` (a changed world
// size changes it; each epoch ends with a short step, as the sampler cuts it).
int64_t StepsToFinish(int64_t n, double epochs, Position at, int64_t global_batch);

// The group starts from the newest step every member has committed (the minimum of the members'
// newest snapshots; the older snapshot covers a member one step behind), sent by rank 0 so that
// members without one (spares) receive it too. False when no member has one. Drops what the
// broken group recorded past that step from the session's curves.
bool RestoreCommittedState(Communicator& comm, ElasticSession& s, torch::nn::Module& model,
                           torch::optim::Optimizer& opt, uint64_t seed, Position* at);

// The new group's first step (`step`) completed: records what the recovery cost in
// s.result.recoveries and clears s.pending; rank 0 (`log`) prints it.
void RecordRecovery(ElasticSession& s, int64_t step, int world, const Log* log);

}  // namespace cdt::train
