#include "train/training_data.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "cdt/error.h"

namespace cdt::train {

namespace {

// Fashion-MNIST's mean and standard deviation of pixel values in [0, 1].
constexpr float kMean = 0.2860f, kStd = 0.3530f;

std::pair<ImageDataset, ImageDataset> SplitDataset(ImageDataset all, int64_t first_count) {
  const size_t px = static_cast<size_t>(all.rows * all.cols);
  ImageDataset a = all, b = all;
  a.count = first_count;
  b.count = all.count - first_count;
  a.pixels.assign(all.pixels.begin(), all.pixels.begin() + static_cast<long>(first_count * px));
  b.pixels.assign(all.pixels.begin() + static_cast<long>(first_count * px), all.pixels.end());
  a.labels.assign(all.labels.begin(), all.labels.begin() + first_count);
  b.labels.assign(all.labels.begin() + first_count, all.labels.end());
  return {std::move(a), std::move(b)};
}

// Splits `n` samples into `parts` contiguous micro-batches differing by at most one.
std::vector<size_t> MicroOffsets(size_t n, int parts) {
  std::vector<size_t> off(static_cast<size_t>(parts) + 1, 0);
  for (int i = 0; i < parts; ++i)
    off[static_cast<size_t>(i) + 1] =
        off[static_cast<size_t>(i)] + n / static_cast<size_t>(parts) +
        (static_cast<size_t>(i) < n % static_cast<size_t>(parts) ? 1 : 0);
  return off;
}

}  // namespace

std::shared_ptr<const Datasets> LoadDatasets(const DataOptions& o, uint64_t seed,
                                             const std::string& who) {
  auto data = std::make_shared<Datasets>();
  if (o.dataset == "synthetic") {
    // One draw split in two, so that the test images share the training images' class patterns.
    const int64_t test_count = std::max<int64_t>(1000, o.synthetic_samples / 6);
    ImageDataset all = SyntheticImages(o.synthetic_samples + test_count, seed);
    std::tie(data->train, data->test) = SplitDataset(std::move(all), o.synthetic_samples);
  } else {
    const std::string dir = o.dir.empty() ? kFashionMnistDir : o.dir;
    try {
      data->train = LoadFashionMnist(dir, true);
      data->test = LoadFashionMnist(dir, false);
    } catch (const Error& e) {
      throw Error(e.code(), who + ": " + e.what());
    }
  }
  return data;
}

torch::Tensor Images(const ImageDataset& d, const std::vector<int64_t>& idx) {
  const int64_t px = d.rows * d.cols;
  auto out = torch::empty({static_cast<int64_t>(idx.size()), 1, d.rows, d.cols}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  for (size_t i = 0; i < idx.size(); ++i) {
    const uint8_t* src = d.pixels.data() + idx[i] * px;
    for (int64_t j = 0; j < px; ++j)
      o[static_cast<int64_t>(i) * px + j] = (src[j] / 255.0f - kMean) / kStd;
  }
  return out;
}

torch::Tensor Labels(const ImageDataset& d, const std::vector<int64_t>& idx) {
  auto out = torch::empty({static_cast<int64_t>(idx.size())}, torch::kInt64);
  int64_t* o = out.data_ptr<int64_t>();
  for (size_t i = 0; i < idx.size(); ++i) o[i] = d.labels[static_cast<size_t>(idx[i])];
  return out;
}

TrainingData::TrainingData(const DataOptions& o, uint64_t seed,
                           std::shared_ptr<const Datasets> data, int world, int rank)
    : o_(o),
      data_(std::move(data)),
      world_(world),
      rank_(rank),
      global_batch_(static_cast<int64_t>(o.batch_size) * world),
      sampler_(static_cast<size_t>(data_->train.count), seed),
      balancer_(world, rank, o.batch_size, o.balance_batches) {}

void TrainingData::CheckBatchFits(int most, const std::string& who) const {
  // A step cannot take more samples than there are; the LR would be scaled for the batch asked.
  const int64_t count = data_->train.count;
  const int64_t largest_batch = static_cast<int64_t>(o_.batch_size) * most;
  if (largest_batch <= count) return;
  throw Error(
      ErrorCode::kInvalidArgument,
      who + ": --batch-size " + std::to_string(o_.batch_size) + " x " +
          (most > world_ ? "up to " : "") + std::to_string(most) +
          " worker(s) = " + std::to_string(largest_batch) + " samples a step, more than the " +
          std::to_string(count) + " training samples of " + o_.dataset +
          (count >= most ? "; use --batch-size " + std::to_string(count / most) + " or less"
                         : "; use fewer workers than samples") +
          (most > world_
               ? " (the group may grow to " + std::to_string(most) + " workers: --nnodes MIN:MAX)"
               : ""));
}

int64_t TrainingData::steps_per_epoch() const {
  return (data_->train.count + global_batch_ - 1) / global_batch_;
}

StepBatch TrainingData::Next(Position* at) const {
  if (at->pos >= sampler_.dataset_size()) {
    ++at->epoch;
    at->pos = 0;
  }
  StepBatch b;
  b.global_samples = sampler_.StepSamples(at->pos, balancer_.batches());
  b.indices = sampler_.Indices(at->epoch, at->pos, balancer_.batches(), rank_);
  const int parts = std::max(1, std::min<int>(o_.accumulate, static_cast<int>(b.indices.size())));
  const std::vector<size_t> off = MicroOffsets(b.indices.size(), parts);
  for (int m = 0; m < parts; ++m)
    b.micro.emplace_back(b.indices.begin() + static_cast<long>(off[static_cast<size_t>(m)]),
                         b.indices.begin() + static_cast<long>(off[static_cast<size_t>(m) + 1]));
  return b;
}

}  // namespace cdt::train
