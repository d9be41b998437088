// The two phases of a ring allreduce (Patarasuk & Yuan 2009; Gloo's allreduce_ring_chunked).
//
// p ranks stand in a ring; rank i sends to right = i+1 and receives from left = i-1 (mod p). The
// buffer is cut into p blocks (offsets[b] .. offsets[b+1]).
//
// Reduce-scatter, steps s = 0 .. p-2:
//   send block (i - s - 1) mod p to the right; receive block (i - s - 2) mod p from the left and
//   reduce it into ours. After p-1 steps block i holds the sum over all ranks.
// Allgather, steps s = 0 .. p-2:
//   send block (i - s) mod p to the right; receive block (i - s - 1) mod p from the left, in place.
//
// Pipelining: each received block arrives as segments of ctx.segment_bytes; a segment is reduced
// the moment it has arrived (Transfer::on_complete), while the rest of the block is still streaming
// through the kernel's socket buffers. Each rank sends 2(p-1)/p of the buffer — bandwidth optimal.
#include <algorithm>

#include "comm/collectives/algorithms.h"
#include "comm/reduce.h"

namespace cdt {

namespace {

struct SegmentReducer {
  const char* scratch;  // where segments of the incoming block land
  char* target;         // the block they are reduced into
  DataType dtype;
  ReduceOp op;
  size_t elem;
};

void ReduceSegment(void* arg, const Transfer& t) {
  auto* r = static_cast<SegmentReducer*>(arg);
  size_t offset = static_cast<const char*>(t.data) - r->scratch;
  ReduceInto(r->target + offset, t.data, t.bytes / r->elem, r->dtype, r->op);
}

}  // namespace

void RingReduceScatterPhase(CollectiveContext& ctx, const Group& group, const ReduceBuffer& buf,
                            const std::vector<size_t>& offsets) {
  const int p = group.size();
  if (p == 1) return;
  const int me = group.me;
  const int right = group.peer((me + 1) % p);
  const int left = group.peer((me - 1 + p) % p);
  const size_t elem = buf.elem();
  const size_t seg = std::max<size_t>(1, ctx.segment_bytes / elem) * elem;
  size_t max_block = 0;
  for (int b = 0; b < p; ++b) max_block = std::max(max_block, offsets[b + 1] - offsets[b]);
  char* scratch = static_cast<char*>(ctx.scratch.Get(max_block * elem));

  std::vector<Transfer> t;
  t.reserve(2 + max_block * elem / seg);
  SegmentReducer reducer{scratch, nullptr, buf.dtype, buf.op, elem};
  for (int s = 0; s < p - 1; ++s) {
    const int send_block = ((me - s - 1) % p + p) % p;
    const int recv_block = ((me - s - 2) % p + p) % p;
    t.clear();
    t.push_back(Transfer::Send(right, buf.at(offsets[send_block]),
                               (offsets[send_block + 1] - offsets[send_block]) * elem));
    const size_t recv_bytes = (offsets[recv_block + 1] - offsets[recv_block]) * elem;
    reducer.target = buf.at(offsets[recv_block]);
    for (size_t off = 0; off < recv_bytes; off += seg) {
      Transfer r = Transfer::Recv(left, scratch + off, std::min(seg, recv_bytes - off));
      r.on_complete = &ReduceSegment;
      r.arg = &reducer;
      t.push_back(r);
    }
    Run(ctx, t);
  }
}

void RingAllgatherPhase(CollectiveContext& ctx, const Group& group, void* data, size_t elem,
                        const std::vector<size_t>& offsets) {
  const int p = group.size();
  if (p == 1) return;
  const int me = group.me;
  const int right = group.peer((me + 1) % p);
  const int left = group.peer((me - 1 + p) % p);
  char* base = static_cast<char*>(data);
  std::vector<Transfer> t;
  for (int s = 0; s < p - 1; ++s) {
    const int send_block = ((me - s) % p + p) % p;
    const int recv_block = ((me - s - 1) % p + p) % p;
    t.clear();
    t.push_back(Transfer::Send(right, base + offsets[send_block] * elem,
                               (offsets[send_block + 1] - offsets[send_block]) * elem));
    t.push_back(Transfer::Recv(left, base + offsets[recv_block] * elem,
                               (offsets[recv_block + 1] - offsets[recv_block]) * elem));
    Run(ctx, t);
  }
}

}  // namespace cdt
