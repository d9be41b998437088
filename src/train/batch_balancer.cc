#include "train/batch_balancer.h"

#include <algorithm>
#include <cmath>

#include "topology/load_balancer.h"

namespace cdt::train {

BatchBalancer::BatchBalancer(int world, int rank, int per_rank_batch, int64_t interval)
    : world_(world),
      rank_(rank),
      per_rank_(per_rank_batch),
      interval_(interval),
      batches_(static_cast<size_t>(world), per_rank_batch),
      report_(static_cast<size_t>(world), 0.0) {}

void BatchBalancer::Observe(double compute_s, size_t samples) {
  compute_s_ += compute_s;
  samples_ += samples;
}

bool BatchBalancer::IntervalEnded(int64_t step) {
  if (!on() || (step + 1) % interval_ != 0) return false;
  std::fill(report_.begin(), report_.end(), 0.0);
  // No sample this interval (a short last step): report the even share's rate of nobody — zero
  // keeps this rank's model at "free", and Apply then keeps the current split.
  report_[static_cast<size_t>(rank_)] =
      samples_ > 0 ? compute_s_ / static_cast<double>(samples_) : 0.0;
  compute_s_ = 0;
  samples_ = 0;
  return true;
}

bool BatchBalancer::Apply(int64_t from_step) {
  std::vector<topology::StepTimeModel> models(static_cast<size_t>(world_));
  for (size_t r = 0; r < models.size(); ++r) {
    if (!(report_[r] > 0) || !std::isfinite(report_[r])) return false;  // someone measured nothing
    models[r].per_sample_s = report_[r];
  }
  const int global = per_rank_ * world_;
  const int floor_share = std::max(1, per_rank_ / 4);
  std::vector<int> next = topology::ProposeMicroBatches(models, global, floor_share).batch;
  if (next == batches_) return false;
  batches_ = std::move(next);
  history_.push_back({from_step, batches_});
  return true;
}

}  // namespace cdt::train
