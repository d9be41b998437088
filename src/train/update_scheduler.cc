#include "train/update_scheduler.h"

#include <chrono>

#include "train/larc.h"

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
  for (auto& order : launch_order_)
    for (size_t b = 0; b < reducer_.num_buckets(); ++b) order.push_back(b);
}

void UpdateScheduler::LearnLaunchOrders(ClassifierModel& model, const torch::Tensor& sample) {
  torch::NoGradGuard no_grad;
  every_bucket_announced_ = true;
  for (int parity = 0; parity < 2; ++parity) {
    std::vector<size_t> announced;
    std::vector<bool> seen(reducer_.num_buckets(), false);
    model.set_use_hook([&](const std::vector<torch::Tensor>& params) {
      for (const auto& p : params) {
        auto it = index_of_.find(p.unsafeGetTensorImpl());
        if (it == index_of_.end()) continue;
        const size_t b = reducer_.bucket_of(it->second);
        if (!seen[b]) {
          seen[b] = true;
          announced.push_back(b);
        }
      }
    });
    model.set_step(parity);
    const EvalModeScope looking(model);  // batch norm's statistics untouched by this forward
    model.Forward(sample);
    std::vector<size_t>& order = launch_order_[parity];
    order.clear();
    for (size_t b = 0; b < seen.size(); ++b)
      if (!seen[b]) order.push_back(b), every_bucket_announced_ = false;
    order.insert(order.end(), announced.rbegin(), announced.rend());
  }
  model.set_use_hook(nullptr);
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
  if (!pending_) return;
  std::vector<size_t> buckets;
  for (const auto& p : params) {
    auto it = index_of_.find(p.unsafeGetTensorImpl());
    if (it == index_of_.end()) continue;  // not trained (a buffer, a frozen tensor)
    const size_t b = reducer_.bucket_of(it->second);
    if (!applied_[b]) {
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
  if (larc_trust_ > 0 && lr_ > 0) {
    std::vector<torch::Tensor> touched;
    for (size_t b : buckets)
      for (size_t k : reducer_.bucket_params(b)) touched.push_back(params_[k]);
    ClipByTrustRatio(touched, larc_trust_, lr_);
  }
  optimizer_.step();  // touches exactly the parameters with a defined .grad
  for (size_t b : buckets)
    for (size_t k : reducer_.bucket_params(b)) params_[k].mutable_grad() = torch::Tensor();
  optimizer_s_ += Since(start);
  if (Timeline* t = reducer_.timeline(); t && t->Recording()) {
    std::string name = buckets.size() == 1 ? "update bucket" : "update buckets";
    for (size_t i = 0; i < buckets.size(); ++i)
      name += (i ? "," : " ") + std::to_string(buckets[i]);
    t->Span(Timeline::kTraining, name, start, std::chrono::steady_clock::now());
  }
  bool all = true;
  for (bool a : applied_) all = all && a;
  if (all) pending_ = false;
}

}  // namespace cdt::train
