// LARC, clip mode (NVIDIA Apex's apex.parallel.LARC, after You et al. 2017, "Large Batch
// Training of Convolutional Networks"): before the optimizer step each parameter's gradient is
// scaled by min(1, trust x ||w|| / (lr x ||g||)), so that no layer's step lr x g exceeds `trust`
// of its weights' norm. Where steps are already small it changes nothing; where a large learning
// rate (linear scaling at a large global batch) would throw a layer's weights by more than that,
// it shortens that layer's step alone. Measured (docs/benchmarks.md, "Large global batches"):
// the cnn, which has no normalization layer, diverged at 16 and 32 workers under the linear
// scaling rule with or without warm-up and trains with trust 0.05.
//
// Weight decay is the optimizer's, outside the ratio (Apex folds it into the gradient first).
// Parameters whose weights or gradient are all zero are left as they are.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace cdt::train {

// Scales the gradient of each of `params` that has one, in place. trust > 0, lr > 0.
void ClipByTrustRatio(const std::vector<torch::Tensor>& params, double trust, double lr);

}  // namespace cdt::train
