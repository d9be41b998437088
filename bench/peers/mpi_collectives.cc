// Peer benchmark: Open MPI's MPI_Alltoallv (uneven splits), MPI_Reduce_scatter_block (f32 sum) and
// MPI_Allgather, the equivalents of torch.distributed's all_to_all_single, reduce_scatter_tensor
// and all_gather_into_tensor (bench/peers/torch_collectives.py: same sizes, splits, iterations and
// timing — warm-up, barrier, mean, the slowest rank). Writes that script's JSON.
// Usage: mpirun -np 4 [--mca btl self,tcp] mpi_collectives MIN_BYTES MAX_BYTES [JSON]
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

namespace {

int Iterations(size_t bytes) {
  return static_cast<int>(
      std::clamp<size_t>((256u << 20) / std::max<size_t>(bytes, 1) / 4, 5, 2000));
}

// torch_collectives.py's all_to_all_splits: weights 1 + (rank + p) % world, remainder to the last.
std::vector<int> Splits(int rank, int world, int n) {
  std::vector<long> w;
  for (int p = 0; p < world; ++p) w.push_back(1 + (rank + p) % world);
  const long total = std::accumulate(w.begin(), w.end(), 0L);
  std::vector<int> s;
  for (long x : w) s.push_back(static_cast<int>(n * x / total));
  s.back() += n - std::accumulate(s.begin(), s.end(), 0);
  return s;
}

std::vector<int> Displacements(const std::vector<int>& counts) {
  std::vector<int> d(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) d[i] = d[i - 1] + counts[i - 1];
  return d;
}

double Time(const std::function<void()>& call, int iters) {
  for (int i = 0; i < std::max(2, iters / 5); ++i) call();
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) call();
  double us = (MPI_Wtime() - t0) * 1e6 / iters, worst = 0;
  MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const size_t min_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
  const size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (64u << 20);
  struct Row {
    std::string op;
    size_t bytes;
    double us;
  };
  std::vector<Row> rows;
  for (const char* op : {"all_to_all_single", "reduce_scatter_tensor", "all_gather_into_tensor"}) {
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      int n = static_cast<int>(std::max<size_t>(world, bytes / 4));
      n -= n % world;
      const std::string name = op;
      std::vector<float> in, out;
      std::function<void()> call;
      std::vector<int> send, recv, sd, rd;
      if (name == "all_to_all_single") {
        send = Splits(rank, world, n);
        for (int p = 0; p < world; ++p) recv.push_back(Splits(p, world, n)[rank]);
        sd = Displacements(send), rd = Displacements(recv);
        in.assign(n, 1.0f), out.resize(std::accumulate(recv.begin(), recv.end(), 0));
        call = [&] {
          MPI_Alltoallv(in.data(), send.data(), sd.data(), MPI_FLOAT, out.data(), recv.data(),
                        rd.data(), MPI_FLOAT, MPI_COMM_WORLD);
        };
      } else if (name == "reduce_scatter_tensor") {
        in.assign(n, 1.0f), out.resize(n / world);
        call = [&] {
          MPI_Reduce_scatter_block(in.data(), out.data(), n / world, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD);
        };
      } else {
        in.assign(n / world, 1.0f), out.resize(n);
        call = [&] {
          MPI_Allgather(in.data(), n / world, MPI_FLOAT, out.data(), n / world, MPI_FLOAT,
                        MPI_COMM_WORLD);
        };
      }
      const double us = Time(call, Iterations(static_cast<size_t>(n) * 4));
      rows.push_back({name, static_cast<size_t>(n) * 4, us});
      if (rank == 0) std::printf("mpi   %-24s %10d B %12.1f us\n", op, n * 4, us);
    }
  }
  if (rank == 0 && argc > 3) {
    FILE* f = std::fopen(argv[3], "w");
    if (f == nullptr) {
      std::fprintf(stderr, "mpi_collectives: cannot write %s\n", argv[3]);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    std::fprintf(f, "{\"peer\": \"openmpi\", \"world_size\": %d, \"results\": [\n", world);
    for (size_t i = 0; i < rows.size(); ++i)
      std::fprintf(f, " {\"op\": \"%s\", \"bytes\": %zu, \"time_us\": %.3f}%s\n",
                   rows[i].op.c_str(), rows[i].bytes, rows[i].us, i + 1 < rows.size() ? "," : "");
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  MPI_Finalize();
  return 0;
}
