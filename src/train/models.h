// The models `train --model` builds (libtorch; include only from src/train .cc files).
//
//   mlp              784-512-256-10 with ReLU
//   cnn              conv(1->32, 3x3, pad 1)-ReLU-maxpool 2, conv(32->64, 3x3, pad 1)-ReLU-maxpool 2,
//                    linear(3136->128)-ReLU, linear(128->10): 421,642 parameters (the DDP baseline's
//                    network, bench/peers/ddp_baseline.py)
//   moe-transformer  ViT-style encoder over 7x7 patches (16 tokens) whose feed-forward layers are a
//                    mixture of experts with top-2 gating and the Switch Transformer load-balancing
//                    loss (Fedus et al. 2021: E * sum_e f_e * P_e), mean-pooled into a linear head
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>

namespace cdt::train {

struct ModelOptions {
  std::string name = "cnn";
  int layers = 2;    // moe-transformer
  int width = 64;    // moe-transformer token width
  int heads = 4;     // moe-transformer attention heads
  int experts = 8;   // moe-transformer experts per layer
  int top_k = 2;     // moe-transformer experts per token
};

// Every model maps [B, 1, 28, 28] images to [B, 10] logits; MoE models also report an auxiliary
// (load-balancing) loss, others return an undefined tensor for it.
class ClassifierModel : public torch::nn::Module {
 public:
  virtual std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& images) = 0;
};

// Throws cdt::Error(kInvalidArgument) for an unknown name or bad sizes.
std::shared_ptr<ClassifierModel> MakeModel(const ModelOptions& options);

}  // namespace cdt::train
