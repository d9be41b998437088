// The models `train --model` builds (libtorch; include only from src/train .cc files).
//
//   mlp              784-512-256-10 with ReLU
//   cnn              conv(1->32, 3x3, pad 1)-ReLU-maxpool 2, conv(32->64, 3x3, pad 1)-ReLU-maxpool
//   2,
//                    linear(3136->128)-ReLU, linear(128->10): 421,642 parameters (the DDP
//                    baseline's network, bench/peers/ddp_baseline.py)
//   moe-transformer  ViT-style encoder over 7x7 patches (16 tokens) whose feed-forward layers are a
//                    mixture of experts with top-2 gating and the Switch Transformer load-balancing
//                    loss (Fedus et al. 2021: E * sum_e f_e * P_e), mean-pooled into a linear head
//   resnet18/50      ResNet for small images, batch normalisation throughout (MakeResNet below)
//
// Row blocks (`linear_blocks` > 1, mlp and cnn; off by default): the big first linear layer (fc1)
// keeps its function, parameter count and initial values but stores its weight as that many row
// blocks, each its own parameter, so that each block's gradient can cross the network — and its
// update be applied — on its own. Forward computes the blocks in ascending order on even steps and
// descending on odd ones (set_step): backward produces them in the reverse of forward's order, so
// the block whose gradient arrived first is the first the next forward uses (docs/training.md).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "train/train_options.h"

namespace cdt::train {

// Every model maps [B, 1, 28, 28] images to [B, 10] logits; MoE models also report an auxiliary
// (load-balancing) loss, others return an undefined tensor for it.
//
// Forward announces each group of parameters just before it first uses them (UseHook), in the order
// it uses them; the trainer defers optimizer updates until then (train/update_scheduler.h). Every
// parameter is announced in every forward (tested), so none is ever used before its update.
class ClassifierModel : public torch::nn::Module {
 public:
  using UseHook = std::function<void(const std::vector<torch::Tensor>&)>;
  virtual std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& images) = 0;
  void set_use_hook(UseHook hook) { use_hook_ = std::move(hook); }
  // The training step the next forward belongs to (the same on every rank): it sets the order of
  // row blocks. Evaluation forwards may run at any parity.
  void set_step(int64_t step) { odd_step_ = step % 2 != 0; }

 protected:
  void BeforeUse(torch::nn::Module& m) {
    if (use_hook_) use_hook_(m.parameters());
  }
  void BeforeUse(const torch::Tensor& parameter) {
    if (use_hook_) use_hook_({parameter});
  }
  void BeforeUse(const std::vector<torch::Tensor>& parameters) {
    if (use_hook_) use_hook_(parameters);
  }
  bool odd_step() const { return odd_step_; }
  UseHook announce() {
    return [this](const std::vector<torch::Tensor>& p) { BeforeUse(p); };
  }

 private:
  UseHook use_hook_;
  bool odd_step_ = false;
};

// Evaluation mode for a scope (batch norm on its running statistics, without updating them),
// training mode again after it: scoring, and forwards that only look (the update scheduler's).
class EvalModeScope {
 public:
  explicit EvalModeScope(torch::nn::Module& m) : m_(m) { m_.eval(); }
  ~EvalModeScope() { m_.train(); }
  EvalModeScope(const EvalModeScope&) = delete;
  EvalModeScope& operator=(const EvalModeScope&) = delete;

 private:
  torch::nn::Module& m_;
};

// Throws cdt::Error(kInvalidArgument) for an unknown name or bad sizes.
std::shared_ptr<ClassifierModel> MakeModel(const ModelOptions& options);

// ResNet-18 and ResNet-50 for `train --model resnet18|resnet50` (He et al. 2016), in the form used
// for 32x32 images (a 3x3 stem, no max-pool) on the trainer's [B, 1, 28, 28] input: stages of 64,
// 128, 256 and 512 channels at 28, 14, 7 and 4 pixels, global average pooling, a linear head to
// 10 classes. ResNet-18: basic blocks [2, 2, 2, 2], 11,172,810 parameters; ResNet-50: bottleneck
// blocks [3, 4, 6, 3] (x4 expansion), 23,519,690 parameters (the CIFAR forms' 11,173,962 and
// 23,520,842 less the stem's two missing input channels). Batch normalisation throughout: its
// running statistics are buffers, which the trainer broadcasts from rank 0 before each evaluation
// and the end-of-run check (train/replica.h, docs/training.md). `depth` 18 or 50 (resnet.cc);
// throws cdt::Error(kInvalidArgument) for another.
std::shared_ptr<ClassifierModel> MakeResNet(int depth);

}  // namespace cdt::train
