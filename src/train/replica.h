// The model replica every rank holds (libtorch; include only from src/train .cc files): its
// optimizer, the broadcast that makes the replicas equal at the start, the check that they still
// are at the end, and evaluation on the test set. Built from OptimizerOptions.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "cdt/communicator.h"
#include "train/image_dataset.h"
#include "train/models.h"
#include "train/train_options.h"

namespace cdt::train {

// SGD (with `o.momentum` unless `momentum_in_compressor`: DGC's momentum correction keeps it in
// the compressor's error feedback instead) or AdamW. Throws kInvalidArgument for another name.
std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerOptions& o,
                                                       torch::nn::Module& m,
                                                       bool momentum_in_compressor = false);

// Rank 0's parameters and buffers to every rank, in one broadcast (a collective).
void BroadcastState(Communicator& comm, torch::nn::Module& m);
// Rank 0's buffers (batch norm's running statistics) to every rank (DDP's broadcast_buffers);
// nothing, and no collective, for a model without buffers (the same on every rank). A blocking
// collective on `comm`: call it only with nothing in flight there (after the trainer's Settle).
void BroadcastBuffers(Communicator& comm, torch::nn::Module& m);

// True when every rank's parameters and buffers are bit-identical (FNV-1a hashes allgathered; a
// collective).
bool ParamsConsistent(Communicator& comm, torch::nn::Module& m);

// Accuracy on the test set: each rank scores every world-size-th image, the counts are summed
// (a collective).
double Evaluate(Communicator& comm, ClassifierModel& model, const ImageDataset& test);

}  // namespace cdt::train
