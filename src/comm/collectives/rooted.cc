// The rooted collectives: reduce to a root, gather(v) to it, scatter(v) from it.
//
// Reduce. Small messages (< kPipelineMinBytes): a binomial tree over relative index
// rel = (i - root) mod p — a rank receives and combines the partial results of rel + m for each
// m = 1, 2, 4, ... below its lowest set bit, then sends its own to rel - lowbit(rel): lg(p) steps of
// the whole message. Large messages: the ring reduce-scatter phase (every link carries (p-1)/p of
// the message once), then every rank sends its reduced block straight to the root: bandwidth
// optimal, ~2 S/B, as MPICH's and Open MPI's reduce for long messages (Rabenseifner's reduce-scatter
// + gather). Every rank's buffer is working memory (the communicator hands the ranks other than
// the root a copy, so that the caller's buffer is left as it was).
//
// Gather(v) and scatter(v): the root exchanges with every other rank at once (its link carries
// each block once, which no tree improves); the others send or receive one block.
#include <cstring>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/reduce.h"

namespace cdt {

namespace {

constexpr size_t kPipelineMinBytes = 256 << 10;

void BinomialReduce(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                    int root) {
  const int p = group.size();
  const int rel = (group.me - root + p) % p;
  auto real = [&](int r) { return group.peer((r + root) % p); };
  const size_t bytes = buf.count * buf.elem();
  char* acc = static_cast<char*>(buf.data);
  char* tmp = static_cast<char*>(ctx.scratch.Get(bytes));
  for (int mask = 1; mask < p; mask <<= 1) {
    if (rel & mask) {
      Transfer t = Transfer::Send(real(rel - mask), acc, bytes);
      ctx.mesh.Exchange(&t, 1, ctx.label);
      return;
    }
    if (rel + mask < p) {
      Transfer t = Transfer::Recv(real(rel + mask), tmp, bytes);
      ctx.mesh.Exchange(&t, 1, ctx.label);
      ReduceInto(acc, tmp, buf.count, buf.dtype, buf.op);
    }
  }
}

void ReduceScatterThenGather(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                             int root) {
  const int p = group.size();
  const bool at_root = group.me == root;
  const ReduceBuffer& work = buf;
  const std::vector<size_t> offsets = BalancedOffsets(buf.count, p);
  RingReduceScatterPhase(ctx, group, work, offsets);
  std::vector<Transfer> x;
  auto block = [&](int i) {
    return (offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]) * buf.elem();
  };
  if (at_root) {
    for (int i = 0; i < p; ++i)
      if (i != root && block(i) > 0)
        x.push_back(Transfer::Recv(group.peer(i), work.at(offsets[static_cast<size_t>(i)]), block(i)));
  } else if (block(group.me) > 0) {
    x.push_back(Transfer::Send(group.peer(root), work.at(offsets[static_cast<size_t>(group.me)]),
                               block(group.me)));
  }
  Run(ctx, x);
}

}  // namespace

void Reduce(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf, int root_index) {
  if (group.size() == 1 || buf.count == 0) return;
  if (buf.count * buf.elem() < kPipelineMinBytes || buf.count < static_cast<size_t>(group.size()))
    BinomialReduce(ctx, group, buf, root_index);
  else
    ReduceScatterThenGather(ctx, group, buf, root_index);
}

void Gatherv(CollectiveContext& ctx, const Group& group, const void* input, void* output,
             size_t elem, const std::vector<size_t>& offsets, int root_index) {
  const size_t me = static_cast<size_t>(group.me);
  const size_t mine = (offsets[me + 1] - offsets[me]) * elem;
  std::vector<Transfer> x;
  if (group.me == root_index) {
    char* out = static_cast<char*>(output);
    if (mine > 0) std::memmove(out + offsets[me] * elem, input, mine);
    for (int i = 0; i < group.size(); ++i) {
      const size_t at = offsets[static_cast<size_t>(i)];
      const size_t len = (offsets[static_cast<size_t>(i) + 1] - at) * elem;
      if (i != root_index && len > 0) x.push_back(Transfer::Recv(group.peer(i), out + at * elem, len));
    }
  } else if (mine > 0) {
    x.push_back(Transfer::Send(group.peer(root_index), input, mine));
  }
  Run(ctx, x);
}

void Scatterv(CollectiveContext& ctx, const Group& group, const void* input, void* output,
              size_t elem, const std::vector<size_t>& offsets, int root_index) {
  const size_t me = static_cast<size_t>(group.me);
  const size_t mine = (offsets[me + 1] - offsets[me]) * elem;
  std::vector<Transfer> x;
  if (group.me == root_index) {
    const char* in = static_cast<const char*>(input);
    for (int i = 0; i < group.size(); ++i) {
      const size_t at = offsets[static_cast<size_t>(i)];
      const size_t len = (offsets[static_cast<size_t>(i) + 1] - at) * elem;
      if (i != root_index && len > 0) x.push_back(Transfer::Send(group.peer(i), in + at * elem, len));
    }
    Run(ctx, x);  // before the local copy: `input` and `output` may overlap at the root
    if (mine > 0) std::memmove(output, in + offsets[me] * elem, mine);
    return;
  }
  if (mine > 0) x.push_back(Transfer::Recv(group.peer(root_index), output, mine));
  Run(ctx, x);
}

}  // namespace cdt
