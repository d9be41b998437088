#include "topology/bucket_size.h"

#include <algorithm>
#include <limits>

namespace cdt::topology {

namespace {

double BestUs(const CostModel& m, double bytes) {
  double best = std::numeric_limits<double>::infinity();
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                               AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree,
                               AllreduceAlgorithm::kHierarchical})
    best = std::min(best, m.PredictUs(a, bytes));
  return best;
}

}  // namespace

size_t RecommendedBucketBytes(const CostModel& model, double efficiency) {
  if (model.shape.world() < 2) return kMaxBucketBytes;  // nothing to overlap
  const double big = double(1 << 30);
  const double full_rate = big / BestUs(model, big);  // bytes per microsecond
  for (size_t n = kMinBucketBytes; n < kMaxBucketBytes; n *= 2)
    if (static_cast<double>(n) / BestUs(model, static_cast<double>(n)) >= efficiency * full_rate) return n;
  return kMaxBucketBytes;
}

}  // namespace cdt::topology
