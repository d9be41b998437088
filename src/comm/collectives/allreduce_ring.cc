// Ring allreduce: ring reduce-scatter followed by ring allgather over p balanced blocks
// (see ring_phases.cc for the schedule). 2(p-1) steps; each rank sends and receives 2(p-1)/p·S
// bytes, the minimum for any allreduce, so this is the algorithm of choice for large messages on a
// flat network. Latency grows with p, which is why small messages go to recursive doubling.
#include "comm/collectives/algorithms.h"

namespace cdt {

void AllreduceRing(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf) {
  if (group.size() == 1 || buf.count == 0) return;
  std::vector<size_t> offsets = BalancedOffsets(buf.count, group.size());
  // Rotate ownership so rank i ends the reduce-scatter owning block i (ring_phases.cc).
  RingReduceScatterPhase(ctx, group, buf, offsets);
  RingAllgatherPhase(ctx, group, buf.data, buf.elem(), offsets);
}

}  // namespace cdt
