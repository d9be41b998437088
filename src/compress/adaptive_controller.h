// AdaptiveController: `train --compress adaptive` — which compressor each bucket uses, decided
// every `interval` steps from the training phase and from how communication-bound the job is.
//
// Phases (documented in docs/compression.md):
//   warmup      the first interval and the LR warmup: low compression (PowerSGD rank
//               `low_rank`, as Accordion's low setting), and the interval that measures compute;
//   stable      high compression (PowerSGD rank `high_rank`) — except buckets in a *critical
//               regime*, Accordion's rule (Agarwal et al., MLSys'21): the mean gradient norm of
//               the bucket changed by r = |‖g_prev‖ − ‖g_now‖| / ‖g_prev‖ >= `critical_change`
//               between two intervals; those get low compression (PowerSGD rank `low_rank`);
//   converging  the LR has decayed below `converging_lr` of its peak: moderate compression
//               (rank `low_rank`) for the fine end of training.
// Bandwidth awareness, from step times (compute + exposed wait + optimizer): once both an
// uncompressed and a compressed interval have been measured (uncompressed: the median of the last
// three such intervals in a row), the faster way wins (compression must beat uncompressed by
// `min_gain`); while compressing and the two are close, uncompressed is measured again now and then
// (reprobe_after). Before that, the uncompressed step is predicted from an uncompressed
// allreduce of the whole gradient timed before training and the interval's compute; it sends
// uncompressed ("none") when that communication
// would be exposed for less than `min_exposed` of the step, or when compressed steps measured
// slower than the prediction (then the next interval measures the uncompressed step). Encoding,
// decoding and the extra collectives are inside the measured times. Compression must not lose
// where the network is not the bottleneck (the MLSys'22 study's lesson). Compressing in the
// stable phase, the rank follows the link too: high_rank, or lower (down to 1) where
// high_rank's communication would not hide under 80% of the compute — predicted from the
// buckets' PowerSGD wire bytes at each rank and the seconds per byte of the uncompressed
// allreduce timed before training. Buckets in a critical regime, warmup and converging keep
// low_rank: there accuracy comes first. `min_exposed` 0 turns these rules off: the phase
// schedule alone decides.
//
// Every rank must decide the same: the trainer sums the observations of all ranks before Decide
// (one small allreduce per interval), and Decide is a deterministic function of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compress/method.h"

namespace cdt::compress {

struct AdaptiveOptions {
  int64_t interval = 50;            // steps between decisions
  int64_t warmup_steps = 0;         // the LR warmup; the warmup phase lasts at least one interval
  double critical_change = 0.5;     // Accordion's eta
  double converging_lr = 0.25;      // share of the peak LR below which training is converging
  double min_exposed = 0.05;        // compress only if uncompressed communication is exposed for at
                                    // least this share of the step; 0 = always (phases only)
  int high_rank = 2, low_rank = 4;  // PowerSGD ranks
  // Measured compressed steps must be this much shorter than uncompressed ones. 3% let step-time
  // noise (±5% with 4 ranks on 2 cores) choose compression on loopback, at 0.88-0.92x.
  double min_gain = 0.10;
  // Compressing, with both ways measured within `reprobe_within` of each other: uncompressed is
  // measured again after `reprobe_after` intervals (doubling each time a re-measurement confirms
  // compression), so that one noisy uncompressed interval cannot settle the rest of the run.
  int reprobe_after = 4;
  double reprobe_within = 0.15;
};

// One interval's measurements, summed over its steps and over ranks (the trainer allreduces).
struct IntervalObservation {
  int64_t last_step = 0;             // the interval's last step (same on every rank)
  double steps = 0;                  // steps x ranks
  std::vector<double> bucket_norms;  // per bucket: sum of local gradient norms
  double compute_s = 0;              // forward + backward
  double wait_s = 0;                 // exposed communication
  double optimizer_s = 0;            // optimizer steps: in the step either way, so counted in it
                                     // (min_gain and min_exposed are shares of the whole step)
  double comm_s = 0;                 // buckets' run time (encode + collectives + decode)
  double bytes_fp32 = 0, bytes_wire = 0;
  double lr_fraction = 1;   // of the interval's last step (not summed)
  double plain_comm_s = 0;  // one uncompressed allreduce of all buckets (not summed;
                            // 0 = unknown: extrapolate from comm_s / bytes_wire)
};

struct BucketChoice {
  Method method = Method::kNone;  // kNone or kPowerSgd
  int powersgd_rank = 0;          // for kPowerSgd
};

struct Decision {
  int64_t from_step = 0;
  std::string phase;  // warmup | stable | converging (the trainer adds fixed, single-worker)
  std::vector<BucketChoice> buckets;
  std::string reason;  // one line for the log
};

class AdaptiveController {
 public:
  // `wire_bytes` (optional): per bucket, its PowerSGD wire bytes at ranks 1, 2, … low_rank
  // (PowerSgdWireBytes), for choosing the stable phase's rank by bandwidth.
  AdaptiveController(AdaptiveOptions options, size_t buckets,
                     std::vector<std::vector<double>> wire_bytes = {});
  // The choice for the first interval.
  Decision Initial() const;
  // After an interval: the choice from the next step on. Deterministic in its input.
  Decision Decide(const IntervalObservation& o);
  const AdaptiveOptions& options() const { return options_; }

  // For a checkpoint: what the controller has measured and `in_force`, the choice it made last,
  // as numbers (the same on every rank; layout in docs/compression.md, "Resume"). Restore puts
  // both back and returns the choice; false, with the controller unchanged, when `state` was
  // written for another number of buckets or by another format.
  std::vector<double> State(const Decision& in_force) const;
  bool Restore(const std::vector<double>& state, Decision* in_force);
  // Forgets the step times measured (a resume on another machine or link): both ways are
  // predicted, then measured, again.
  void ForgetStepTimes();

 private:
  // The phase from step o.last_step + 1 on: warmup before `warmup_until`, then converging once the
  // LR has fallen below converging_lr of its peak, stable in between.
  std::string PhaseAfter(const IntervalObservation& o, int64_t warmup_until) const;
  // The stable phase's rank for buckets not in a critical regime: high_rank, or less where
  // high_rank's communication, predicted, would not hide under the compute (see the top).
  // Writes how it chose into `why` (empty when it kept high_rank without a prediction).
  int StableRank(const IntervalObservation& o, const std::vector<bool>& critical,
                 std::string* why) const;
  // One interval's figures per step, as Decide reads them (adaptive_controller.cc).
  struct Interval;
  Interval Read(const IntervalObservation& o) const;
  // Keeps the interval's step time as the measured compressed or uncompressed one.
  void Measure(const IntervalObservation& o, const Interval& i);
  // With min_exposed: why this interval's decision is to send uncompressed ("" = it is not).
  std::string WhyUncompressed(const Interval& i);
  // Compressing: the phase's PowerSGD ranks per bucket, and why.
  void ChooseRanks(const IntervalObservation& o, const Interval& i,
                   const std::vector<double>& norms, Decision* d) const;

  AdaptiveOptions options_;
  size_t buckets_;
  std::vector<std::vector<double>> wire_bytes_;  // [bucket][rank - 1]
  std::vector<double> prev_norms_;               // mean norm per bucket in the previous interval
  // Per step (0 = none yet): uncompressed, the median of the last (up to) three uncompressed
  // intervals in a row (plain_steps_, plain_exposed_; last_plain_: the last interval was one);
  // compressed, the last compressed interval.
  double measured_plain_step_ = 0, measured_plain_exposed_ = 0, measured_compressed_step_ = 0;
  std::vector<double> plain_steps_, plain_exposed_;
  bool last_plain_ = false;
  // Intervals since each way was last measured; re-measuring state (reprobe_after).
  int since_plain_ = 0, since_compressed_ = 0;
  int backoff_ = 0;  // intervals before the next re-measurement; 0 = reprobe_after
  int probing_ = 0;  // 1: the last interval re-measured uncompressed
};

}  // namespace cdt::compress
