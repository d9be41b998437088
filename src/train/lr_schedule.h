// Learning-rate schedule: linear scaling with the global batch (Goyal et al. 2017), linear warmup,
// cosine decay to zero at the last step. Framework-free.
//
//   peak     = base_lr * global_batch / reference_batch      (reference_batch 0 = no scaling)
//   lr(s)    = peak * (s + 1) / warmup                        for s < warmup
//            = peak * 0.5 * (1 + cos(pi * (s - warmup) / (total - warmup)))   afterwards
// With cosine off, lr stays at peak after warmup.
#pragma once

#include <cstdint>
#include <string>

namespace cdt::train {

struct LrSchedule {
  double base_lr = 0.01;
  int64_t global_batch = 1;
  int64_t reference_batch = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  bool cosine = true;

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
