// Peer benchmark: Gloo (Debian libgloo-dev) allreduce_ring_chunked and allreduce_halving_doubling
// over its TCP transport, f32 sum, sizes x4 from MIN to MAX bytes. Ranks come from RANK /
// WORLD_SIZE (start it with `cann-dist-train launch`); rendezvous through a FileStore directory.
// Usage: gloo_allreduce ring_chunked|halving_doubling STORE_DIR MIN_BYTES MAX_BYTES [JSON]
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "peer_table.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: gloo_allreduce ALGO STORE_DIR MIN MAX [JSON]\n");
    return 2;
  }
  std::string algo = argv[1];
  int rank = std::atoi(std::getenv("RANK"));
  int world = std::atoi(std::getenv("WORLD_SIZE"));
  size_t min_bytes = std::strtoull(argv[3], nullptr, 10),
         max_bytes = std::strtoull(argv[4], nullptr, 10);

  gloo::transport::tcp::attr attr;
  // Inside tools/emulate-cluster each node has its own address.
  const char* node_addr = std::getenv("CDT_NODE_ADDR");
  attr.hostname = node_addr ? node_addr : "127.0.0.1";
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(argv[2]);
  gloo::rendezvous::PrefixStore store(std::string("gloo-") + algo, file_store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, world);
  ctx->setTimeout(std::chrono::seconds(60));
  ctx->connectFullMesh(store, dev);

  std::vector<float> buf(max_bytes / 4, 1.0f);
  std::vector<PeerRow> rows;
  std::vector<double> t(1);
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int count = static_cast<int>(bytes / 4);
    std::vector<float*> ptrs = {buf.data()};
    std::unique_ptr<gloo::Algorithm> op;
    if (algo == "ring_chunked")
      op = std::make_unique<gloo::AllreduceRingChunked<float>>(ctx, ptrs, count);
    else
      op = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(ctx, ptrs, count);
    int iters = PeerIters(bytes), warmup = std::max(2, iters / 5);
    for (int i = 0; i < warmup; ++i) op->run();
    gloo::BarrierAllToOne(ctx).run();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) op->run();
    t[0] = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() /
           iters;
    std::vector<double*> tp = {t.data()};
    gloo::AllreduceHalvingDoubling<double>(ctx, tp, 1, gloo::ReductionFunction<double>::max).run();
    rows.push_back({algo == "ring_chunked" ? "gloo_ring" : "gloo_hd", bytes, t[0]});
  }
  if (rank == 0)
    PrintPeerTable(rows, world, ("gloo_" + algo).c_str(), argc > 5 ? argv[5] : nullptr);
  return 0;
}
