#include "compress/adaptive_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace cdt::compress {

AdaptiveController::AdaptiveController(AdaptiveOptions options, size_t buckets)
    : options_(options), buckets_(buckets) {
  options_.interval = std::max<int64_t>(1, options_.interval);
}

Decision AdaptiveController::Initial() const {
  Decision d;
  d.phase = "warmup";
  d.buckets.assign(buckets_, BucketChoice{"powersgd", options_.low_rank});
  d.reason = "first interval: low compression while the job is measured";
  return d;
}

Decision AdaptiveController::Decide(const IntervalObservation& o) {
  Decision d;
  d.from_step = o.last_step + 1;
  const double steps = std::max(1.0, o.steps);
  std::vector<double> norms(buckets_, 0.0);
  for (size_t b = 0; b < buckets_ && b < o.bucket_norms.size(); ++b) norms[b] = o.bucket_norms[b] / steps;

  // Bandwidth: what does the step cost without compression? Measured, when the interval ran
  // uncompressed (and remembered); else predicted from the timed uncompressed allreduce (or the
  // interval's seconds per wire byte), with 80% of the compute able to hide communication
  // (backward and, with the cross-step overlap, the next forward).
  const double compute = o.compute_s / steps, wait = o.wait_s / steps;
  // (The interval's bytes lag its decisions by one step: "compressed" means clearly so.)
  const bool compressing_now = o.bytes_wire < 0.9 * o.bytes_fp32;
  if (!compressing_now && o.bytes_fp32 > 0) {
    measured_plain_exposed_ = wait;
    have_measured_plain_ = true;
  }
  const double per_byte = o.bytes_wire > 0 ? o.comm_s / o.bytes_wire : 0;
  const double comm_plain = o.plain_comm_s > 0 ? o.plain_comm_s : per_byte * o.bytes_fp32 / steps;
  const double exposed_plain = have_measured_plain_ ? measured_plain_exposed_
                                                    : std::max(0.0, comm_plain - 0.8 * compute);
  const double step_plain = compute + exposed_plain, step_now = compute + wait;
  char why[256];
  if (options_.min_exposed > 0) {
    if (compressing_now && step_now > step_plain) {
      // Measured slower than sending plainly (encode/decode and the extra collectives cost more
      // than the bytes saved): uncompressed, and do not try again for a while.
      hold_plain_ = 4;
      std::snprintf(why, sizeof why,
                    "compressed step %.1f ms > uncompressed %.1f ms (%s): send uncompressed",
                    1e3 * step_now, 1e3 * step_plain, have_measured_plain_ ? "measured" : "predicted");
    } else if (exposed_plain < options_.min_exposed * step_plain) {
      std::snprintf(why, sizeof why,
                    "uncompressed communication exposed %.1f ms/step (%s) of a %.1f ms step: "
                    "%.1f%% < %.0f%%, compression would not pay",
                    1e3 * exposed_plain, have_measured_plain_ ? "measured" : "predicted",
                    1e3 * step_plain, 100 * exposed_plain / std::max(1e-12, step_plain),
                    100 * options_.min_exposed);
    } else if (hold_plain_ > 0) {
      --hold_plain_;
      std::snprintf(why, sizeof why, "compression measured slower recently: uncompressed (%d more)",
                    hold_plain_);
    } else {
      why[0] = '\0';
    }
    if (why[0] != '\0') {
      d.phase = o.last_step + 1 < std::max(options_.warmup_steps, options_.interval) ? "warmup" : "stable";
      d.buckets.assign(buckets_, BucketChoice{"none", 0});
      d.reason = why;
      prev_norms_ = norms;
      return d;
    }
  }

  if (o.last_step + 1 < options_.warmup_steps) {
    d.phase = "warmup";
    d.buckets.assign(buckets_, BucketChoice{"powersgd", options_.low_rank});
    d.reason = "LR warmup: low compression";
  } else if (o.lr_fraction < options_.converging_lr) {
    d.phase = "converging";
    d.buckets.assign(buckets_, BucketChoice{"powersgd", options_.low_rank});
    std::snprintf(why, sizeof why, "LR at %.0f%% of its peak: moderate compression", 100 * o.lr_fraction);
    d.reason = why;
  } else {
    d.phase = "stable";
    int critical = 0;
    for (size_t b = 0; b < buckets_; ++b) {
      const bool have_prev = b < prev_norms_.size() && prev_norms_[b] > 0;
      const double r = have_prev ? std::fabs(prev_norms_[b] - norms[b]) / prev_norms_[b] : 1.0;
      const bool is_critical = r >= options_.critical_change;
      critical += is_critical;
      d.buckets.push_back({"powersgd", is_critical ? options_.low_rank : options_.high_rank});
    }
    std::snprintf(why, sizeof why,
                  "%d of %zu bucket(s) in a critical regime (gradient norm change >= %.0f%%); "
                  "uncompressed communication exposed %.0f%% of the step",
                  critical, buckets_, 100 * options_.critical_change,
                  100 * exposed_plain / std::max(1e-12, step_plain));
    d.reason = why;
  }
  prev_norms_ = norms;
  return d;
}

}  // namespace cdt::compress
