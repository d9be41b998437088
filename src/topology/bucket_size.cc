#include "topology/bucket_size.h"

namespace cdt::topology {

size_t RecommendedBucketBytes(const CostModel& model, double efficiency) {
  if (model.shape.world() < 2) return kMaxBucketBytes;  // nothing to overlap
  const double big = double(1 << 30);
  const double full_rate = big / BestAllreduceUs(model, big);  // bytes per microsecond
  for (size_t n = kMinBucketBytes; n < kMaxBucketBytes; n *= 2)
    if (static_cast<double>(n) / BestAllreduceUs(model, static_cast<double>(n)) >=
        efficiency * full_rate)
      return n;
  return kMaxBucketBytes;
}

}  // namespace cdt::topology
