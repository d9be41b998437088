// The engine's own Alltoallv (uneven splits), ReduceScatter (f32 sum) and Allgather, called from
// C++ as bench/peers/mpi_collectives.cc calls Open MPI's: same sizes, splits, iterations and
// timing (warm-up, barrier, mean, the slowest rank), same JSON. Beside torch_collectives.py's
// "cdt" column it separates what the engine costs from what a torch.distributed call from Python
// adds. Run it under `cann-dist-train launch` (bench/run_collectives_peers.sh does).
// Usage: cann-dist-train launch --nproc-per-node 4 -- cdt_collectives MIN_BYTES MAX_BYTES [JSON]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "cdt/tcp_store.h"
#include "launched_rank.h"

namespace {

int Iterations(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>((256u << 20) / std::max<size_t>(bytes, 1) / 4, 5, 2000));
}

// torch_collectives.py's all_to_all_splits: weights 1 + (rank + p) % world, remainder to the last.
std::vector<size_t> Splits(int rank, int world, size_t n) {
  std::vector<size_t> w;
  for (int p = 0; p < world; ++p) w.push_back(1 + static_cast<size_t>((rank + p) % world));
  const size_t total = std::accumulate(w.begin(), w.end(), size_t{0});
  std::vector<size_t> s;
  for (size_t x : w) s.push_back(n * x / total);
  s.back() += n - std::accumulate(s.begin(), s.end(), size_t{0});
  return s;
}

double Time(cdt::Communicator& comm, const std::function<void()>& call, int iters) {
  for (int i = 0; i < std::max(2, iters / 5); ++i) call();
  comm.Barrier()->Wait();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) call();
  double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
      iters;
  comm.Allreduce(&us, 1, cdt::DataType::kFloat64, cdt::ReduceOp::kMax)->Wait();
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    // Two of the engine's variables, for A/B runs of the paths they choose (launched_rank.h
    // reads only what every launched program needs): CDT_SHM_SINGLE_COPY=0|1,
    // CDT_INLINE_MAX_BYTES=N.
    const launched::Rank joined =
        launched::Join("cdt_collectives", "collectives", [](cdt::CommunicatorOptions& o) {
          if (const char* v = std::getenv("CDT_SHM_SINGLE_COPY")) o.shm_single_copy = v[0] != '0';
          if (const char* v = std::getenv("CDT_INLINE_MAX_BYTES"))
            o.inline_max_bytes = std::strtoull(v, nullptr, 10);
        });
    const cdt::CommunicatorOptions& options = joined.options;
    cdt::Communicator* const comm = joined.comm.get();
    const int rank = options.rank, world = options.size;
    const size_t min_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
    const size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (64u << 20);
    std::string json;
    for (const std::string op :
         {"all_to_all_single", "reduce_scatter_tensor", "all_gather_into_tensor"}) {
      for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        size_t n = std::max<size_t>(static_cast<size_t>(world), bytes / 4);
        n -= n % static_cast<size_t>(world);
        const size_t share = n / static_cast<size_t>(world);
        std::vector<float> in, out;
        std::vector<size_t> send, recv;
        std::function<void()> call;
        if (op == "all_to_all_single") {
          send = Splits(rank, world, n);
          for (int p = 0; p < world; ++p) recv.push_back(Splits(p, world, n)[rank]);
          in.assign(n, 1.0f);
          out.resize(std::accumulate(recv.begin(), recv.end(), size_t{0}));
          call = [&] {
            comm->Alltoallv(in.data(), send, out.data(), recv, cdt::DataType::kFloat32)->Wait();
          };
        } else if (op == "reduce_scatter_tensor") {
          in.assign(n, 1.0f), out.resize(share);
          const std::vector<size_t> counts(static_cast<size_t>(world), share);
          call = [&, counts] {
            comm->ReduceScatter(in.data(), out.data(), counts, cdt::DataType::kFloat32,
                                cdt::ReduceOp::kSum)
                ->Wait();
          };
        } else {
          in.assign(share, 1.0f), out.resize(n);
          call = [&] {
            comm->Allgather(in.data(), out.data(), share, cdt::DataType::kFloat32)->Wait();
          };
        }
        const double us = Time(*comm, call, Iterations(n * 4));
        if (rank == 0) std::printf("cdt   %-24s %10zu B %12.1f us\n", op.c_str(), n * 4, us);
        json += std::string(json.empty() ? "" : ",\n") + " {\"op\": \"" + op +
                "\", \"bytes\": " + std::to_string(n * 4) + ", \"time_us\": " + std::to_string(us) +
                "}";
      }
    }
    if (rank == 0 && argc > 3) {
      FILE* f = std::fopen(argv[3], "w");
      if (f == nullptr) {
        std::fprintf(stderr, "cdt_collectives: cannot write %s\n", argv[3]);
        return 2;
      }
      std::fprintf(f, "{\"peer\": \"cdt C++\", \"world_size\": %d, \"results\": [\n%s\n]}\n", world,
                   json.c_str());
      std::fclose(f);
    }
    return 0;
  } catch (const cdt::Error& e) {
    std::fprintf(stderr, "cdt_collectives: %s\n", e.what());
    return 1;
  }
}
