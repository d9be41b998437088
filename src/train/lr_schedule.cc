#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace cdt::train {

double LrSchedule::Peak() const {
  if (reference_batch <= 0) return base_lr;
  return base_lr * static_cast<double>(global_batch) / static_cast<double>(reference_batch);
}

double LrSchedule::At(int64_t step) const {
  const double peak = Peak();
  if (step < warmup_steps)
    return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (!cosine || total_steps <= warmup_steps) return peak;
  const double t = std::clamp(
      static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps),
      0.0, 1.0);
  return peak * 0.5 * (1 + std::cos(std::numbers::pi * t));
}

std::string LrSchedule::Describe() const {
  char text[256];
  if (reference_batch > 0)
    std::snprintf(text, sizeof text, "peak %g = %g x global batch %lld / %lld", Peak(), base_lr,
                  static_cast<long long>(global_batch), static_cast<long long>(reference_batch));
  else
    std::snprintf(text, sizeof text, "peak %g (not scaled with the global batch)", Peak());
  std::string out = text;
  out += warmup_steps > 0 ? ", warm-up " + std::to_string(warmup_steps) + " steps" : ", no warm-up";
  out += cosine ? ", cosine decay to 0 at step " + std::to_string(total_steps) : ", then constant";
  return out;
}

std::string LrSchedule::RateAt(int64_t step) const {
  char rate[64];
  std::snprintf(rate, sizeof rate, "learning rate %g (", At(step));
  return rate + Describe() + ")";
}

std::string LrSchedule::WarmUpHint() const {
  return warmup_steps == 0 && Peak() > base_lr
             ? ", or warm up (--warmup-steps) and bound each layer's step (--larc-trust, "
               "docs/training.md)"
             : "";
}

}  // namespace cdt::train
