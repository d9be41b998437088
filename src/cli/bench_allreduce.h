// `cann-dist-train bench allreduce`: nccl-tests style allreduce benchmark (worker side).
#pragma once

#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "topology/cost_model.h"

namespace cdt::cli {

struct BenchAllreduceOptions {
  std::string algo = "auto";  // one algorithm name, or "all"
  std::string dtype = "f32";
  std::string min_bytes = "4K";
  std::string max_bytes = "64M";
  int iters = 0;   // 0 = scale with size (about 256 MiB moved per size, 5..200 iterations)
  int warmup = 0;  // 0 = at least max(2, iters / 5), then until 4 MiB moved or 0.5 s passed
  // `auto` warms up until online autotuning (comm/allreduce_autotuner.h) has decided each size.
  int autotune_trials = 2;  // CDT_AUTOTUNE
  bool check = false;
  std::string json;
  // Where the buffer lives (cli/bench_device.h): cpu, cuda, cuda:N, host-standin; on a device the
  // allreduce is DeviceCollectives' staged one, in chunks of staging_chunk bytes.
  std::string device = "cpu";
  std::string staging_chunk = "4M";
  int local_rank = 0;  // picks this worker's GPU for `cuda`
};

// Runs the benchmark on this rank; rank 0 prints the table and writes the JSON. With a cost model
// (--adaptive-comm), each row also carries the model's predicted time for the algorithm that ran.
// Returns 0, or 1 when --check found a wrong element on any rank.
int RunBenchAllreduce(Communicator& comm, const BenchAllreduceOptions& o,
                      const topology::CostModel* model = nullptr);

}  // namespace cdt::cli
