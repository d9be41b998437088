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
// Buffers above 4 MiB run the three steps chunk by chunk (see kChunkBytes).
// Only step 2 crosses the slow inter-node links, and it carries S·2(N-1)/N per node in total — the
// 2(n-1)/n of a flat ring over all n ranks is what this saves on a cluster whose nodes are linked
// more slowly than their ranks are.
#include <algorithm>
#include <map>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/collectives/ordered_reduce.h"
#include "comm/reduce.h"

namespace cdt {

namespace {

constexpr size_t kInnerRingMinBytes = 64 << 10;  // below this the per-shard allreduce uses rd
// Large buffers go through the three steps 4 MiB at a time. Unchunked, the intra-node steps of a
// 64 MiB allreduce ran out of cache and slowed the whole to 0.104 GB/s on the emulated 1 Gbit/s
// cluster; in 4 MiB chunks it holds 0.119 GB/s (95% of the link) from 4 to 64 MiB
// (docs/benchmarks.md, "Emulated cluster").
constexpr size_t kChunkBytes = 4 << 20;

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
  // Local groups, nodes ordered by their first rank in the group.
  std::map<int, int> node_index;        // node id -> dense index
  std::vector<std::vector<int>> nodes;  // group indices per node
  for (int i = 0; i < group.size(); ++i) {
    int id = node_of_rank[static_cast<size_t>(group.peer(i))];
    auto [it, inserted] = node_index.emplace(id, static_cast<int>(nodes.size()));
    if (inserted) nodes.emplace_back();
    nodes[static_cast<size_t>(it->second)].push_back(i);
  }
  const int my_node = node_index.at(node_of_rank[static_cast<size_t>(group.peer(group.me))]);
  const std::vector<int>& local = nodes[static_cast<size_t>(my_node)];
  const int k = static_cast<int>(local.size());
  const int my_local =
      static_cast<int>(std::find(local.begin(), local.end(), group.me) - local.begin());
  int P = 0;
  for (const auto& n : nodes) P = std::max(P, static_cast<int>(n.size()));
  const std::vector<size_t> shard = BalancedOffsets(buf.count, P);
  const size_t elem = buf.elem();
  auto shard_bytes = [&](int s) { return (shard[s + 1] - shard[s]) * elem; };
  auto owner_on = [&](const std::vector<int>& node, int s) {
    return group.peer(node[static_cast<size_t>(s % static_cast<int>(node.size()))]);
  };

  // 1. Intra-node reduce-scatter.
  std::vector<Transfer> x;
  std::vector<ShardReducer> reducers(static_cast<size_t>(P));
  if (k > 1) {
    size_t landing_bytes = 0;
    for (int s = 0; s < P; ++s)
      if (s % k == my_local) landing_bytes += shard_bytes(s) * static_cast<size_t>(k - 1);
    char* landing = static_cast<char*>(ctx.scratch.Get(landing_bytes));
    for (int s = 0; s < P; ++s) {
      if (s % k != my_local) {
        x.push_back(Transfer::Send(owner_on(local, s), buf.at(shard[s]), shard_bytes(s)));
        continue;
      }
      reducers[s] = {buf.at(shard[s]), buf.dtype, buf.op, elem, {}};
      reducers[s].order.Reset(landing, shard_bytes(s), k - 1);
      for (int q = 0; q < k; ++q) {
        if (q == my_local) continue;
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
  if (nodes.size() > 1) {
    for (int s = my_local; s < P; s += k) {
      Group inter;
      for (size_t n = 0; n < nodes.size(); ++n) {
        inter.ranks.push_back(owner_on(nodes[n], s));
        if (static_cast<int>(n) == my_node) inter.me = static_cast<int>(n);
      }
      ReduceBuffer part{buf.at(shard[s]), shard[s + 1] - shard[s], buf.dtype, buf.op};
      if (shard_bytes(s) >= kInnerRingMinBytes)
        AllreduceRing(ctx, inter, part);
      else
        AllreduceRecursiveDoubling(ctx, inter, part);
    }
  }

  // 3. Intra-node allgather.
  if (k > 1) {
    x.clear();
    for (int s = 0; s < P; ++s) {
      if (s % k == my_local) {
        for (int q = 0; q < k; ++q)
          if (q != my_local)
            x.push_back(Transfer::Send(group.peer(local[q]), buf.at(shard[s]), shard_bytes(s)));
      } else {
        x.push_back(Transfer::Recv(owner_on(local, s), buf.at(shard[s]), shard_bytes(s)));
      }
    }
    Run(ctx, x);
  }
}

void AllreduceHierarchical(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                           const std::vector<int>& node_of_rank) {
  const size_t chunk = std::max<size_t>(1, kChunkBytes / buf.elem());
  for (size_t first = 0; first < buf.count; first += chunk) {
    ReduceBuffer part{buf.at(first), std::min(chunk, buf.count - first), buf.dtype, buf.op};
    AllreduceHierarchicalChunk(ctx, group, part, node_of_rank);
  }
}

}  // namespace cdt
