#include "compress/adaptive_controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace cdt::compress {
namespace {

double Median(std::vector<double> v) {  // of 1..3 values; of two, their mean
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

constexpr double kStateFormat = 1;
const char* const kPhases[] = {"warmup", "stable", "converging"};

}  // namespace

AdaptiveController::AdaptiveController(AdaptiveOptions options, size_t buckets,
                                       std::vector<std::vector<double>> wire_bytes)
    : options_(options), buckets_(buckets), wire_bytes_(std::move(wire_bytes)) {
  options_.interval = std::max<int64_t>(1, options_.interval);
}

Decision AdaptiveController::Initial() const {
  Decision d;
  d.phase = "warmup";
  d.buckets.assign(buckets_, BucketChoice{Method::kPowerSgd, options_.low_rank});
  d.reason = "first interval: low compression while the job is measured";
  return d;
}

std::string AdaptiveController::PhaseAfter(const IntervalObservation& o,
                                           int64_t warmup_until) const {
  if (o.last_step + 1 < warmup_until) return "warmup";
  return o.lr_fraction < options_.converging_lr ? "converging" : "stable";
}

int AdaptiveController::StableRank(const IntervalObservation& o, const std::vector<bool>& critical,
                                   std::string* why) const {
  const int high = options_.high_rank;
  const double steps = std::max(1.0, o.steps);
  const double fp32_per_step = o.bytes_fp32 / steps;
  const bool known = options_.min_exposed > 0 && o.plain_comm_s > 0 && fp32_per_step > 0 &&
                     wire_bytes_.size() == buckets_;
  const bool any_stable = std::find(critical.begin(), critical.end(), false) != critical.end();
  if (!known || !any_stable) return high;
  // Seconds per byte of the uncompressed allreduce: a large message, so the link's bandwidth.
  const double per_byte = o.plain_comm_s / fp32_per_step;
  const double budget = 0.8 * o.compute_s / steps;
  const auto comm_at = [&](int rank) {
    double bytes = 0;
    for (size_t b = 0; b < buckets_; ++b) {
      const int r = critical[b] ? options_.low_rank : rank;
      const std::vector<double>& w = wire_bytes_[b];
      if (r >= 1 && static_cast<size_t>(r) <= w.size()) bytes += w[static_cast<size_t>(r) - 1];
    }
    return per_byte * bytes;
  };
  int rank = high;
  while (rank > 1 && comm_at(rank) > budget) --rank;
  char text[160];
  std::snprintf(text, sizeof text,
                "; rank %d: %.1f ms of communication a step (predicted) against %.1f ms that "
                "80%% of the compute can hide",
                rank, 1e3 * comm_at(rank), 1e3 * budget);
  *why = text;
  return rank;
}

struct AdaptiveController::Interval {
  double compute = 0, wait = 0, optimizer = 0;  // seconds per step
  double step_now = 0;                          // their sum
  bool compressing_now = false;                 // the interval's bytes were clearly compressed
  double comm_plain = 0;                        // an uncompressed allreduce of every bucket
};

AdaptiveController::Interval AdaptiveController::Read(const IntervalObservation& o) const {
  const double steps = std::max(1.0, o.steps);
  Interval i;
  i.compute = o.compute_s / steps;
  i.wait = o.wait_s / steps;
  i.optimizer = o.optimizer_s / steps;
  i.step_now = i.compute + i.wait + i.optimizer;
  // The interval's bytes lag its decisions by one step: "compressed" means clearly so.
  i.compressing_now = o.bytes_wire < 0.9 * o.bytes_fp32;
  const double per_byte = o.bytes_wire > 0 ? o.comm_s / o.bytes_wire : 0;
  i.comm_plain = o.plain_comm_s > 0 ? o.plain_comm_s : per_byte * o.bytes_fp32 / steps;
  return i;
}

// Bandwidth: step times with and without compression, measured in the last interval that ran
// each way.
void AdaptiveController::Measure(const IntervalObservation& o, const Interval& i) {
  if (o.bytes_fp32 <= 0) return;
  if (i.compressing_now) {
    measured_compressed_step_ = i.step_now;
  } else {
    // The median of the last (up to) three uncompressed intervals in a row: on loopback one
    // slow uncompressed interval (82 ms among 62-77) once made a stale compressed figure look
    // 10% faster, and the compressed steps that followed measured too far from it to be
    // re-measured: the run compressed its last 357 steps, 0.91x an uncompressed run overall
    // (bench/results/compress-20261201T123600Z). A new run of uncompressed intervals (a
    // re-measurement after compressing) starts afresh: it is there to see change.
    if (!last_plain_) {
      plain_steps_.clear();
      plain_exposed_.clear();
    }
    plain_steps_.push_back(i.step_now);
    plain_exposed_.push_back(i.wait);
    if (plain_steps_.size() > 3) {
      plain_steps_.erase(plain_steps_.begin());
      plain_exposed_.erase(plain_exposed_.begin());
    }
    measured_plain_step_ = Median(plain_steps_);
    measured_plain_exposed_ = Median(plain_exposed_);
  }
  last_plain_ = !i.compressing_now;
  ++since_plain_;
  ++since_compressed_;
  (i.compressing_now ? since_compressed_ : since_plain_) = 0;
}

Decision AdaptiveController::Decide(const IntervalObservation& o) {
  Decision d;
  d.from_step = o.last_step + 1;
  const double steps = std::max(1.0, o.steps);
  std::vector<double> norms(buckets_, 0.0);
  for (size_t b = 0; b < buckets_ && b < o.bucket_norms.size(); ++b)
    norms[b] = o.bucket_norms[b] / steps;
  const Interval i = Read(o);
  Measure(o, i);
  const std::string why = options_.min_exposed > 0 ? WhyUncompressed(i) : "";
  if (!why.empty()) {
    d.phase = PhaseAfter(o, std::max(options_.warmup_steps, options_.interval));
    d.buckets.assign(buckets_, BucketChoice{Method::kNone, 0});
    d.reason = why;
  } else {
    ChooseRanks(o, i, norms, &d);
  }
  prev_norms_ = norms;
  return d;
}

// Uncompressed, predicted until measured: 80% of the compute can hide communication (backward
// and, with the cross-step overlap, the next forward).
namespace {
struct Plain {
  bool measured;
  double exposed, step;
  const char* how;
};

Plain PlainStep(double measured_step, double measured_exposed, double compute,
                       double optimizer, double comm_plain) {
  Plain p;
  p.measured = measured_step > 0;
  p.exposed = p.measured ? measured_exposed : std::max(0.0, comm_plain - 0.8 * compute);
  p.step = p.measured ? measured_step : compute + optimizer + p.exposed;
  p.how = p.measured ? "measured" : "predicted";
  return p;
}

}  // namespace

std::string AdaptiveController::WhyUncompressed(const Interval& i) {
  const Plain plain = PlainStep(measured_plain_step_, measured_plain_exposed_, i.compute,
                                i.optimizer, i.comm_plain);
  if (plain.measured && measured_compressed_step_ > 0) {
    // Both measured: compression must be clearly faster (min_gain) — within the noise of
    // step times, sending uncompressed is the safe side.
    bool plain_wins = measured_compressed_step_ > (1 - options_.min_gain) * plain.step;
    if (probing_ != 0) {
      // A re-measurement that confirms compression waits twice as long next time.
      const bool confirmed = !plain_wins;
      backoff_ =
          confirmed ? 2 * std::max(backoff_, options_.reprobe_after) : options_.reprobe_after;
      probing_ = 0;
    }
    const int after = std::max(backoff_, options_.reprobe_after);
    const bool close =
        std::fabs(measured_compressed_step_ - plain.step) < options_.reprobe_within * plain.step;
    const char* probe = "";
    // Only the uncompressed figure goes stale in a harmful way: a compressed one that is stale
    // is overturned as soon as uncompressed steps measure slower than it (a slower network).
    if (options_.reprobe_after > 0 && close && i.compressing_now && since_plain_ >= after) {
      plain_wins = true;
      probing_ = 1;
      probe = "; re-measuring uncompressed";
    }
    if (!plain_wins) return "";
    return fmt::format(
        "compressed steps {:.1f} ms, uncompressed {:.1f} ms (both measured, {} and {} "
        "interval(s) ago): send uncompressed{}",
        1e3 * measured_compressed_step_, 1e3 * plain.step, since_compressed_, since_plain_, probe);
  }
  if (plain.exposed < options_.min_exposed * plain.step)
    return fmt::format(
        "uncompressed communication exposed {:.1f} ms/step ({}) of a {:.1f} ms step: {:.1f}% < "
        "{:.0f}%, compression would not pay",
        1e3 * plain.exposed, plain.how, 1e3 * plain.step,
        100 * plain.exposed / std::max(1e-12, plain.step), 100 * options_.min_exposed);
  if (i.compressing_now && i.step_now > plain.step)
    return fmt::format(
        "compressed step {:.1f} ms > uncompressed {:.1f} ms ({}): send uncompressed, measure it",
        1e3 * i.step_now, 1e3 * plain.step, plain.how);
  return "";
}

void AdaptiveController::ChooseRanks(const IntervalObservation& o, const Interval& i,
                                     const std::vector<double>& norms, Decision* d) const {
  d->phase = PhaseAfter(o, options_.warmup_steps);
  if (d->phase == "warmup") {
    d->buckets.assign(buckets_, BucketChoice{Method::kPowerSgd, options_.low_rank});
    d->reason = "LR warmup: low compression";
    return;
  }
  if (d->phase == "converging") {
    d->buckets.assign(buckets_, BucketChoice{Method::kPowerSgd, options_.low_rank});
    d->reason =
        fmt::format("LR at {:.0f}% of its peak: moderate compression", 100 * o.lr_fraction);
    return;
  }
  int critical = 0;
  std::vector<bool> is_critical(buckets_);
  for (size_t b = 0; b < buckets_; ++b) {
    const bool have_prev = b < prev_norms_.size() && prev_norms_[b] > 0;
    const double r = have_prev ? std::fabs(prev_norms_[b] - norms[b]) / prev_norms_[b] : 1.0;
    is_critical[b] = r >= options_.critical_change;
    critical += is_critical[b];
  }
  std::string rank_why;
  const int stable_rank = StableRank(o, is_critical, &rank_why);
  for (size_t b = 0; b < buckets_; ++b)
    d->buckets.push_back({Method::kPowerSgd, is_critical[b] ? options_.low_rank : stable_rank});
  const Plain plain = PlainStep(measured_plain_step_, measured_plain_exposed_, i.compute,
                                i.optimizer, i.comm_plain);
  d->reason = fmt::format(
                  "{} of {} bucket(s) in a critical regime (gradient norm change >= {:.0f}%); "
                  "uncompressed communication exposed {:.0f}% of the step; steps {:.1f} ms now, "
                  "{:.1f} ms uncompressed ({})",
                  critical, buckets_, 100 * options_.critical_change,
                  100 * plain.exposed / std::max(1e-12, plain.step), 1e3 * i.step_now,
                  1e3 * plain.step, plain.how) +
              rank_why;
}

std::vector<double> AdaptiveController::State(const Decision& in_force) const {
  std::vector<double> s = {kStateFormat,
                           static_cast<double>(buckets_),
                           measured_plain_step_,
                           measured_plain_exposed_,
                           measured_compressed_step_,
                           last_plain_ ? 1.0 : 0.0,
                           static_cast<double>(since_plain_),
                           static_cast<double>(since_compressed_),
                           static_cast<double>(backoff_),
                           static_cast<double>(probing_),
                           static_cast<double>(plain_steps_.size())};
  s.insert(s.end(), plain_steps_.begin(), plain_steps_.end());
  s.insert(s.end(), plain_exposed_.begin(), plain_exposed_.end());
  s.push_back(static_cast<double>(prev_norms_.size()));
  s.insert(s.end(), prev_norms_.begin(), prev_norms_.end());
  s.push_back(static_cast<double>(in_force.from_step));
  const auto phase = std::find(std::begin(kPhases), std::end(kPhases), in_force.phase);
  s.push_back(static_cast<double>(phase - std::begin(kPhases)));
  for (const BucketChoice& b : in_force.buckets)
    s.push_back(b.method == Method::kNone ? 0.0 : static_cast<double>(b.powersgd_rank));
  return s;
}

bool AdaptiveController::Restore(const std::vector<double>& state, Decision* in_force) {
  size_t at = 0;
  bool ok = true;
  // The next number, which must be a whole number in [lo, hi].
  const auto count = [&](double lo, double hi) -> size_t {
    const double v = at < state.size() ? state[at++] : -1;
    ok = ok && v >= lo && v <= hi && v == std::floor(v);
    return ok ? static_cast<size_t>(v) : 0;
  };
  const auto number = [&] {
    const double v = at < state.size() ? state[at++] : 0.0;
    ok = ok && std::isfinite(v);
    return v;
  };
  const auto numbers = [&](size_t n) {
    std::vector<double> v;
    for (size_t i = 0; i < n && ok; ++i) v.push_back(number());
    return v;
  };
  count(kStateFormat, kStateFormat);
  if (count(0, 1e9) != buckets_ || !ok) return false;
  const double plain_step = number(), plain_exposed = number(), compressed_step = number();
  const bool last_plain = count(0, 1) == 1;
  const int since_plain = static_cast<int>(count(0, 1e9)),
            since_compressed = static_cast<int>(count(0, 1e9)),
            backoff = static_cast<int>(count(0, 1e9)), probing = static_cast<int>(count(0, 1));
  const size_t plain_n = count(0, 3);
  std::vector<double> plain_steps = numbers(plain_n), plain_exposed_v = numbers(plain_n);
  const size_t norms_n = count(0, static_cast<double>(buckets_));
  std::vector<double> prev_norms = numbers(norms_n);
  Decision d;
  d.from_step = static_cast<int64_t>(count(0, 9e15));
  const size_t phase = count(0, std::size(kPhases) - 1);
  // A rank the controller could have chosen: a damaged file must not size PowerSGD's factors.
  const double top_rank = std::max(options_.low_rank, options_.high_rank);
  for (size_t b = 0; b < buckets_ && ok; ++b) {
    const int rank = static_cast<int>(count(0, top_rank));
    d.buckets.push_back(rank == 0 ? BucketChoice{Method::kNone, 0} : BucketChoice{Method::kPowerSgd, rank});
  }
  if (!ok || at != state.size() || (norms_n != 0 && norms_n != buckets_)) return false;
  d.phase = kPhases[phase];
  d.reason = "the choice in force at the checkpoint";
  measured_plain_step_ = plain_step;
  measured_plain_exposed_ = plain_exposed;
  measured_compressed_step_ = compressed_step;
  last_plain_ = last_plain;
  since_plain_ = since_plain;
  since_compressed_ = since_compressed;
  backoff_ = backoff;
  probing_ = probing;
  plain_steps_ = std::move(plain_steps);
  plain_exposed_ = std::move(plain_exposed_v);
  prev_norms_ = std::move(prev_norms);
  *in_force = std::move(d);
  return true;
}

void AdaptiveController::ForgetStepTimes() {
  measured_plain_step_ = measured_plain_exposed_ = measured_compressed_step_ = 0;
  plain_steps_.clear();
  plain_exposed_.clear();
  last_plain_ = false;
  since_plain_ = since_compressed_ = backoff_ = probing_ = 0;
}

}  // namespace cdt::compress
