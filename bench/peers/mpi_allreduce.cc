// Peer benchmark: Open MPI's MPI_Allreduce (in place, f32 sum), sizes x4 from MIN to MAX bytes.
// Usage: mpirun -np 4 [--mca btl self,tcp] mpi_allreduce MIN_BYTES MAX_BYTES [JSON]
// Timing as ours: warm-up, barrier, mean over iterations, slowest rank reported.
#include <mpi.h>

#include <cstdlib>
#include <vector>

#include "peer_table.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, world;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  size_t min_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 4096;
  size_t max_bytes = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : (64u << 20);
  std::vector<float> buf(max_bytes / 4, 1.0f);
  std::vector<PeerRow> rows;
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
    int count = static_cast<int>(bytes / 4);
    int iters = PeerIters(bytes), warmup = std::max(2, iters / 5);
    for (int i = 0; i < warmup; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i)
      MPI_Allreduce(MPI_IN_PLACE, buf.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double us = (MPI_Wtime() - t0) * 1e6 / iters, worst = 0;
    MPI_Allreduce(&us, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    rows.push_back({"mpi", bytes, worst});
  }
  if (rank == 0) PrintPeerTable(rows, world, "openmpi", argc > 3 ? argv[3] : nullptr);
  MPI_Finalize();
  return 0;
}
