// One rank of a job started by `cann-dist-train launch` (or any launcher that sets torchrun's
// variables): meets its peers at the launcher's store, allreduces and allgathers, checks the
// results and prints one line. Built against the installed library only (find_package).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "cdt/tcp_store.h"
#include "cdt/version.h"
#include "launched_rank.h"

int main() {
  try {
    const launched::Rank joined = launched::Join("allreduce_ranks", "example");
    const cdt::CommunicatorOptions& options = joined.options;
    cdt::Communicator* const comm = joined.comm.get();

    // Rank r contributes r + 1 in every element: the sum is n(n+1)/2 everywhere.
    const size_t count = 1 << 18;
    std::vector<float> data(count, static_cast<float>(options.rank + 1));
    comm->Allreduce(data.data(), count, cdt::DataType::kFloat32, cdt::ReduceOp::kSum)->Wait();
    const float want = options.size * (options.size + 1) / 2.0f;
    for (float x : data) {
      if (x != want) {
        std::fprintf(stderr, "rank %d: allreduce gave %g, want %g\n", options.rank, x, want);
        return 1;
      }
    }
    std::vector<int32_t> ranks(static_cast<size_t>(options.size), -1);
    const int32_t mine = options.rank;
    comm->Allgather(&mine, ranks.data(), 1, cdt::DataType::kInt32)->Wait();
    for (int r = 0; r < options.size; ++r) {
      if (ranks[static_cast<size_t>(r)] != r) {
        std::fprintf(stderr, "rank %d: allgather slot %d holds %d\n", options.rank, r,
                     ranks[static_cast<size_t>(r)]);
        return 1;
      }
    }
    std::printf("rank %d of %d: ok (cdt %s, %s)\n", options.rank, options.size, cdt::Version(),
                comm->backend_name().c_str());
    return 0;
  } catch (const cdt::Error& e) {
    std::fprintf(stderr, "allreduce_ranks: %s\n", e.what());
    return 1;
  }
}
