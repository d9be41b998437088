// TopologyPlanner: the communicator's AllreduceSelector built from a measured cost model. It
// evaluates every algorithm at every power-of-two size from 1 KiB to 1 GiB, keeps the fastest,
// and merges neighbouring sizes with the same winner into ranges. Every rank builds it from the
// same (broadcast) measurements, so every rank picks the same algorithm for the same size.
//
// On a single node the α-β model does not rank the algorithms correctly (every copy shares the
// same two cores and caches; it predicted the direct hierarchical exchange fastest at every size,
// while the ring is 1.5x faster from 4 MiB): there the plan follows the measured fixed thresholds
// (FixedThresholds), with the model's prediction reported beside each range.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cdt/allreduce_selector.h"
#include "topology/cost_model.h"

namespace cdt::topology {

struct PlanEntry {
  size_t min_bytes = 0;
  size_t max_bytes = 0;  // inclusive
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
  double predicted_us = 0;  // at min_bytes (1 KiB for the first range)
};

// Two candidates whose predictions are within this factor are both timed on the first calls
// (online autotuning): on the emulated cluster the model is within 10% from 1 MiB up, but far off
// for small messages (docs/benchmarks.md).
inline constexpr double kAutotuneMargin = 1.25;

class TopologyPlanner : public AllreduceSelector {
 public:
  explicit TopologyPlanner(CostModel model);

  AllreduceAlgorithm Select(const AllreduceShape& shape) const override;
  AllreduceAlgorithm RunnerUp(const AllreduceShape& shape) const override;
  std::string name() const override { return "topology-planner"; }

  const std::vector<PlanEntry>& plan() const { return plan_; }
  const CostModel& model() const { return model_; }

 private:
  CostModel model_;
  std::vector<PlanEntry> plan_;  // sorted, contiguous, covering 0 .. SIZE_MAX
  // Per power-of-two size class from 1 KiB (index 0) to 1 GiB: the runner-up worth timing, or
  // kAuto.
  std::vector<AllreduceAlgorithm> runner_up_;
};

}  // namespace cdt::topology
