#include "topology/planner.h"

#include <limits>

namespace cdt::topology {

TopologyPlanner::TopologyPlanner(CostModel model) : model_(std::move(model)) {
  const bool single_node = model_.shape.nodes() <= 1;
  const auto fixed = MakeFixedThresholdSelector();
  const AllreduceAlgorithm candidates[] = {
      AllreduceAlgorithm::kRecursiveDoubling, AllreduceAlgorithm::kTree,
      AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kRing,
      AllreduceAlgorithm::kHierarchical};
  for (size_t bytes = 1024; bytes <= (size_t{1} << 30); bytes *= 2) {
    AllreduceAlgorithm best = AllreduceAlgorithm::kRing;
    double best_us = std::numeric_limits<double>::infinity();
    if (single_node) {
      best = fixed->Select({bytes, DataType::kFloat32, model_.shape.world(), 1,
                            model_.shape.max_ranks_per_node()});
      best_us = model_.PredictUs(best, static_cast<double>(bytes));
    } else {
      for (AllreduceAlgorithm a : candidates) {
        double t = model_.PredictUs(a, static_cast<double>(bytes));
        if (t < best_us) {
          best_us = t;
          best = a;
        }
      }
    }
    if (!plan_.empty() && plan_.back().algorithm == best) {
      plan_.back().max_bytes = 2 * bytes - 1;
      continue;
    }
    plan_.push_back({plan_.empty() ? 0 : bytes, 2 * bytes - 1, best, best_us});
  }
  plan_.back().max_bytes = std::numeric_limits<size_t>::max();
}

AllreduceAlgorithm TopologyPlanner::Select(const AllreduceShape& shape) const {
  for (const PlanEntry& e : plan_)
    if (shape.bytes <= e.max_bytes) return e.algorithm;
  return plan_.back().algorithm;
}

}  // namespace cdt::topology
