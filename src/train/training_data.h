// The trainer's data component (libtorch; include only from src/train .cc files): the datasets,
// the global sampler that gives every rank its share of each step, the batch balancer that may
// change those shares, and the micro-batches of gradient accumulation. Built from DataOptions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "train/batch_balancer.h"
#include "train/global_sampler.h"
#include "train/image_dataset.h"
#include "train/position.h"
#include "train/train_options.h"

namespace cdt::train {

struct Datasets {
  ImageDataset train, test;
};

// Fashion-MNIST from `o.dir` (default kFashionMnistDir), or a synthetic draw from `seed`; errors
// name `who` (the rank or worker).
std::shared_ptr<const Datasets> LoadDatasets(const DataOptions& o, uint64_t seed,
                                             const std::string& who);

// Images normalised with Fashion-MNIST's mean and deviation, [n, 1, rows, cols]; their labels.
torch::Tensor Images(const ImageDataset& d, const std::vector<int64_t>& idx);
torch::Tensor Labels(const ImageDataset& d, const std::vector<int64_t>& idx);

// One step on this rank.
struct StepBatch {
  size_t global_samples = 0;     // the step's samples over every rank: the loss is divided by it
  std::vector<int64_t> indices;  // this rank's samples
  std::vector<std::vector<int64_t>> micro;  // `accumulate` parts of them (some may be empty)
};

class TrainingData {
 public:
  TrainingData(const DataOptions& o, uint64_t seed, std::shared_ptr<const Datasets> data, int world,
               int rank);

  // Refuses (kInvalidArgument, naming `who` and the flags to change) a global batch larger than
  // the training set at `most_ranks` ranks (an elastic group is checked at the size it may reach).
  void CheckBatchFits(int most_ranks, const std::string& who) const;

  int64_t global_batch() const { return global_batch_; }
  int64_t steps_per_epoch() const;
  int64_t train_count() const { return data_->train.count; }
  const ImageDataset& train_set() const { return data_->train; }
  const ImageDataset& test_set() const { return data_->test; }

  // The step at `*at`; starts the next epoch first when the last one is used up.
  StepBatch Next(Position* at) const;

  // --balance-batches: this rank's compute for the step it computed.
  BatchBalancer& balancer() { return balancer_; }

 private:
  DataOptions o_;
  std::shared_ptr<const Datasets> data_;
  int world_, rank_;
  int64_t global_batch_;
  GlobalSampler sampler_;
  BatchBalancer balancer_;
};

}  // namespace cdt::train
