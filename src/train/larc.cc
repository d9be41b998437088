#include "train/larc.h"

#include <algorithm>

namespace cdt::train {

void ClipByTrustRatio(const std::vector<torch::Tensor>& params, double trust, double lr) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& p : params) {
    const torch::Tensor& g = p.grad();
    if (!g.defined()) continue;
    const double w_norm = p.norm().item<double>(), g_norm = g.norm().item<double>();
    if (!(w_norm > 0) || !(g_norm > 0)) continue;
    const double scale = std::min(1.0, trust * w_norm / (lr * g_norm));
    if (scale < 1.0) g.mul_(scale);
  }
}

}  // namespace cdt::train
