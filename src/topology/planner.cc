#include "topology/planner.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace cdt::topology {

namespace {

constexpr int kMinLog2 = 10;  // 1 KiB
constexpr int kMaxLog2 = 30;  // 1 GiB

}  // namespace

TopologyPlanner::TopologyPlanner(CostModel model) : model_(std::move(model)) {
  const bool single_node = model_.shape.nodes() <= 1;
  const auto fixed = MakeFixedThresholdSelector();
  const AllreduceAlgorithm candidates[] = {
      AllreduceAlgorithm::kRecursiveDoubling, AllreduceAlgorithm::kTree,
      AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kRing,
      AllreduceAlgorithm::kHierarchical};
  for (int log2 = kMinLog2; log2 <= kMaxLog2; ++log2) {
    const size_t bytes = size_t{1} << log2;
    AllreduceAlgorithm best = AllreduceAlgorithm::kRing;
    AllreduceAlgorithm second = AllreduceAlgorithm::kAuto;
    double best_us = std::numeric_limits<double>::infinity();
    double second_us = best_us;
    if (single_node) {
      const AllreduceShape shape{bytes, DataType::kFloat32, model_.shape.world(), 1,
                                 model_.shape.max_ranks_per_node(), model_.shared_memory};
      best = fixed->Select(shape);
      second = fixed->RunnerUp(shape);
      best_us = model_.PredictUs(best, static_cast<double>(bytes));
    } else {
      for (AllreduceAlgorithm a : candidates) {
        const double t = model_.PredictUs(a, static_cast<double>(bytes));
        if (t < best_us) {
          second = best_us < std::numeric_limits<double>::infinity() ? best : second;
          second_us = best_us;
          best_us = t;
          best = a;
        } else if (t < second_us) {
          second_us = t;
          second = a;
        }
      }
      if (second_us > kAutotuneMargin * best_us) second = AllreduceAlgorithm::kAuto;
    }
    runner_up_.push_back(second);
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

AllreduceAlgorithm TopologyPlanner::RunnerUp(const AllreduceShape& shape) const {
  const int log2 = shape.bytes == 0 ? 0 : static_cast<int>(std::bit_width(shape.bytes)) - 1;
  const int index = std::clamp(log2, kMinLog2, kMaxLog2) - kMinLog2;
  return runner_up_[static_cast<size_t>(index)];
}

}  // namespace cdt::topology
