// UpdateScheduler: applies each gradient bucket's optimizer update as late as it may — just
// before the next forward uses the bucket's parameters — so that communication overlaps not only
// the rest of backward but also the next forward (cross-iteration scheduling as in ByteScheduler,
// SOSP'19, and BytePS). The big gradients of the last layers arrive first in backward and are used
// last in forward: they get almost a whole step to cross the network.
//
//   scheduler.BackwardDone(lr)      after a syncing backward: launch what is left, remember lr
//   model forward ->  BeforeUse(p)  (ClassifierModel's use hook) collects and applies the buckets
//                                   holding p, each once
//   scheduler.ApplyAll()            before anything reads all parameters (eval, checkpoint,
//                                   the end), or at once when deferral is off
//   scheduler.LearnLaunchOrders(m)  once: the buckets in the reverse of the order a forward of
//                                   an even and of an odd step uses them — the order its
//                                   backward fills them in — for GradientReducer::SetLaunchOrder
//                                   (LaunchOrderFor(step))
//
// The arithmetic is unchanged: every parameter is updated with its own step's summed gradient and
// learning rate before it is used again, so the loss curve is the same as with one optimizer step
// after backward (tested). A bucket is applied by handing the optimizer gradients for its
// parameters only: torch's SGD and AdamW skip parameters whose .grad is undefined.
#pragma once

#include <torch/torch.h>

#include <unordered_map>
#include <vector>

#include "train/gradient_reducer.h"
#include "train/models.h"

namespace cdt::train {

class UpdateScheduler {
 public:
  // `params` are the reducer's parameters, in the same order; the optimizer owns them too.
  UpdateScheduler(GradientReducer& reducer, torch::optim::Optimizer& optimizer,
                  std::vector<torch::Tensor> params);

  // After the syncing backward of a step whose learning rate is `lr`.
  void BackwardDone(double lr);
  // The next forward is about to use `params`: apply the pending updates that touch them.
  void BeforeUse(const std::vector<torch::Tensor>& params);
  // Applies every pending update.
  void ApplyAll();
  // LARC clip mode before each update (train/larc.h); 0 = off.
  void set_larc_trust(double trust) { larc_trust_ = trust; }
  bool pending() const { return pending_; }
  // Runs one forward of `sample` (no gradient) at an even and at an odd step with a use hook that
  // records the buckets announced; restores no hook (the caller sets its own after). The launch
  // order of a parity: buckets never announced first, in index order, then the others in the
  // reverse of their first announcement. Announcements follow a model's code, not its data, so
  // every rank learns the same orders — and a rank that has no sample in a step (a short last
  // step) launches in the same order as the others without running a forward.
  void LearnLaunchOrders(ClassifierModel& model, const torch::Tensor& sample);
  // Whether the model announced a parameter of every bucket in both forwards of
  // LearnLaunchOrders. A model that does not (a user's model without BeforeUse calls) must have
  // every update applied before its forward: the trainer then calls ApplyAll first.
  bool every_bucket_announced() const { return every_bucket_announced_; }
  const std::vector<size_t>& LaunchOrderFor(int64_t step) const {
    return launch_order_[step % 2 != 0];
  }

  // Seconds blocked on communication and spent in the optimizer (totals).
  double wait_seconds() const { return wait_s_; }
  double optimizer_seconds() const { return optimizer_s_; }

 private:
  void Apply(const std::vector<size_t>& buckets);

  GradientReducer& reducer_;
  torch::optim::Optimizer& optimizer_;
  std::vector<torch::Tensor> params_;
  std::unordered_map<const void*, size_t> index_of_;  // TensorImpl -> index in params_
  std::vector<bool> applied_;                         // per bucket, for the pending step
  std::vector<size_t> launch_order_[2];               // for even and odd steps
  bool pending_ = false;
  bool every_bucket_announced_ = true;
  double lr_ = 0;
  double larc_trust_ = 0;
  double wait_s_ = 0, optimizer_s_ = 0;
};

}  // namespace cdt::train
