// Batch balancing (`train --balance-batches K`): each rank's share of the global batch follows
// how fast it computes, so that a rank on a slower or busier processor stops making every other
// rank wait. Synchronous data parallelism pays the slowest rank's compute every step; with equal
// shares on two vCPUs of this VM that cost a mean 22 ms a step of 270 (docs/benchmarks.md).
//
// Every K steps each rank reports its compute seconds per sample over those K steps (forward and
// backward, waits excluded; one small allreduce, read a step later so nothing waits for it), and
// every rank computes the same split with topology's load balancer (ProposeMicroBatches: the
// split that minimises the slowest rank's predicted time), each rank keeping at least a quarter
// of the even share. The global batch never changes and the loss is the global batch's mean, so
// the step's gradient is the same sum of the same samples' gradients: only the order of float
// additions moves (curves within 1e-4; test Train.BalancedBatchesKeepTheArithmetic). What does
// change from run to run is which rank computes which samples, because the split follows
// measured times. Free of libtorch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace cdt::train {

class BatchBalancer {
 public:
  // `interval` 0 = off: batches() stays even.
  BatchBalancer(int world, int rank, int per_rank_batch, int64_t interval);

  const std::vector<int>& batches() const { return batches_; }
  bool on() const { return interval_ > 0 && world_ > 1; }

  // This rank's compute in one step (seconds) and the samples it computed.
  void Observe(double compute_s, size_t samples);
  // After step `step`: true when an interval ended; then `report()` holds this rank's seconds per
  // sample at its own index and zeros elsewhere, to be summed over the ranks.
  bool IntervalEnded(int64_t step);
  std::vector<double>& report() { return report_; }
  // The summed report: the next split. Returns true when it differs from the current one.
  bool Apply(int64_t from_step);

  // The splits chosen: [(first step, batches)].
  const std::vector<std::pair<int64_t, std::vector<int>>>& history() const { return history_; }

 private:
  int world_, rank_, per_rank_;
  int64_t interval_;
  std::vector<int> batches_;
  std::vector<double> report_;
  double compute_s_ = 0;
  size_t samples_ = 0;
  std::vector<std::pair<int64_t, std::vector<int>>> history_;
};

}  // namespace cdt::train
