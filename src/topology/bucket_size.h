// Gradient bucket size from the measured cost model (`train --adaptive-comm`).
//
// Small buckets overlap more of backward (the first launches earlier) but each pays the
// allreduce's fixed cost; big ones run at the link's full rate but launch late. The recommended
// size is the smallest power of two from 256 KiB to 64 MiB whose best allreduce the model
// predicts at >= `efficiency` of the rate it reaches on 1 GiB messages. On a 100 Mbit/s link that
// is the 256 KiB floor (every message is bandwidth-bound); on loopback it is larger.
#pragma once

#include <cstddef>

#include "topology/cost_model.h"

namespace cdt::topology {

inline constexpr size_t kMinBucketBytes = 256 << 10;
inline constexpr size_t kMaxBucketBytes = 64 << 20;

size_t RecommendedBucketBytes(const CostModel& model, double efficiency = 0.8);

}  // namespace cdt::topology
