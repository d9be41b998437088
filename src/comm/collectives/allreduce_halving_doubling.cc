// Recursive halving-doubling allreduce (Rabenseifner; Gloo's allreduce_halving_doubling).
//
// On pof2 active ranks (non-powers of two fold in/out, power_of_two_fold.h):
//  1. Reduce-scatter by recursive halving: for distance d = pof2/2, pof2/4, ..., 1 the rank pairs
//     with index ^ d. Both hold the same range [lo, hi); the lower index keeps [lo, mid), the upper
//     keeps [mid, hi); each sends the half it gives up and reduces the half it keeps.
//  2. Allgather by recursive doubling, replaying the halvings backwards: each sends its range and
//     receives its partner's sibling range, so ranges double until every rank holds the whole
//     buffer.
// 2·lg(p) steps moving 2(p-1)/p·S bytes: ring's bandwidth with far fewer steps, so it is the
// medium-size choice. Ranges are cut at element granularity, so counts below pof2 work (some halves
// are empty).
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/collectives/power_of_two_fold.h"
#include "comm/reduce.h"

namespace cdt {

void AllreduceHalvingDoubling(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf) {
  if (group.size() == 1 || buf.count == 0) return;
  PowerOfTwoFold fold(group.size(), group.me);
  fold.FoldIn(ctx, group, buf);
  if (fold.new_index >= 0) {
    const size_t elem = buf.elem();
    const int me = fold.new_index;
    char* tmp = static_cast<char*>(ctx.scratch.Get((buf.count / 2 + 1) * elem));
    struct Range {
      size_t lo, hi;
    };
    std::vector<Range> history;  // range held before each halving step
    Range r{0, buf.count};
    for (int d = fold.pof2 / 2; d >= 1; d /= 2) {
      const int partner = group.peer(fold.GroupIndex(me ^ d));
      const size_t mid = r.lo + (r.hi - r.lo) / 2;
      const bool lower = (me & d) == 0;
      Range keep = lower ? Range{r.lo, mid} : Range{mid, r.hi};
      Range give = lower ? Range{mid, r.hi} : Range{r.lo, mid};
      Transfer t[2] = {Transfer::Send(partner, buf.at(give.lo), (give.hi - give.lo) * elem),
                       Transfer::Recv(partner, tmp, (keep.hi - keep.lo) * elem)};
      ctx.mesh.Exchange(t, 2, ctx.label);
      ReduceInto(buf.at(keep.lo), tmp, keep.hi - keep.lo, buf.dtype, buf.op);
      history.push_back(r);
      r = keep;
    }
    for (int d = 1; d < fold.pof2; d *= 2) {
      const int partner = group.peer(fold.GroupIndex(me ^ d));
      Range parent = history.back();
      history.pop_back();
      const bool lower = (me & d) == 0;  // decided which half we kept at this distance
      Range sibling = lower ? Range{r.hi, parent.hi} : Range{parent.lo, r.lo};
      Transfer t[2] = {
          Transfer::Send(partner, buf.at(r.lo), (r.hi - r.lo) * elem),
          Transfer::Recv(partner, buf.at(sibling.lo), (sibling.hi - sibling.lo) * elem)};
      ctx.mesh.Exchange(t, 2, ctx.label);
      r = parent;
    }
  }
  fold.FoldOut(ctx, group, buf);
}

}  // namespace cdt
