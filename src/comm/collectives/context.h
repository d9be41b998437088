// What every collective algorithm sees: the transport (TcpMesh::Exchange), the group of ranks it
// runs over, reusable scratch memory and the labels used in error messages. Algorithms never touch
// sockets.
//
// A Group lists global ranks in group order; algorithms speak of group indices and translate with
// peer(index). This is how the hierarchical allreduce runs ring or recursive doubling over the
// ranks that share a local index on different nodes, without a communicator of their own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cdt/types.h"
#include "comm/transport/tcp_mesh.h"

namespace cdt {

namespace shm {
class NodeArena;
}

struct Group {
  std::vector<int> ranks;  // global ranks, in group order
  int me = 0;              // this process's index in `ranks`

  int size() const { return static_cast<int>(ranks.size()); }
  int peer(int index) const { return ranks[static_cast<size_t>(index)]; }
  static Group World(int rank, int size);
};

// Scratch memory owned by a communicator, reused by every operation (grows, never shrinks), so the
// steady state allocates nothing.
class Workspace {
 public:
  void* Get(size_t bytes) {
    if (buffer_.size() < bytes) buffer_.resize(bytes);
    return buffer_.data();
  }

 private:
  std::vector<unsigned char> buffer_;
};

// Large buffers go through the hierarchical allreduce 4 MiB at a time. Unchunked, the intra-node
// steps of a 64 MiB allreduce ran out of cache and slowed the whole to 0.104 GB/s on the emulated
// 1 Gbit/s cluster; in 4 MiB chunks it holds 0.119 GB/s (95% of the link) from 4 to 64 MiB
// (docs/benchmarks.md, "Emulated cluster").
constexpr size_t kHierarchicalChunkBytes = 4 << 20;

struct CollectiveContext {
  TcpMesh& mesh;
  Workspace& scratch;
  OpLabel label;
  size_t segment_bytes = 256 << 10;  // pipelining granularity; tests shrink it to hit more segments
  // The memory this rank shares with the world's other ranks on its node (null: none; see
  // comm/node_arena_setup.h). The hierarchical allreduce runs its intra-node steps in it.
  shm::NodeArena* arena = nullptr;
  // The hierarchical allreduces take the buffer this many bytes at a time, on every rank alike
  // (the inter-node step's shards depend on it): kHierarchicalChunkBytes, or the arena's slot
  // size where some node has an arena (agreed at set-up, comm/node_arena_setup.h).
  size_t hier_chunk_bytes = kHierarchicalChunkBytes;
};

// The buffer an allreduce works on, in place.
struct ReduceBuffer {
  void* data;
  size_t count;
  DataType dtype;
  ReduceOp op;

  size_t elem() const { return ElementSize(dtype); }
  char* at(size_t index) const { return static_cast<char*>(data) + index * elem(); }
};

// Splits `count` elements into `parts` contiguous blocks whose sizes differ by at most one; block i
// starts at offsets[i] and ends at offsets[i + 1].
std::vector<size_t> BalancedOffsets(size_t count, int parts);

// Exchange a small list of transfers: a convenience over TcpMesh::Exchange.
inline void Run(CollectiveContext& ctx, std::vector<Transfer>& transfers) {
  if (!transfers.empty()) ctx.mesh.Exchange(transfers.data(), transfers.size(), ctx.label);
}

}  // namespace cdt
