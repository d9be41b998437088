// Dissemination barrier (Hensgen, Finkel & Manber 1988): in round r each rank sends one byte to
// index + 2^r and receives one from index - 2^r. After ceil(lg p) rounds every rank has heard,
// directly or transitively, from every other, so no rank leaves before all have arrived.
#include "comm/collectives/algorithms.h"

namespace cdt {

void Barrier(CollectiveContext& ctx, const Group& group) {
  const int p = group.size();
  char out = 1;
  char in = 0;
  for (int d = 1; d < p; d <<= 1) {
    Transfer t[2] = {Transfer::Send(group.peer((group.me + d) % p), &out, 1),
                     Transfer::Recv(group.peer((group.me - d + p) % p), &in, 1)};
    ctx.mesh.Exchange(t, 2, ctx.label);
  }
}

}  // namespace cdt
