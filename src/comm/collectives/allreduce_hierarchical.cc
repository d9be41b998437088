// Two-level (hierarchical) allreduce: what Horovod's hierarchical allreduce and NCCL/HCCL's
// multi-level algorithms do, generalised to nodes with unequal rank counts.
//
// Let the group span N nodes, node n holding k_n ranks, and P = max k_n. The buffer is cut into P
// balanced shards. On node n, shard s belongs to local rank (s mod k_n) — its owner; with equal k
// every rank owns exactly one shard, with unequal k the ranks of smaller nodes own several.
//  1. Intra-node reduce-scatter (direct): every local rank sends each shard it does not own to that
//     shard's owner; owners add the k_n - 1 copies they receive in local-rank order, each as soon
//     as it and those before it have landed (added in landing order, one call's sum rounded
//     differently from the next whenever copies raced).
//  2. Inter-node allreduce, per shard: the N owners of shard s (one per node) allreduce it among
//     themselves — ring for large shards, recursive doubling for small. Different shards run in
//     parallel on different ranks; a rank owning several does them in increasing shard order, so
//     every wait points to a smaller shard and there is no deadlock.
//  3. Intra-node allgather (direct): each owner sends its reduced shards to the other local ranks.
// Buffers above 4 MiB run the three steps chunk by chunk (see kHierarchicalChunkBytes).
// Only step 2 crosses the slow inter-node links, and it carries S·2(N-1)/N per node in total — the
// 2(n-1)/n of a flat ring over all n ranks is what this saves on a cluster whose nodes are linked
// more slowly than their ranks are.
#include <algorithm>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/collectives/node_split.h"
#include "comm/collectives/ordered_reduce.h"
#include "comm/reduce.h"

namespace cdt {

namespace {

constexpr size_t kInnerRingMinBytes = 64 << 10;  // below this the per-shard allreduce uses rd

struct ShardReducer {
  char* target;
  DataType dtype;
  ReduceOp op;
  size_t elem;
  OrderedReduce order;  // the k - 1 copies, one after the other in the landing area, local order
};

void ReduceShardCopy(void* arg, const Transfer& t) {
  auto* r = static_cast<ShardReducer*>(arg);
  r->order.Landed(t.data, [&](const char* copy) {
    ReduceInto(r->target, copy, t.bytes / r->elem, r->dtype, r->op);
  });
}

}  // namespace

void AllreduceHierarchicalChunk(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                                const std::vector<int>& node_of_rank) {
  if (group.size() == 1 || buf.count == 0) return;
  const NodeSplit split(group, node_of_rank);
  const std::vector<int>& local = split.local();
  const int k = split.k;
  const int P = split.P;
  const std::vector<size_t> shard = BalancedOffsets(buf.count, P);
  const size_t elem = buf.elem();
  auto shard_bytes = [&](int s) { return (shard[s + 1] - shard[s]) * elem; };

  // 1. Intra-node reduce-scatter.
  std::vector<Transfer> x;
  std::vector<ShardReducer> reducers(static_cast<size_t>(P));
  if (k > 1) {
    size_t landing_bytes = 0;
    for (int s = 0; s < P; ++s)
      if (split.owns(s)) landing_bytes += shard_bytes(s) * static_cast<size_t>(k - 1);
    char* landing = static_cast<char*>(ctx.scratch.Get(landing_bytes));
    for (int s = 0; s < P; ++s) {
      if (!split.owns(s)) {
        x.push_back(Transfer::Send(split.owner(group, split.my_node, s), buf.at(shard[s]),
                                   shard_bytes(s)));
        continue;
      }
      reducers[s] = {buf.at(shard[s]), buf.dtype, buf.op, elem, {}};
      reducers[s].order.Reset(landing, shard_bytes(s), k - 1);
      for (int q = 0; q < k; ++q) {
        if (q == split.my_local) continue;
        Transfer r = Transfer::Recv(group.peer(local[q]), landing, shard_bytes(s));
        r.on_complete = &ReduceShardCopy;
        r.arg = &reducers[s];
        x.push_back(r);
        landing += shard_bytes(s);
      }
    }
    Run(ctx, x);
  }

  // 2. Inter-node allreduce of each owned shard among its owners on every node.
  AllreduceShardsAcrossNodes(ctx, group, split, buf, shard);

  // 3. Intra-node allgather.
  if (k > 1) {
    x.clear();
    for (int s = 0; s < P; ++s) {
      if (split.owns(s)) {
        for (int q = 0; q < k; ++q)
          if (q != split.my_local)
            x.push_back(Transfer::Send(group.peer(local[q]), buf.at(shard[s]), shard_bytes(s)));
      } else {
        x.push_back(Transfer::Recv(split.owner(group, split.my_node, s), buf.at(shard[s]),
                                   shard_bytes(s)));
      }
    }
    Run(ctx, x);
  }
}

void AllreduceShardsAcrossNodes(CollectiveContext& ctx, const Group& group, const NodeSplit& split,
                                const ReduceBuffer& buf, const std::vector<size_t>& shard) {
  if (split.nodes.size() < 2) return;
  for (int s = split.my_local; s < split.P; s += split.k) {
    ReduceBuffer part{buf.at(shard[s]), shard[s + 1] - shard[s], buf.dtype, buf.op};
    if (part.count * buf.elem() >= kInnerRingMinBytes)
      AllreduceRing(ctx, split.Owners(group, s), part);
    else
      AllreduceRecursiveDoubling(ctx, split.Owners(group, s), part);
  }
}

void AllreduceHierarchical(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                           const std::vector<int>& node_of_rank) {
  if (ctx.arena && group.size() == ctx.mesh.size()) {
    AllreduceHierarchicalShm(ctx, group, buf, node_of_rank);
    return;
  }
  const size_t chunk = std::max<size_t>(1, ctx.hier_chunk_bytes / buf.elem());
  for (size_t first = 0; first < buf.count; first += chunk) {
    ReduceBuffer part{buf.at(first), std::min(chunk, buf.count - first), buf.dtype, buf.op};
    AllreduceHierarchicalChunk(ctx, group, part, node_of_rank);
  }
}

}  // namespace cdt
