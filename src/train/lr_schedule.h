// Learning-rate schedule: linear scaling with the global batch (Goyal et al. 2017), linear warmup,
// cosine decay to zero at the last step. Framework-free.
//
//   peak     = base_lr * global_batch / reference_batch      (reference_batch 0 = no scaling)
//   lr(s)    = peak * (s + 1) / warmup                        for s < warmup
//            = peak * 0.5 * (1 + cos(pi * (s - warmup) / (total - warmup)))   afterwards
// With cosine off, lr stays at peak after warmup.
//
// Scaling defaults: when the rate is scaled up (scale = global batch / reference batch > 1) and
// the user left --warmup-steps and --larc-trust automatic, the run warms up over
// AutomaticWarmupSteps and bounds each layer's step with LARC (AutomaticLarcTrust). Linear scaling
// alone sent the cnn (no normalization layer) to NaN at 16 workers (global batch 1,024, peak 0.4),
// with a warm-up too; LARC's clip mode kept it converging (docs/benchmarks.md, "Large global
// batches"), as You et al. 2017 trained AlexNet without BatchNorm at batch 8K. At the reference
// batch or below nothing changes. bench/peers/ddp_baseline.py follows the same rule.
#pragma once

#include <cstdint>
#include <string>

namespace cdt::train {

// --warmup-steps and --larc-trust left automatic.
inline constexpr int64_t kAutomaticWarmup = -1;
inline constexpr double kAutomaticLarc = -1;

// round(5 log2 scale) steps (5 at twice the reference batch, 10 at four times), at most a quarter
// of the run's `total_steps` but at least 1; 0 when the rate is not scaled up (round(5 log2 scale)
// < 1: a scale below 2^0.1, 1.07).
int64_t AutomaticWarmupSteps(double scale, int64_t total_steps);
// 0.05 when the rate is scaled up (as above), else 0 (off). Apex's LARC defaults to 0.02; at 16
// workers the cnn reached 0.842 with 0.05, 0.832 with 0.02 and 0.815 with 0.1.
double AutomaticLarcTrust(double scale);

struct LrSchedule {
  double base_lr = 0.01;
  int64_t global_batch = 1;
  int64_t reference_batch = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  bool cosine = true;
  bool warmup_automatic = false;  // chosen by AutomaticWarmupSteps (Describe says so)

  // global batch / reference batch; 1 when not scaled.
  double Scale() const;
  double Peak() const;
  double At(int64_t step) const;  // step counts from 0
  // What the run prints of it, e.g. "peak 0.4 = 0.1 x global batch 1024 / 256, warm-up 10
  // steps, cosine decay to 0 at step 59".
  std::string Describe() const;
  // For a run that diverged at `step`: "learning rate 0.2 (<Describe()>)", and the remedy beyond
  // a lower --lr when a scaled-up rate ran without warm-up (else "").
  std::string RateAt(int64_t step) const;
  std::string WarmUpHint() const;
};

}  // namespace cdt::train
