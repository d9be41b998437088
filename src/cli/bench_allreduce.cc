#include "cli/bench_allreduce.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/bench_buffer.h"
#include "cli/bench_device.h"
#include "comm/allreduce_autotuner.h"
#include "common/element_access.h"
#include "common/file_io.h"
#include "common/units.h"

namespace cdt::cli {

namespace {

// Fills element i with (rank + 1) * (i % 7 + 1): integer values whose sums are exact in every
// dtype for up to 8 ranks in bf16 and 64 in f16, so --check can compare exactly.
void Fill(void* base, DataType t, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i)
    StoreElement(base, t, i, (rank + 1) * static_cast<double>(i % 7 + 1));
}

// Number of elements that differ from the closed form sum_r (r+1)(i%7+1) = (i%7+1)·p(p+1)/2.
int64_t CountWrong(const void* base, DataType t, size_t count, int p, size_t* first_bad) {
  int64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    double want = static_cast<double>(i % 7 + 1) * p * (p + 1) / 2;
    if (LoadElement(base, t, i) != want) {
      if (wrong == 0) *first_bad = i;
      ++wrong;
    }
  }
  return wrong;
}

// Warms one size up and returns the calls it made. An explicit --warmup (> 0) runs exactly that
// many. The default runs at least `min_calls`, then goes on until 4 MiB have crossed (a shaped
// link's token bucket lets the first ~1 MB of a small size through at full speed, so timing starts
// in steady state) or kWarmupBudget has passed on the slowest rank, whichever comes first. The
// traffic rule alone asked a 4-byte size for a million calls: minutes of warm-up with no output
// where ranks outnumber cores. Every rank takes the same decision from the slowest rank's clock,
// agreed by an allreduce between batches that double in size (a handful of extra calls per size).
int WarmUp(Communicator& comm, BenchBuffer& buf, size_t count, DataType dtype, AllreduceOptions ao,
           int explicit_calls, int min_calls) {
  auto call = [&] { buf.Allreduce(count, dtype, ao); };
  if (explicit_calls > 0) {
    for (int i = 0; i < explicit_calls; ++i) call();
    return explicit_calls;
  }
  constexpr double kWarmupBudget = 0.5;  // seconds
  constexpr size_t kWarmupTraffic = size_t{4} << 20;
  const size_t bytes = std::max<size_t>(1, count * ElementSize(dtype));
  const auto start = std::chrono::steady_clock::now();
  int done = 0;
  for (int batch = 1;; batch *= 2) {
    for (int i = 0; i < batch; ++i) call();
    buf.Drain();
    done += batch;
    if (done < min_calls) continue;
    if (static_cast<size_t>(done) * bytes >= kWarmupTraffic) return done;
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    comm.Allreduce(&elapsed, 1, DataType::kFloat64, ReduceOp::kMax,
                   {AllreduceAlgorithm::kRecursiveDoubling})
        ->Wait();
    if (elapsed >= kWarmupBudget) return done;
  }
}

// The slowest rank's mean time of `iters` calls, in microseconds (the job waits for it). On a
// device the clock stops once the last result is in device memory (nccl-tests' stream sync).
double TimeAllreduce(Communicator& comm, BenchBuffer& buf, size_t count, DataType dtype,
                     const AllreduceOptions& ao, int iters) {
  comm.Barrier()->Wait();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) buf.Allreduce(count, dtype, ao);
  buf.Drain();
  double time_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() /
      iters;
  comm.Allreduce(&time_us, 1, DataType::kFloat64, ReduceOp::kMax,
                 {AllreduceAlgorithm::kRecursiveDoubling})
      ->Wait();
  return time_us;
}

// --check: one more call on fresh data against the closed form; the wrong elements of every rank
// (this rank's first one on stderr).
int64_t CheckAllreduce(Communicator& comm, BenchBuffer& buf, size_t count, DataType dtype,
                       const AllreduceOptions& ao, const std::string& name) {
  Fill(buf.host(), dtype, count, comm.rank());
  buf.Upload(count * ElementSize(dtype));
  buf.Allreduce(count, dtype, ao);
  buf.Drain();
  buf.Download(count * ElementSize(dtype));
  size_t first_bad = 0;
  int64_t wrong = CountWrong(buf.host(), dtype, count, comm.size(), &first_bad);
  if (wrong > 0)
    std::fprintf(stderr, "rank %d: %s allreduce of %zu bytes: %lld wrong elements, first at %zu\n",
                 comm.rank(), name.c_str(), count * ElementSize(dtype),
                 static_cast<long long>(wrong), first_bad);
  comm.Allreduce(&wrong, 1, DataType::kInt64, ReduceOp::kSum,
                 {AllreduceAlgorithm::kRecursiveDoubling})
      ->Wait();
  return wrong;
}

}  // namespace

int RunBenchAllreduce(Communicator& comm, const BenchAllreduceOptions& o,
                      const topology::CostModel* model) {
  const DataType dtype = ParseDataType(o.dtype);
  const size_t elem = ElementSize(dtype);
  const size_t min_bytes = std::max(elem, ParseBytes(o.min_bytes, "--min-bytes"));
  const size_t max_bytes = ParseBytes(o.max_bytes, "--max-bytes");
  if (max_bytes < min_bytes)
    throw Error(ErrorCode::kInvalidArgument, "--max-bytes is smaller than --min-bytes");
  std::vector<std::string> algos;
  if (o.algo == "all")
    algos = {"ring", "rd", "rhd", "tree", "hier", "auto"};
  else
    algos = {AllreduceAlgorithmName(ParseAllreduceAlgorithm(o.algo))};

  const int p = comm.size();
  const bool lead = comm.rank() == 0;
  const std::unique_ptr<Device> device = OpenBenchDevice(o.device, o.local_rank);
  StagingOptions staging;
  staging.chunk_bytes = ParseBytes(o.staging_chunk, "--staging-chunk");
  BenchBuffer buf(comm, device.get(), max_bytes / elem * elem + elem, staging);
  nlohmann::json results = nlohmann::json::array();
  int64_t total_wrong = 0;
  if (lead) {
    std::printf(
        "# cann-dist-train allreduce: %d ranks on %d node(s), backend %s, dtype %s, op sum, "
        "buffers on %s\n",
        p, comm.layout().num_nodes, comm.backend_name().c_str(), DataTypeName(dtype),
        buf.where().c_str());
    std::printf("# algbw = bytes / time; busbw = algbw * 2(n-1)/n (nccl-tests)\n");
    std::printf("%12s %12s %6s %10s %12s %11s %11s %7s%s\n", "bytes", "count", "type", "algo",
                "time_us", "algbw_GBps", "busbw_GBps", "check", model ? "  predicted_us" : "");
  }
  for (const std::string& name : algos) {
    AllreduceOptions ao{ParseAllreduceAlgorithm(name)};
    for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
      const size_t count = bytes / elem;
      const size_t real_bytes = count * elem;
      int iters = o.iters > 0
                      ? o.iters
                      : static_cast<int>(std::clamp<size_t>((256u << 20) / real_bytes, 5, 200));
      // `auto` is timed once the autotuner has decided this size.
      const int tuned =
          ao.algorithm == AllreduceAlgorithm::kAuto
              ? 1 + AllreduceAutotuner::CallsToDecide(
                        o.autotune_trials, AllreduceAutotuner::kDefaultMinBytes, real_bytes)
              : 0;
      Fill(buf.host(), dtype, count, comm.rank());
      buf.Upload(real_bytes);
      const int warmup =
          WarmUp(comm, buf, count, dtype, ao, o.warmup > 0 ? std::max(o.warmup, tuned) : 0,
                 std::max({2, iters / 5, tuned}));
      const double time_us = TimeAllreduce(comm, buf, count, dtype, ao, iters);
      std::string check = "-";
      if (o.check) {
        const int64_t wrong = CheckAllreduce(comm, buf, count, dtype, ao, name);
        total_wrong += wrong;
        check = wrong == 0 ? "ok" : "WRONG";
      }
      const double algbw = real_bytes / time_us / 1e3;  // bytes/us -> GB/s
      const double busbw = algbw * 2.0 * (p - 1) / std::max(1, p);
      const AllreduceAlgorithm ran = ao.algorithm == AllreduceAlgorithm::kAuto
                                         ? comm.ResolveAllreduce(count, dtype)
                                         : ao.algorithm;
      const std::string shown =
          ao.algorithm == AllreduceAlgorithm::kAuto && ran != AllreduceAlgorithm::kAuto
              ? name + ">" + AllreduceAlgorithmName(ran)
              : name;
      const double predicted = model && ran != AllreduceAlgorithm::kAuto
                                   ? model->PredictUs(ran, static_cast<double>(real_bytes))
                                   : 0;
      if (lead) {
        std::printf("%12zu %12zu %6s %10s %12.1f %11.3f %11.3f %7s", real_bytes, count,
                    DataTypeName(dtype), shown.c_str(), time_us, algbw, busbw, check.c_str());
        if (model) std::printf("  %12.1f", predicted);
        std::printf("\n");
        std::fflush(stdout);
        nlohmann::json row = {{"algo", name},
                              {"ran", AllreduceAlgorithmName(ran)},
                              {"bytes", real_bytes},
                              {"count", count},
                              {"dtype", DataTypeName(dtype)},
                              {"time_us", time_us},
                              {"algbw_GBps", algbw},
                              {"busbw_GBps", busbw},
                              {"iters", iters},
                              {"warmup", warmup},
                              {"check", check}};
        if (model) row["predicted_us"] = predicted;
        results.push_back(row);
      }
      if (bytes > max_bytes / 4) break;  // avoid overflow past max
    }
  }
  if (lead && !o.json.empty()) {
    nlohmann::json doc = {{"world_size", p},
                          {"nodes", comm.layout().num_nodes},
                          {"backend", comm.backend_name()},
                          {"device", buf.where()},
                          {"dtype", DataTypeName(dtype)},
                          {"op", "sum"},
                          {"results", results}};
    WriteFileAtomically(o.json, doc.dump(2) + "\n");
  }
  if (lead && o.check)
    std::printf("# check: %s\n",
                total_wrong == 0 ? "every element of every size matched" : "MISMATCHES FOUND");
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace cdt::cli
