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
//   scheduler.BeginForward()        before a training forward: forget earlier announcements
//   scheduler.LaunchOrder()         after it: the buckets in the reverse of the order it used
//                                   them — the order its backward fills them in — for
//                                   GradientReducer::SetLaunchOrder
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
  bool pending() const { return pending_; }
  void BeginForward();
  // The reducer's launch order for the backward of the forward since BeginForward: buckets never
  // announced first, in index order, then the others in the reverse of their first announcement.
  // A model's announcements follow its code, not its data, so every rank gets the same order.
  std::vector<size_t> LaunchOrder() const;

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
  std::vector<size_t> announced_;                     // buckets in first-announcement order
  std::vector<bool> was_announced_;                   // per bucket
  bool pending_ = false;
  double lr_ = 0;
  double wait_s_ = 0, optimizer_s_ = 0;
};

}  // namespace cdt::train
