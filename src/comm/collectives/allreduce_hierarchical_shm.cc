// The hierarchical allreduce with its intra-node steps in the node's shared memory (issue 32;
// anchors: Open MPI's coll/sm and xhc, MPICH's shared-memory collectives, NCCL's SHM transport).
//
// The buffer goes through in chunks of ctx.hier_chunk_bytes (at most the arena's slot size). For each chunk, with k ranks on this
// node, P shards and the ownership of allreduce_hierarchical.cc:
//  1. Every rank copies its chunk into its slot and arrives at the barrier.
//  2. The owner of shard s reduces it straight from the k slots, in local-rank order — the same
//     order whoever runs it and however the ranks arrived, so the result is identical on every
//     rank and from one run to the next (the TCP version adds copies in landing order).
//  3. Several nodes: each owned shard is allreduced with its owners on the other nodes over TCP.
//  4. The owner writes its reduced shards back into its own slot and arrives again; every rank
//     copies the shards it does not own from their owners' slots.
// The slots alternate between two sets from one use to the next: a rank writes a set again only
// after the barrier of the use in between, which no rank passes before it has finished reading
// that set. Small single-node buffers (kOneBarrierBytes) take one barrier instead of two: every
// rank reduces the whole chunk from the k slots, in the same order.
// Per rank and chunk of C bytes this moves ~3C through memory (copy in, read k slices of C/k,
// write C/k back, copy (k-1)C/k out), where a TCP ring moves each byte through two socket copies
// per step.
#include <cstring>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "common/check.h"
#include "comm/collectives/node_split.h"
#include "comm/reduce.h"
#include "comm/transport/node_arena.h"

namespace cdt {

namespace {

// Up to this many bytes a single-node chunk is reduced whole by every rank after one barrier: k
// reads of the chunk cost less than a second barrier's wake-ups.
constexpr size_t kOneBarrierBytes = 64 << 10;

// dst = slots[0] + slots[1] + ... over `count` elements at byte `offset` of every slot, in member
// order; dst already holds member 0's data when `dst_is_first`.
void ReduceSlots(const shm::NodeArena& arena, int set, size_t offset, char* dst, size_t count,
                 const ReduceBuffer& buf, bool dst_is_first) {
  const size_t bytes = count * buf.elem();
  if (!dst_is_first) std::memcpy(dst, arena.slot(set, 0) + offset, bytes);
  for (int q = 1; q < arena.members(); ++q)
    ReduceInto(dst, arena.slot(set, q) + offset, count, buf.dtype, buf.op);
}

void ShmChunk(CollectiveContext& ctx, const Group& group, const NodeSplit& split,
              const ReduceBuffer& buf) {
  shm::NodeArena& arena = *ctx.arena;
  const size_t elem = buf.elem();
  const size_t bytes = buf.count * elem;
  const int set = arena.NextSet();
  std::memcpy(arena.slot(set, arena.me()), buf.data, bytes);
  ArenaBarrier(ctx, arena);
  if (split.nodes.size() == 1 && bytes <= kOneBarrierBytes) {
    ReduceSlots(arena, set, 0, static_cast<char*>(buf.data), buf.count, buf, arena.me() == 0);
    return;
  }
  const std::vector<size_t> shard = BalancedOffsets(buf.count, split.P);
  for (int s = split.my_local; s < split.P; s += split.k)
    ReduceSlots(arena, set, shard[s] * elem, buf.at(shard[s]), shard[s + 1] - shard[s], buf,
                split.my_local == 0);
  AllreduceShardsAcrossNodes(ctx, group, split, buf, shard);
  for (int s = split.my_local; s < split.P; s += split.k)
    std::memcpy(arena.slot(set, arena.me()) + shard[s] * elem, buf.at(shard[s]),
                (shard[s + 1] - shard[s]) * elem);
  ArenaBarrier(ctx, arena);
  for (int s = 0; s < split.P; ++s)
    if (!split.owns(s))
      std::memcpy(buf.at(shard[s]), arena.slot(set, s % split.k) + shard[s] * elem,
                  (shard[s + 1] - shard[s]) * elem);
}

}  // namespace

void AllreduceHierarchicalShm(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                              const std::vector<int>& node_of_rank) {
  if (group.size() == 1 || buf.count == 0) return;
  const NodeSplit split(group, node_of_rank);
  // The arena's members are this node's ranks of the world, in rank order: the node's group
  // indices of a world group.
  CDT_CHECK_EQ(split.k, ctx.arena->members());
  CDT_CHECK_EQ(split.my_local, ctx.arena->me());
  CDT_CHECK(ctx.hier_chunk_bytes <= ctx.arena->slot_bytes());
  const size_t chunk = std::max<size_t>(1, ctx.hier_chunk_bytes / buf.elem());
  for (size_t first = 0; first < buf.count; first += chunk) {
    ReduceBuffer part{buf.at(first), std::min(chunk, buf.count - first), buf.dtype, buf.op};
    ShmChunk(ctx, group, split, part);
  }
}

}  // namespace cdt
