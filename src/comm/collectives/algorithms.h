// Entry points of the collective algorithms, one per file in this folder. Each runs on the calling
// thread over ctx.mesh among `group`, blocking until done, and throws cdt::Error on failure.
// Preconditions (checked by the Communicator): every rank of the group calls the same function with
// the same count/dtype/op/root.
#pragma once

#include <vector>

#include "comm/collectives/context.h"

namespace cdt {

// Allreduce, in place. kAvg is reduced as a sum; the caller divides (FinishAverage).
void AllreduceRing(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf);
void AllreduceRecursiveDoubling(CollectiveContext& ctx, const Group& group,
                                const ReduceBuffer& buf);
void AllreduceHalvingDoubling(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf);
void AllreduceTree(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf);
// node_of_rank: node index of every global rank (TcpMesh host ids grouped). Over the whole world
// with ctx.arena set, the intra-node steps run in shared memory (AllreduceHierarchicalShm).
void AllreduceHierarchical(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                           const std::vector<int>& node_of_rank);
void AllreduceHierarchicalShm(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                              const std::vector<int>& node_of_rank);

// Ring phases shared by allreduce, reduce-scatter and allgather (ring_phases.cc).
// `offsets` has group.size() + 1 entries (element offsets of each block in buf).
// After RingReduceScatterPhase, block `group.me` holds the reduction of that block over the group.
void RingReduceScatterPhase(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                            const std::vector<size_t>& offsets);
// Before: block group.me is final on each rank. After: every block is final on every rank.
void RingAllgatherPhase(CollectiveContext& ctx, const Group& group, void* data, size_t elem,
                        const std::vector<size_t>& offsets);

void Broadcast(CollectiveContext& ctx, const Group& group, void* data, size_t bytes,
               int root_index);
void Barrier(CollectiveContext& ctx, const Group& group);

// Rooted collectives (rooted.cc). Reduce: `buf` is working memory on every rank (kAvg reduced as a
// sum); the reduction ends in it at group index root_index, the others' is scratch. Gatherv and
// Scatterv: block i has (offsets[i + 1] - offsets[i]) elements of `elem` bytes; at the root,
// `output` (gather) or `input` (scatter) holds all blocks at their offsets; elsewhere, one block.
void Reduce(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf, int root_index);
void Gatherv(CollectiveContext& ctx, const Group& group, const void* input, void* output,
             size_t elem, const std::vector<size_t>& offsets, int root_index);
void Scatterv(CollectiveContext& ctx, const Group& group, const void* input, void* output,
              size_t elem, const std::vector<size_t>& offsets, int root_index);
// All-to-all (alltoall.cc): send_offsets/recv_offsets have group.size() + 1 entries; block i of
// `input` goes to group index i, block i of `output` comes from it.
void Alltoallv(CollectiveContext& ctx, const Group& group, const void* input,
               const std::vector<size_t>& send_offsets, void* output,
               const std::vector<size_t>& recv_offsets, size_t elem);

// Among ranks that all share one node's arena (node_shm.cc): whether ctx.arena holds exactly
// `group` (the world, every rank on this node), and the collectives that then go through it.
// Offsets as above; ReduceScatterShm leaves the reduction of block group.me in `output` (kAvg
// reduced as a sum). ArenaBarrier: the arena's barrier with the operation's label and deadline.
bool ArenaSpansGroup(const CollectiveContext& ctx, const Group& group);
void ArenaBarrier(CollectiveContext& ctx, shm::NodeArena& arena);
void AllgathervShm(CollectiveContext& ctx, const Group& group, void* data, size_t elem,
                   const std::vector<size_t>& offsets);
void ReduceScatterShm(CollectiveContext& ctx, const Group& group, const void* input, void* output,
                      const std::vector<size_t>& offsets, DataType dtype, ReduceOp op);
// The bytes each receiver's region of a slot holds in AlltoallvShm; 0 when the slots are too small
// for `members` regions (then all-to-all goes over TCP: e.g. 4 KiB slots and 64 ranks a node).
size_t AlltoallvShmRegionBytes(size_t slot_bytes, int members);
// From this block size (the largest any rank sends or receives) AlltoallvShm moves blocks in one
// copy where the arena allows (NodeArena::single_copy): measured in docs/benchmarks.md.
inline constexpr size_t kAlltoallvSingleCopyMinBytes = 32 << 10;
void AlltoallvShm(CollectiveContext& ctx, const Group& group, const void* input,
                  const std::vector<size_t>& send_offsets, void* output,
                  const std::vector<size_t>& recv_offsets, size_t elem);

}  // namespace cdt
