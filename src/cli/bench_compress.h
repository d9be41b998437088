// `cann-dist-train bench compress`: what each gradient compressor costs and sends (worker side).
//
// Each compressor reduces the same float32 gradient (default 25 MiB as one 2560 x 2560 matrix,
// Gaussian values seeded per rank) --iters times; the table shows the median time of a call (the
// slowest rank's), GB/s = fp32 gradient bytes / that time, the wire bytes of one call and their
// reduction against fp32, and the relative error of one call's result against the exact sum.
// On one process (the default) the collectives inside are no-ops, so the time is encode + decode
// alone; with more ranks (--nproc-per-node, --nnodes) it includes their communication.
#pragma once

#include <string>

#include "cdt/communicator.h"

namespace cdt::cli {

struct BenchCompressOptions {
  std::string compressors = "all";  // comma-separated names, or "all"
  std::string size = "25M";         // gradient bytes (float32)
  std::string shape;            // "ROWSxCOLS,N,...": tensors of the gradient; empty = one matrix
  double ratio = 0;             // top-k / random-k; 0 = compress::DefaultRatio
  std::string values = "fp32";  // top-k / random-k: the type their values travel in
  int powersgd_rank = 2;
  bool error_feedback = true;  // as `train` runs them
  int iters = 10;
  int warmup = 2;
  std::string json;
};

// Throws kInvalidArgument, naming the option, for options no rank could run: the launcher calls
// it once before starting workers, so a bad option is one line, not one per worker followed by
// the launcher's "exited with status 2" (train's options are checked the same way).
void ValidateBenchCompressOptions(const BenchCompressOptions& o);

// Runs the benchmark on this rank; rank 0 prints the table and writes the JSON. Returns 0.
// Checks the options first too (a worker may be started without the launcher).
int RunBenchCompress(Communicator& comm, const BenchCompressOptions& o);

}  // namespace cdt::cli
