// Broadcast from group index root_index, in place.
//
// Small messages (< kChainMinBytes): binomial tree over relative index rel = (i - root) mod p. A
// rank receives from rel - lowbit(rel), then sends to rel + m for each m = lowbit/2, ..., 1 below
// that bit: lg(p) steps. Large messages: a pipelined chain root -> rel 1 -> rel 2 -> ... in
// segments of ctx.segment_bytes, each forwarded the moment it arrives (a gated send, windows of
// kWindow segments per Exchange). Every link carries S once, so time ≈ S/B + (p-1)·segment/B:
// bandwidth optimal for large S.
#include <algorithm>
#include <vector>

#include "comm/collectives/algorithms.h"

namespace cdt {

namespace {

constexpr size_t kChainMinBytes = 256 << 10;
constexpr size_t kWindow = 16;

void Arrived(void* arg, const Transfer&) { --*static_cast<int*>(arg); }

void BinomialBroadcast(CollectiveContext& ctx, const Group& group, void* data, size_t bytes,
                       int root) {
  const int p = group.size();
  const int rel = (group.me - root + p) % p;
  auto real = [&](int r) { return group.peer((r + root) % p); };
  int mask = 1;
  while (mask < p) {
    if (rel & mask) {
      Transfer t = Transfer::Recv(real(rel - mask), data, bytes);
      ctx.mesh.Exchange(&t, 1, ctx.label);
      break;
    }
    mask <<= 1;
  }
  std::vector<Transfer> sends;
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rel + mask < p) sends.push_back(Transfer::Send(real(rel + mask), data, bytes));
  Run(ctx, sends);
}

void ChainBroadcast(CollectiveContext& ctx, const Group& group, void* data, size_t bytes,
                    int root) {
  const int p = group.size();
  const int rel = (group.me - root + p) % p;
  const int prev = rel > 0 ? group.peer((group.me - 1 + p) % p) : -1;
  const int next = rel < p - 1 ? group.peer((group.me + 1) % p) : -1;
  const size_t seg = std::max<size_t>(1, ctx.segment_bytes);
  const size_t nseg = (bytes + seg - 1) / seg;
  char* base = static_cast<char*>(data);
  int gates[kWindow];
  std::vector<Transfer> x;
  x.reserve(2 * kWindow);
  for (size_t w0 = 0; w0 < nseg; w0 += kWindow) {
    x.clear();
    for (size_t j = 0; j < kWindow && w0 + j < nseg; ++j) {
      size_t off = (w0 + j) * seg;
      size_t len = std::min(seg, bytes - off);
      gates[j] = 0;
      if (prev >= 0) {
        gates[j] = 1;
        Transfer r = Transfer::Recv(prev, base + off, len);
        r.on_complete = &Arrived;
        r.arg = &gates[j];
        x.push_back(r);
      }
      if (next >= 0) {
        Transfer s = Transfer::Send(next, base + off, len);
        s.gate = &gates[j];
        x.push_back(s);
      }
    }
    Run(ctx, x);
  }
}

}  // namespace

void Broadcast(CollectiveContext& ctx, const Group& group, void* data, size_t bytes,
               int root_index) {
  if (group.size() == 1 || bytes == 0) return;
  if (bytes < kChainMinBytes || group.size() == 2)
    BinomialBroadcast(ctx, group, data, bytes, root_index);
  else
    ChainBroadcast(ctx, group, data, bytes, root_index);
}

}  // namespace cdt
