#include "train/update_scheduler.h"

#include <chrono>

namespace cdt::train {

namespace {
double Since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

UpdateScheduler::UpdateScheduler(GradientReducer& reducer, torch::optim::Optimizer& optimizer,
                                 std::vector<torch::Tensor> params)
    : reducer_(reducer), optimizer_(optimizer), params_(std::move(params)) {
  for (size_t k = 0; k < params_.size(); ++k) index_of_[params_[k].unsafeGetTensorImpl()] = k;
  applied_.assign(reducer_.num_buckets(), true);
  was_announced_.assign(reducer_.num_buckets(), false);
}

void UpdateScheduler::BeginForward() {
  announced_.clear();
  was_announced_.assign(was_announced_.size(), false);
}

std::vector<size_t> UpdateScheduler::LaunchOrder() const {
  std::vector<size_t> order;
  for (size_t b = 0; b < was_announced_.size(); ++b)
    if (!was_announced_[b]) order.push_back(b);
  order.insert(order.end(), announced_.rbegin(), announced_.rend());
  return order;
}

void UpdateScheduler::BackwardDone(double lr) {
  reducer_.LaunchRemaining();
  // The local gradients are in the buckets now; from here on a defined .grad means "update me".
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();
  lr_ = lr;
  pending_ = true;
  applied_.assign(reducer_.num_buckets(), false);
}

void UpdateScheduler::BeforeUse(const std::vector<torch::Tensor>& params) {
  std::vector<size_t> buckets;
  for (const auto& p : params) {
    auto it = index_of_.find(p.unsafeGetTensorImpl());
    if (it == index_of_.end()) continue;  // not trained (a buffer, a frozen tensor)
    const size_t b = reducer_.bucket_of(it->second);
    if (!was_announced_[b]) {
      was_announced_[b] = true;
      announced_.push_back(b);
    }
    if (pending_ && !applied_[b]) {
      applied_[b] = true;
      buckets.push_back(b);
    }
  }
  if (!buckets.empty()) Apply(buckets);
}

void UpdateScheduler::ApplyAll() {
  if (!pending_) return;
  std::vector<size_t> buckets;
  for (size_t b = 0; b < applied_.size(); ++b)
    if (!applied_[b]) {
      applied_[b] = true;
      buckets.push_back(b);
    }
  if (!buckets.empty()) Apply(buckets);
  pending_ = false;
}

void UpdateScheduler::Apply(const std::vector<size_t>& buckets) {
  for (size_t b : buckets) wait_s_ += reducer_.Collect(b);  // writes .grad of b's parameters
  const auto start = std::chrono::steady_clock::now();
  for (auto& group : optimizer_.param_groups()) group.options().set_lr(lr_);
  optimizer_.step();  // touches exactly the parameters with a defined .grad
  for (size_t b : buckets)
    for (size_t k : reducer_.bucket_params(b)) params_[k].mutable_grad() = torch::Tensor();
  optimizer_s_ += Since(start);
  bool all = true;
  for (bool a : applied_) all = all && a;
  if (all) pending_ = false;
}

}  // namespace cdt::train
