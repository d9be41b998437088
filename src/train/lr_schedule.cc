#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>

namespace cdt::train {

namespace {

// round(5 log2 scale): 0 up to a scale of 2^0.1 (1.07), which is not "scaled up" enough to act.
int64_t WarmupForScale(double scale) {
  return scale > 1 ? static_cast<int64_t>(std::lround(5 * std::log2(scale))) : 0;
}

}  // namespace

int64_t AutomaticWarmupSteps(double scale, int64_t total_steps) {
  const int64_t steps = WarmupForScale(scale);
  if (steps < 1) return 0;
  return std::max<int64_t>(std::min(steps, total_steps / 4), std::min<int64_t>(1, total_steps));
}

double AutomaticLarcTrust(double scale) { return WarmupForScale(scale) >= 1 ? 0.05 : 0.0; }

double LrSchedule::Scale() const {
  if (reference_batch <= 0) return 1;
  return static_cast<double>(global_batch) / static_cast<double>(reference_batch);
}

double LrSchedule::Peak() const { return base_lr * Scale(); }

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
  out += warmup_steps > 0 ? ", warm-up " + std::to_string(warmup_steps) +
                                (warmup_steps == 1 ? " step" : " steps")
                          : ", no warm-up";
  if (warmup_automatic && warmup_steps > 0) {
    std::snprintf(text, sizeof text, " (automatic for a rate scaled %gx)", Scale());
    out += text;
  }
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
