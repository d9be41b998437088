#include "comm/collectives/power_of_two_fold.h"

#include "comm/reduce.h"

namespace cdt {

PowerOfTwoFold::PowerOfTwoFold(int p, int me) : me_(me) {
  while (pof2 * 2 <= p) pof2 *= 2;
  rem = p - pof2;
  if (me < 2 * rem)
    new_index = (me % 2 == 1) ? me / 2 : -1;
  else
    new_index = me - rem;
}

void PowerOfTwoFold::FoldIn(CollectiveContext& ctx, const Group& group,
                            const ReduceBuffer& buf) const {
  if (me_ >= 2 * rem) return;
  const size_t bytes = buf.count * buf.elem();
  if (me_ % 2 == 0) {
    Transfer t = Transfer::Send(group.peer(me_ + 1), buf.data, bytes);
    ctx.mesh.Exchange(&t, 1, ctx.label);
  } else {
    void* tmp = ctx.scratch.Get(bytes);
    Transfer t = Transfer::Recv(group.peer(me_ - 1), tmp, bytes);
    ctx.mesh.Exchange(&t, 1, ctx.label);
    ReduceInto(buf.data, tmp, buf.count, buf.dtype, buf.op);
  }
}

void PowerOfTwoFold::FoldOut(CollectiveContext& ctx, const Group& group,
                             const ReduceBuffer& buf) const {
  if (me_ >= 2 * rem) return;
  const size_t bytes = buf.count * buf.elem();
  Transfer t = (me_ % 2 == 0) ? Transfer::Recv(group.peer(me_ + 1), buf.data, bytes)
                              : Transfer::Send(group.peer(me_ - 1), buf.data, bytes);
  ctx.mesh.Exchange(&t, 1, ctx.label);
}

}  // namespace cdt
