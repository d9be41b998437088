// Load balancer: per-rank micro-batch sizes that equalise step times on heterogeneous ranks.
//
// In synchronous data parallelism every step waits for the slowest rank, so a rank half as fast
// as the others halves the job's throughput. Each rank measures its own step time at two or more
// batch sizes (a short probe of the real training step, or its first steps) and fits
// t(b) = fixed + b · per_sample. The ranks exchange their fits and every rank computes the same
// split of the global batch that minimises the slowest rank's predicted time (greedy: each sample
// goes to the rank whose time grows least — optimal for costs linear in b). The trainer
// consumes the split (`train --balance-batches`, train/batch_balancer.h); its loss divides by the
// global batch, so the summed gradient stays the mean over all samples whatever the shares.
//
// The clock is an interface so tests drive the probe with a fake one.
#pragma once

#include <functional>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::topology {

struct StepTimeModel {
  double fixed_s = 0;       // per-step cost that does not scale with the batch
  double per_sample_s = 0;  // cost of one more sample
  double Predict(int batch) const { return fixed_s + per_sample_s * batch; }
};

class StepClock {
 public:
  virtual ~StepClock() = default;
  virtual double NowSeconds() = 0;
};
StepClock& SteadyStepClock();  // std::chrono::steady_clock

struct StepProbeOptions {
  std::vector<int> batch_sizes = {8, 32};  // at least two distinct sizes
  int repeats = 3;                         // timed runs per size; the median counts
  int warmup = 1;                          // untimed runs per size
};

// Times `step(batch)` at each probe size and fits the model (least squares over the per-size
// medians). Throws kInvalidArgument for fewer than two distinct sizes.
StepTimeModel ProbeStepTime(const std::function<void(int batch)>& step, StepClock& clock,
                            const StepProbeOptions& options = {});

struct BatchSplit {
  std::vector<int> batch;           // per rank; sums to the global batch
  std::vector<double> predicted_s;  // per rank, with this split
  double stddev_before_s = 0;       // of per-rank step times with an even split
  double stddev_after_s = 0;        // ... with this split
  double max_before_s = 0;          // slowest rank, even split (the step time)
  double max_after_s = 0;           // slowest rank, this split
};

// The split of `global_batch` over the ranks that minimises the slowest rank's predicted time,
// each rank getting at least `min_per_rank`. Throws kInvalidArgument when the batch cannot
// give every rank its minimum, or a model is negative or not finite.
BatchSplit ProposeMicroBatches(const std::vector<StepTimeModel>& ranks, int global_batch,
                               int min_per_rank = 1);

// Collective: exchanges every rank's model and returns the same split on every rank.
BatchSplit BalanceAcrossRanks(Communicator& comm, const StepTimeModel& mine, int global_batch,
                              int min_per_rank = 1);

}  // namespace cdt::topology
