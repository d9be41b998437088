#include "train/global_sampler.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "cdt/error.h"

namespace cdt::train {

namespace {

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound), bound >= 1 (rejection: no modulo bias).
uint64_t Below(uint64_t& state, uint64_t bound) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do x = SplitMix64(state);
  while (x >= limit);
  return x % bound;
}

}  // namespace

GlobalSampler::GlobalSampler(size_t dataset_size, uint64_t seed, bool shuffle)
    : size_(dataset_size), seed_(seed), shuffle_(shuffle) {}

const std::vector<int64_t>& GlobalSampler::Permutation(uint64_t epoch) const {
  if (cached_epoch_ == epoch && cached_.size() == size_) return cached_;
  cached_.resize(size_);
  std::iota(cached_.begin(), cached_.end(), int64_t{0});
  if (shuffle_) {
    uint64_t state = seed_ * 0x100000001b3ull ^ (epoch + 1) * 0x9e3779b97f4a7c15ull;
    for (size_t i = size_; i > 1; --i) std::swap(cached_[i - 1], cached_[Below(state, i)]);
  }
  cached_epoch_ = epoch;
  return cached_;
}

size_t GlobalSampler::StepSamples(size_t pos, const std::vector<int>& batch) const {
  const size_t want = static_cast<size_t>(std::accumulate(batch.begin(), batch.end(), int64_t{0}));
  return pos >= size_ ? 0 : std::min(want, size_ - pos);
}

std::vector<int> GlobalSampler::Shares(size_t pos, const std::vector<int>& batch) const {
  for (size_t r = 0; r < batch.size(); ++r)
    if (batch[r] < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "sampler: rank " + std::to_string(r) + " has a negative batch size");
  const size_t total = static_cast<size_t>(std::accumulate(batch.begin(), batch.end(), int64_t{0}));
  const size_t n = StepSamples(pos, batch);
  std::vector<int> share(batch.begin(), batch.end());
  if (n == total || total == 0) return share;
  // Short last step: floor of the proportional share, then the largest remainders.
  std::vector<std::pair<size_t, size_t>> rem;  // (remainder numerator, rank) for sorting
  size_t given = 0;
  for (size_t r = 0; r < batch.size(); ++r) {
    const size_t exact = static_cast<size_t>(batch[r]) * n;
    share[r] = static_cast<int>(exact / total);
    given += static_cast<size_t>(share[r]);
    rem.push_back({exact % total, r});
  }
  std::stable_sort(rem.begin(), rem.end(), [](auto a, auto b) { return a.first > b.first; });
  for (size_t i = 0; given < n; ++i, ++given) ++share[rem[i].second];
  return share;
}

std::vector<int64_t> GlobalSampler::Indices(uint64_t epoch, size_t pos,
                                            const std::vector<int>& batch, int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= batch.size())
    throw Error(ErrorCode::kInvalidArgument, "sampler: rank " + std::to_string(rank) +
                                                 " outside a world of " +
                                                 std::to_string(batch.size()));
  const std::vector<int> share = Shares(pos, batch);
  size_t start = pos;
  for (int r = 0; r < rank; ++r) start += static_cast<size_t>(share[static_cast<size_t>(r)]);
  const std::vector<int64_t>& perm = Permutation(epoch);
  const size_t count = static_cast<size_t>(share[static_cast<size_t>(rank)]);
  return std::vector<int64_t>(perm.begin() + static_cast<long>(start),
                              perm.begin() + static_cast<long>(start + count));
}

}  // namespace cdt::train
