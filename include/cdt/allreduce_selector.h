// AllreduceSelector: picks the allreduce algorithm for one call when the caller asks for kAuto.
//
// The communication core ships FixedThresholdSelector (thresholds measured on the reference
// machine, docs/benchmarks.md); the topology layer replaces it with a cost-model planner built from
// measured link parameters. Select() runs on the communicator's background thread for every kAuto
// allreduce, so it must be cheap and thread-safe for concurrent callers from different
// communicators.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "cdt/types.h"

namespace cdt {

struct AllreduceShape {
  size_t bytes = 0;
  DataType dtype = DataType::kFloat32;
  int world_size = 1;
  int num_nodes = 1;
  int max_ranks_per_node = 1;
  // The ranks of every node with several share a memory arena (comm/node_arena_setup.h): the
  // hierarchical allreduce then runs its intra-node steps in shared memory.
  bool shared_memory = false;
};

class AllreduceSelector {
 public:
  virtual ~AllreduceSelector() = default;
  // Never returns kAuto.
  virtual AllreduceAlgorithm Select(const AllreduceShape& shape) const = 0;
  // A second candidate close enough to Select()'s that only a measurement can tell them apart, or
  // kAuto when the choice is clear. The communicator then times both on the first calls of that
  // size class and keeps the faster (online autotuning; see comm/allreduce_autotuner.h).
  virtual AllreduceAlgorithm RunnerUp(const AllreduceShape& /*shape*/) const {
    return AllreduceAlgorithm::kAuto;
  }
  virtual std::string name() const = 0;
};

// Size thresholds in bytes: below rd_max_bytes recursive doubling, below tree_max_bytes the double
// binary tree, below rhd_max_bytes halving-doubling, else ring; on several nodes with several
// ranks each, hierarchical from hier_min_bytes up; wherever same-node ranks share memory,
// hierarchical at every size (docs/benchmarks.md, "Shared memory"). Defaults measured with 4 ranks on the reference
// machine (docs/benchmarks.md, "Choosing the defaults"); the topology planner replaces them.
struct FixedThresholds {
  size_t rd_max_bytes = 32 << 10;
  size_t tree_max_bytes = 256 << 10;
  size_t rhd_max_bytes = 2 << 20;
  // 2 emulated nodes x 2 ranks, 1 Gbit/s links: hier was the fastest at every size from 4 KiB
  // (docs/benchmarks.md, "Emulated cluster").
  size_t hier_min_bytes = 0;
};

std::shared_ptr<AllreduceSelector> MakeFixedThresholdSelector(FixedThresholds thresholds = {});

}  // namespace cdt
