// GlobalSampler: which samples each rank trains on, as a pure function of (seed, epoch, global
// position, per-rank batch sizes).
//
// Every epoch has one global, seeded permutation of the dataset. Training consumes it front to
// back: a step starting at global position `pos` takes the next sum(per_rank_batch) samples (fewer
// at the end of the epoch), and rank r gets the slice after ranks 0..r-1's. The whole state is
// therefore (epoch, pos): a checkpoint resumes exactly, and after the world changes size (elastic
// recovery) the survivors simply split the *remaining* samples of the epoch among themselves — no
// sample is skipped or seen twice within an epoch. PyTorch's DistributedSampler instead deals
// indices round-robin per rank and pads the epoch by repeating samples, so its position is per
// rank and cannot be re-partitioned.
//
// The permutation is a Fisher–Yates shuffle driven by SplitMix64 with rejection sampling, written
// here so the order is the same on every platform and standard library (std::shuffle and
// std::uniform_int_distribution are implementation-defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cdt::train {

class GlobalSampler {
 public:
  // shuffle = false: the identity order (evaluation).
  GlobalSampler(size_t dataset_size, uint64_t seed, bool shuffle = true);

  size_t dataset_size() const { return size_; }

  // Samples the step starting at `pos` consumes: min(sum(batch), dataset_size - pos).
  size_t StepSamples(size_t pos, const std::vector<int>& per_rank_batch) const;

  // Rank `rank`'s share of that step. A short last step is split in proportion to the batches
  // (largest remainders, ties to lower ranks), so every rank's share is fixed by the arguments.
  std::vector<int64_t> Indices(uint64_t epoch, size_t pos, const std::vector<int>& per_rank_batch,
                               int rank) const;

  // How many samples each rank gets in that step (sums to StepSamples).
  std::vector<int> Shares(size_t pos, const std::vector<int>& per_rank_batch) const;

  // The epoch's permutation. The reference is to a cache of the last epoch asked: valid until the
  // next call for another epoch.
  const std::vector<int64_t>& Permutation(uint64_t epoch) const;

 private:
  size_t size_;
  uint64_t seed_;
  bool shuffle_;
  mutable uint64_t cached_epoch_ = UINT64_MAX;
  mutable std::vector<int64_t> cached_;
};

}  // namespace cdt::train
