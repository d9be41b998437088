// Recursive doubling allreduce: for mask = 1, 2, 4, ... < pof2, exchange the whole buffer with the
// rank whose index differs in that bit and reduce. lg(p) steps of S bytes each: the fewest
// round-trips of any algorithm, so it wins for small messages where latency dominates; it moves
// lg(p)·S bytes per rank, so it loses for large ones. Non-powers of two fold in and out
// (power_of_two_fold.h). Both partners compute a+b in the same order-independent way (IEEE addition
// is commutative), so every rank ends with bit-identical results.
#include "comm/collectives/algorithms.h"
#include "comm/collectives/power_of_two_fold.h"
#include "comm/reduce.h"

namespace cdt {

void AllreduceRecursiveDoubling(CollectiveContext& ctx, const Group& group,
                                const ReduceBuffer& buf) {
  if (group.size() == 1 || buf.count == 0) return;
  PowerOfTwoFold fold(group.size(), group.me);
  fold.FoldIn(ctx, group, buf);
  if (fold.new_index >= 0) {
    const size_t bytes = buf.count * buf.elem();
    void* tmp = ctx.scratch.Get(bytes);
    for (int mask = 1; mask < fold.pof2; mask <<= 1) {
      const int partner = group.peer(fold.GroupIndex(fold.new_index ^ mask));
      Transfer t[2] = {Transfer::Send(partner, buf.data, bytes),
                       Transfer::Recv(partner, tmp, bytes)};
      ctx.mesh.Exchange(t, 2, ctx.label);
      ReduceInto(buf.data, tmp, buf.count, buf.dtype, buf.op);
    }
  }
  fold.FoldOut(ctx, group, buf);
}

}  // namespace cdt
