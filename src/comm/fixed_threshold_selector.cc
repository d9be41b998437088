#include "cdt/allreduce_selector.h"

namespace cdt {

namespace {

class FixedThresholdSelector : public AllreduceSelector {
 public:
  explicit FixedThresholdSelector(FixedThresholds t) : t_(t) {}

  AllreduceAlgorithm Select(const AllreduceShape& s) const override {
    if (s.shared_memory && s.max_ranks_per_node > 1) return AllreduceAlgorithm::kHierarchical;
    if (s.num_nodes > 1 && s.max_ranks_per_node > 1 && s.bytes >= t_.hier_min_bytes)
      return AllreduceAlgorithm::kHierarchical;
    if (s.bytes < t_.rd_max_bytes) return AllreduceAlgorithm::kRecursiveDoubling;
    if (s.bytes < t_.tree_max_bytes) return AllreduceAlgorithm::kTree;
    if (s.bytes < t_.rhd_max_bytes) return AllreduceAlgorithm::kHalvingDoubling;
    return AllreduceAlgorithm::kRing;
  }
  // Near a threshold the neighbouring size class's algorithm is the natural rival: the thresholds
  // were measured on one machine and move with the hardware.
  AllreduceAlgorithm RunnerUp(const AllreduceShape& s) const override {
    const AllreduceAlgorithm mine = Select(s);
    for (size_t neighbour : {s.bytes * 2, s.bytes / 2}) {
      AllreduceShape n = s;
      n.bytes = neighbour;
      if (AllreduceAlgorithm other = Select(n); other != mine) return other;
    }
    return AllreduceAlgorithm::kAuto;
  }
  std::string name() const override { return "fixed-thresholds"; }

 private:
  FixedThresholds t_;
};

}  // namespace

std::shared_ptr<AllreduceSelector> MakeFixedThresholdSelector(FixedThresholds thresholds) {
  return std::make_shared<FixedThresholdSelector>(thresholds);
}

}  // namespace cdt
