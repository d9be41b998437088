// ResNet-18 and ResNet-50 for `train --model resnet18|resnet50` (He et al. 2016), in the form used
// for 32x32 images (a 3x3 stem, no max-pool) on the trainer's [B, 1, 28, 28] input: stages of 64,
// 128, 256 and 512 channels at 28, 14, 7 and 4 pixels, global average pooling, a linear head to
// 10 classes. ResNet-18: basic blocks [2, 2, 2, 2], 11,172,810 parameters; ResNet-50: bottleneck
// blocks [3, 4, 6, 3] (x4 expansion), 23,519,690 parameters (the CIFAR forms' 11,173,962 and
// 23,520,842 less the stem's two missing input channels). Batch normalisation throughout: its
// running statistics are buffers, which the trainer broadcasts from rank 0 before each evaluation
// and the end-of-run check (train/replica.h, docs/training.md). Include only from
// src/train .cc files.
#pragma once

#include <memory>

#include "train/models.h"

namespace cdt::train {

// depth 18 or 50; throws cdt::Error(kInvalidArgument) for another.
std::shared_ptr<ClassifierModel> MakeResNet(int depth);

}  // namespace cdt::train
