// CompressionSteering: the trainer's side of gradient compression (docs/compression.md).
//
// MakeCompressionSetup turns `--compress`, `--compress-ratio`, `--powersgd-rank` into the options
// and the factory the GradientReducer builds each bucket's compressor with (error feedback is the
// reducer's, around each bucket, so that a compressor swap keeps the residual).
//
// A CompressionSteering then keeps `compression_phases` in the result and, with `--compress
// adaptive`, runs the AdaptiveController's interval loop:
//   - before training, every rank times one uncompressed allreduce of the whole gradient (the
//     slowest rank's time, so that every rank decides from the same figure);
//   - after each syncing backward (AfterBackward) it adds up the buckets' gradient norms; at the
//     end of an interval it puts the interval's compute, wait, optimizer, communication and bytes
//     behind the step's buckets as one small allreduce (sums over the ranks);
//   - before the next backward (DecideIfDue), when every bucket of the step has been collected and
//     compressors may change, it waits for that sum, decides and swaps the buckets' compressors.
// Every rank calls these at the same steps, so every rank issues the same collectives and takes
// the same decision.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "compress/adaptive_controller.h"
#include "compress/compressor.h"
#include "train/gradient_reducer.h"
#include "train/train_options.h"
#include "train/train_result.h"

namespace cdt::train {

struct CompressionSetup {
  // --compress, parsed once: adaptive, or the fixed method (kNone: uncompressed).
  bool adaptive = false;
  compress::Method method = compress::Method::kNone;
  compress::CompressorOptions options;  // what every compressor of the run is made with
  double ratio = 0;                     // top-k / random-k: --compress-ratio, else the default
  CompressorFactory factory;            // null for --compress none
};

// `world_size`: the ranks of the run (adaptive on one rank starts, and stays, uncompressed);
// `seed`: the run's, for the compressors' random draws.
CompressionSetup MakeCompressionSetup(const ReductionOptions& o, uint64_t seed, int world_size);

// DGC's momentum correction: whether the compressor's error feedback keeps the momentum instead of
// SGD (top-k, random-k and signSGD with error feedback, under SGD with momentum).
bool MomentumInCompressor(const TrainOptions& o);

// What to add to "lower --lr" when the loss diverges: the flag that makes `--compress` lossy
// compression milder (", or raise --compress-ratio"), empty for none, fp16, bf16 and adaptive.
std::string CompressLessHint(const CompressionSetup& setup);

class CompressionSteering {
 public:
  // Records the first phase in `r` (which must outlive this). With --compress adaptive, times the
  // uncompressed allreduce (a collective: every rank constructs this at the same point) and prints
  // the controller's first choice on rank 0. `resumed` (adaptive, on a resume; null otherwise):
  // what State() wrote into this rank's compression state, empty where there was none. The
  // controller goes on from it (and the interval it was measuring) where every rank has one that
  // fits; else every rank starts again at the first interval. Construct this before the
  // compressors' states are restored: it sets the compressors in force at the checkpoint.
  // `warmup_steps`: the LR warm-up (the controller keeps compression off during it); `progress`:
  // a progress line is drawn on rank 0; `log`: this rank's.
  CompressionSteering(const ReductionOptions& o, int64_t warmup_steps, bool progress,
                      const Log& log, const CompressionSetup& setup, Communicator& comm,
                      GradientReducer& reducer, int64_t first_step, TrainResult* r,
                      const std::vector<double>* resumed = nullptr);

  // The interval sums may still be on their way into this object (the constructor sends them on
  // a resume at an interval's end): waits for them, as the trainer's guard does later on.
  ~CompressionSteering() { WaitIgnoringError(interval_work_); }
  CompressionSteering(const CompressionSteering&) = delete;
  CompressionSteering& operator=(const CompressionSteering&) = delete;

  // Adaptive: what a checkpoint after the last AfterBackward keeps of the controller (the same on
  // every rank) and of this rank's sums of the interval so far; empty otherwise. Call DecideIfDue
  // first: a decision due is taken, not lost.
  std::vector<double> State() const;

  // After a syncing backward of `step`. `comm_wait_s`, `optimizer_s`: the run's exposed
  // communication and optimizer time so far; `lr_fraction`: the step's LR over the schedule's peak.
  // No-op unless adaptive.
  void AfterBackward(int64_t step, int64_t end_step, double comm_wait_s, double optimizer_s,
                     double lr_fraction);

  // Before a backward: decides, if an interval's sums are on their way, once they are here.
  void DecideIfDue();

  // Waits for the interval sums in flight, if any (they write into this object).
  void Wait();
  // The same, for a guard that waits on the way out by an exception.
  std::shared_ptr<Work>* in_flight() { return &interval_work_; }

 private:
  double ParameterOf(compress::Method method, int rank) const;
  // Rank 0, fixed compressors: says so when --powersgd-rank or --compress-ratio leaves no choice
  // (no matrix factored; one element of every bucket sent).
  void WarnIfTheKnobHasNoHold(const ReductionOptions& o) const;
  void Apply(const compress::Decision& d);
  // Puts the controller and the interval back from `resumed` (State's layout); false if it does
  // not fit.
  bool Resume(const std::vector<double>& resumed, int64_t first_step);
  // Sends the interval's sums (every rank at the same step) for DecideIfDue; `step`: its last.
  void SubmitInterval(int64_t step);

  const bool progress_;  // a progress line is being drawn: start log lines with \r
  const Log log_;
  CompressionSetup setup_;
  GradientReducer& reducer_;
  TrainResult& r_;
  const int rank_;
  std::unique_ptr<compress::AdaptiveController> controller_;
  double plain_comm_s_ = 0;  // one uncompressed allreduce of the gradient, the slowest rank's
  double resumed_plain_comm_s_ = 0;  // the same, timed by the run that wrote the checkpoint
  // The interval being measured: what the run's totals were at its start, its buckets' norms.
  struct Totals {
    double compute = 0, wait = 0, comm = 0, fp32 = 0, wire = 0, optimizer = 0;
    double residual_sq = 0, compressed_sq = 0;  // ReducerStats': the log line's residual
    // What each grew by since `start`, in interval_sum_'s order.
    std::vector<double> Since(const Totals& start) const {
      return {compute - start.compute,
              wait - start.wait,
              comm - start.comm,
              fp32 - start.fp32,
              wire - start.wire,
              optimizer - start.optimizer,
              residual_sq - start.residual_sq,
              compressed_sq - start.compressed_sq};
    }
  } interval_start_, latest_;  // latest_: the totals at the last AfterBackward
  // The run's totals: these three as given, the reductions' from the reducer's stats.
  Totals TotalsNow(double compute, double wait, double optimizer) const;
  double latest_lr_ = 1;         // the LR fraction of the last AfterBackward's step
  int64_t interval_steps_ = 0;   // steps of the interval so far
  compress::Decision in_force_;  // the controller's last choice
  std::vector<double> interval_norms_;
  std::vector<double> interval_sum_;  // allreduce buffer: [steps, norms..., compute, wait, comm,
                                      // fp32, wire, optimizer, residual_sq, compressed_sq]
  int64_t interval_last_step_ = 0;
  double interval_lr_ = 1;
  std::shared_ptr<Work> interval_work_;
};

}  // namespace cdt::train
