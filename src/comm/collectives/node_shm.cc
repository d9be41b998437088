// Allgather(v), reduce-scatter and all-to-all(v) among ranks that all share one node's arena
// (comm/transport/node_arena.h): the data goes through the members' slots, never a socket — the
// single-node shape of Open MPI's coll/sm and of NCCL's SHM transport, as the hierarchical
// allreduce's intra-node steps (allreduce_hierarchical_shm.cc).
//
// Each runs in rounds of at most one slot per member. In a round every member copies its part into
// its slot of the round's set, arrives at the barrier, and then reads what it needs from the
// others' slots. One barrier a round is enough: sets alternate from one use of the arena to the
// next, and no member writes a set again before the barrier of the use in between, which nobody
// passes before having read that set. Every member runs the same number of rounds, so the barrier
// steps and sets stay in step:
//  - allgatherv: rounds of the largest block (every rank knows every count);
//  - reduce-scatter: rounds over the whole buffer; the owner of each block reduces its part of
//    the round from the k slots in member order (the same bits on every run, like the allreduce);
//  - alltoallv: a slot holds k regions, one per receiver (a rank's block to itself is copied
//    directly, after the rounds); a rank knows only its own send and
//    receive counts, so round 0 also carries, in each slot's header, its member's largest
//    block — the round count is the largest over all of them.
//    Single copy: where the node's ranks can read each other's memory (NodeArena::single_copy)
//    and some block is at least kAlltoallvSingleCopyMinBytes, round 0's headers also say where
//    each member's input is; every rank then has the kernel copy its blocks straight from the
//    senders' inputs into its output (process_vm_readv, Open MPI's CMA) and a second barrier
//    keeps each input as it is until its readers are done: one copy a byte, not two, and two
//    barriers whatever the size. A rank whose own largest block is that large knows the path
//    before round 0 and leaves its slot's regions empty.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/collectives/algorithms.h"
#include "comm/reduce.h"
#include "comm/transport/node_arena.h"
#include "common/check.h"

namespace cdt {

namespace {

size_t RoundsFor(size_t bytes, size_t per_round) {
  return per_round == 0 ? 0 : (bytes + per_round - 1) / per_round;
}

// The part of [begin, end) that falls in [lo, hi) (empty when they do not meet).
struct Span {
  size_t begin = 0, end = 0;
  size_t size() const { return end > begin ? end - begin : 0; }
};
Span Intersect(size_t begin, size_t end, size_t lo, size_t hi) {
  return {std::max(begin, lo), std::min(end, hi)};
}

// The alltoallv slot header of round 0, cache-line padded: an AlltoallvHeader (the member's
// largest block, the address of its input in its process), then per receiver the byte offset of
// that receiver's block in the input (what a single-copy reader needs).
size_t AlltoallvHeaderBytes(int members) {
  return (16 + 8 * static_cast<size_t>(members) + 63) / 64 * 64;
}

}  // namespace

void ArenaBarrier(CollectiveContext& ctx, shm::NodeArena& arena) {
  const uint64_t step = arena.NextStep();
  arena.Arrive(step);
  arena.WaitAll(step, ctx.mesh.timeout(), ctx.label.name, ctx.label.seq);
}

size_t AlltoallvShmRegionBytes(size_t slot_bytes, int members) {
  if (members < 1 || members > shm::NodeArena::kMaxMembers) return 0;
  const size_t header = AlltoallvHeaderBytes(members);
  if (slot_bytes <= header) return 0;
  return (slot_bytes - header) / static_cast<size_t>(members) / 64 * 64;
}

bool ArenaSpansGroup(const CollectiveContext& ctx, const Group& group) {
  if (ctx.arena == nullptr || ctx.arena->members() != group.size()) return false;
  // The arena's members are the node's world ranks in rank order: the group must be the world.
  for (int i = 0; i < group.size(); ++i)
    if (group.peer(i) != ctx.arena->ranks()[static_cast<size_t>(i)]) return false;
  return true;
}

void AllgathervShm(CollectiveContext& ctx, const Group& group, void* data, size_t elem,
                   const std::vector<size_t>& offsets) {
  shm::NodeArena& arena = *ctx.arena;
  CDT_CHECK_EQ(arena.me(), group.me);
  const size_t slot = arena.slot_bytes();
  size_t largest = 0;
  for (int i = 0; i < group.size(); ++i)
    largest = std::max(
        largest, (offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]) * elem);
  char* out = static_cast<char*>(data);
  const size_t rounds = RoundsFor(largest, slot);
  for (size_t r = 0; r < rounds; ++r) {
    const int set = arena.NextSet();
    const size_t lo = r * slot;
    auto piece = [&](int i) {  // member i's bytes in this round, relative to its block
      const size_t begin = offsets[static_cast<size_t>(i)] * elem;
      const size_t len = offsets[static_cast<size_t>(i) + 1] * elem - begin;
      return Intersect(lo, std::min(len, lo + slot), lo, lo + slot);
    };
    const Span mine = piece(group.me);
    if (mine.size() > 0)
      std::memcpy(arena.slot(set, group.me),
                  out + offsets[static_cast<size_t>(group.me)] * elem + mine.begin, mine.size());
    ArenaBarrier(ctx, arena);
    for (int i = 0; i < group.size(); ++i) {
      const Span p = piece(i);
      if (i != group.me && p.size() > 0)
        std::memcpy(out + offsets[static_cast<size_t>(i)] * elem + p.begin, arena.slot(set, i),
                    p.size());
    }
  }
}

void ReduceScatterShm(CollectiveContext& ctx, const Group& group, const void* input, void* output,
                      const std::vector<size_t>& offsets, DataType dtype, ReduceOp op) {
  shm::NodeArena& arena = *ctx.arena;
  CDT_CHECK_EQ(arena.me(), group.me);
  const size_t elem = ElementSize(dtype);
  const size_t per_round = std::max<size_t>(1, arena.slot_bytes() / elem);  // elements
  const size_t total = offsets.back();
  const size_t me = static_cast<size_t>(group.me);
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  for (size_t lo = 0; lo < total; lo += per_round) {
    const size_t hi = std::min(total, lo + per_round);
    const int set = arena.NextSet();
    std::memcpy(arena.slot(set, group.me), in + lo * elem, (hi - lo) * elem);
    ArenaBarrier(ctx, arena);
    const Span mine = Intersect(offsets[me], offsets[me + 1], lo, hi);
    if (mine.size() == 0) continue;
    char* dst = out + (mine.begin - offsets[me]) * elem;
    const size_t at = (mine.begin - lo) * elem;
    std::memcpy(dst, arena.slot(set, 0) + at, mine.size() * elem);
    for (int q = 1; q < arena.members(); ++q)
      ReduceInto(dst, arena.slot(set, q) + at, mine.size(), dtype, op);
  }
}

namespace {

struct AlltoallvHeader {
  uint64_t largest = 0;
  uint64_t input = 0;
};

// Reads every other member's block for this rank straight from its input (the kernel's one copy;
// NodeArena::ReadMember), once round 0's barrier published the headers.
void ReadBlocksDirectly(CollectiveContext& ctx, shm::NodeArena& arena, int set, char* out,
                        const std::vector<size_t>& recv_offsets, size_t elem) {
  const int k = arena.members();
  const size_t me = static_cast<size_t>(arena.me());
  for (int m = 0; m < k; ++m) {
    const size_t bytes =
        (recv_offsets[static_cast<size_t>(m) + 1] - recv_offsets[static_cast<size_t>(m)]) * elem;
    if (m == arena.me() || bytes == 0) continue;
    const char* theirs = arena.slot(set, m);
    AlltoallvHeader h;
    uint64_t at = 0;
    std::memcpy(&h, theirs, sizeof h);
    std::memcpy(&at, theirs + sizeof h + 8 * me, sizeof at);
    arena.ReadMember(m, static_cast<uintptr_t>(h.input + at),
                     out + recv_offsets[static_cast<size_t>(m)] * elem, bytes, ctx.label.name,
                     ctx.label.seq);
  }
}

}  // namespace

void AlltoallvShm(CollectiveContext& ctx, const Group& group, const void* input,
                  const std::vector<size_t>& send_offsets, void* output,
                  const std::vector<size_t>& recv_offsets, size_t elem) {
  shm::NodeArena& arena = *ctx.arena;
  CDT_CHECK_EQ(arena.me(), group.me);
  const int k = group.size();
  // Each slot: the header, then k regions of `region` bytes (cache-line multiples).
  const size_t header = AlltoallvHeaderBytes(k);
  const size_t region = AlltoallvShmRegionBytes(arena.slot_bytes(), k);
  CDT_CHECK(region > 0);  // the caller checked: AlltoallvShmRegionBytes
  auto block = [&](const std::vector<size_t>& offsets, int i) {
    return (offsets[static_cast<size_t>(i) + 1] - offsets[static_cast<size_t>(i)]) * elem;
  };
  AlltoallvHeader me{0, reinterpret_cast<uintptr_t>(input)};
  for (int i = 0; i < k; ++i)
    me.largest =
        std::max<uint64_t>(me.largest, std::max(block(send_offsets, i), block(recv_offsets, i)));
  // Blocks this large go in one copy when the node agreed it can (every member then knows it from
  // the largest block, which round 0 publishes): this rank's data need not enter its slot.
  const bool surely_direct = arena.single_copy() && me.largest >= kAlltoallvSingleCopyMinBytes;
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  size_t rounds = 1;  // round 0 at least: it carries the headers
  bool direct = false;
  for (size_t r = 0; r < rounds; ++r) {
    const int set = arena.NextSet();
    char* mine = arena.slot(set, group.me);
    const size_t lo = r * region;
    if (r == 0) {
      std::memcpy(mine, &me, sizeof me);
      for (int p = 0; p < k; ++p) {
        const uint64_t at = send_offsets[static_cast<size_t>(p)] * elem;
        std::memcpy(mine + sizeof me + 8 * static_cast<size_t>(p), &at, sizeof at);
      }
    }
    for (int p = 0; p < k && !surely_direct; ++p) {
      const Span s = Intersect(lo, block(send_offsets, p), lo, lo + region);
      if (s.size() > 0 && p != group.me)
        std::memcpy(mine + header + static_cast<size_t>(p) * region,
                    in + send_offsets[static_cast<size_t>(p)] * elem + s.begin, s.size());
    }
    ArenaBarrier(ctx, arena);
    if (r == 0) {
      uint64_t global = 0;
      for (int m = 0; m < k; ++m) {
        AlltoallvHeader theirs;
        std::memcpy(&theirs, arena.slot(set, m), sizeof theirs);
        global = std::max(global, theirs.largest);
      }
      if (arena.single_copy() && global >= kAlltoallvSingleCopyMinBytes) {
        ReadBlocksDirectly(ctx, arena, set, out, recv_offsets, elem);
        direct = true;
        break;
      }
      rounds = std::max<size_t>(1, RoundsFor(global, region));
    }
    for (int m = 0; m < k; ++m) {
      const Span s = Intersect(lo, block(recv_offsets, m), lo, lo + region);
      if (s.size() > 0 && m != group.me)
        std::memcpy(out + recv_offsets[static_cast<size_t>(m)] * elem + s.begin,
                    arena.slot(set, m) + header + static_cast<size_t>(group.me) * region, s.size());
    }
  }
  // This rank's own block never goes through its slot (a quarter of the copies at 4 ranks).
  const size_t own = std::min(block(send_offsets, group.me), block(recv_offsets, group.me));
  if (own > 0)
    std::memmove(out + recv_offsets[static_cast<size_t>(group.me)] * elem,
                 in + send_offsets[static_cast<size_t>(group.me)] * elem, own);
  // Read directly, every input must stay as it is until its readers are done.
  if (direct) ArenaBarrier(ctx, arena);
}

}  // namespace cdt
