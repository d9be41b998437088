// Non-power-of-two handling shared by recursive doubling and halving-doubling
// (Thakur, Rabenseifner & Gropp 2005, §4): with p ranks and pof2 the largest power of two <= p,
// rem = p - pof2. Among the first 2·rem ranks, each even rank hands its whole buffer to the odd
// rank after it and sits out; the pof2 remaining ranks run the power-of-two algorithm under new
// indices; at the end every odd rank returns the result to the even rank it absorbed.
#pragma once

#include "comm/collectives/context.h"

namespace cdt {

struct PowerOfTwoFold {
  int pof2 = 1;
  int rem = 0;
  int new_index = -1;  // index among the pof2 active ranks, -1 if this rank sits out

  PowerOfTwoFold(int p, int me);
  // Group index of the active rank with new index `n`.
  int GroupIndex(int n) const { return n < rem ? 2 * n + 1 : n + rem; }

  // Step 1: even ranks below 2·rem send everything to me+1, which reduces it.
  void FoldIn(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf) const;
  // Last step: odd ranks below 2·rem send the result back to me-1.
  void FoldOut(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf) const;

 private:
  int me_;
};

}  // namespace cdt
