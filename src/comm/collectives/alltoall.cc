// All-to-all with per-peer counts. Small exchanges (under kPairwiseMinBytes on average per peer)
// post every send and receive at once: one round of latency, as Gloo's alltoall does. Larger ones
// go pairwise, MPICH's and Open MPI's choice for long messages: in step k = 1..p-1 a rank sends
// to me + k and receives from me - k, so every rank has exactly one inbound and one outbound
// stream at a time and no link is oversubscribed.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/collectives/algorithms.h"

namespace cdt {

namespace {
constexpr size_t kPairwiseMinBytes = 64 << 10;
}  // namespace

void Alltoallv(CollectiveContext& ctx, const Group& group, const void* input,
               const std::vector<size_t>& send_offsets, void* output,
               const std::vector<size_t>& recv_offsets, size_t elem) {
  const int p = group.size();
  const char* in = static_cast<const char*>(input);
  char* out = static_cast<char*>(output);
  auto block = [&](const std::vector<size_t>& o, int i) {
    return std::make_pair(o[static_cast<size_t>(i)] * elem,
                          (o[static_cast<size_t>(i) + 1] - o[static_cast<size_t>(i)]) * elem);
  };
  auto add = [&](std::vector<Transfer>& x, int to, int from) {
    const auto [s_at, s_len] = block(send_offsets, to);
    const auto [r_at, r_len] = block(recv_offsets, from);
    if (s_len > 0) x.push_back(Transfer::Send(group.peer(to), in + s_at, s_len));
    if (r_len > 0) x.push_back(Transfer::Recv(group.peer(from), out + r_at, r_len));
  };
  std::vector<Transfer> x;
  const size_t total = (send_offsets.back() + recv_offsets.back()) * elem;
  if (p > 1 && total / (2 * static_cast<size_t>(p - 1)) < kPairwiseMinBytes) {
    for (int k = 1; k < p; ++k) add(x, (group.me + k) % p, (group.me - k + p) % p);
    Run(ctx, x);
  } else {
    for (int k = 1; k < p; ++k) {
      x.clear();
      add(x, (group.me + k) % p, (group.me - k + p) % p);
      Run(ctx, x);
    }
  }
  const auto [s_at, s_len] = block(send_offsets, group.me);
  const auto [r_at, r_len] = block(recv_offsets, group.me);
  if (r_len > 0) std::memmove(out + r_at, in + s_at, std::min(s_len, r_len));
}

}  // namespace cdt
