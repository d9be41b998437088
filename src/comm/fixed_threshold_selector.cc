#include "cdt/allreduce_selector.h"

namespace cdt {

namespace {

class FixedThresholdSelector : public AllreduceSelector {
 public:
  explicit FixedThresholdSelector(FixedThresholds t) : t_(t) {}

  AllreduceAlgorithm Select(const AllreduceShape& s) const override {
    if (s.num_nodes > 1 && s.max_ranks_per_node > 1 && s.bytes >= t_.hier_min_bytes)
      return AllreduceAlgorithm::kHierarchical;
    if (s.bytes < t_.rd_max_bytes) return AllreduceAlgorithm::kRecursiveDoubling;
    if (s.bytes < t_.tree_max_bytes) return AllreduceAlgorithm::kTree;
    if (s.bytes < t_.rhd_max_bytes) return AllreduceAlgorithm::kHalvingDoubling;
    return AllreduceAlgorithm::kRing;
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
