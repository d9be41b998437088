// Worker process for the multi-process tests (a test program: it reads its environment directly).
//
//   cdt_test_worker sweep                 every algorithm x dtype x count, exit 1 on a wrong
//   element cdt_test_worker fail-and-recover N    allreduce in a loop until a peer fails; report
//   how fast the
//                                         failure was detected; then form generation 1 with the N
//                                         survivors and check an allreduce there.
// Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, CDT_JOB_SECRET, CDT_TIMEOUT_MS.
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "allreduce_check.h"
#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "comm/store/tcp_store_client.h"

using namespace cdt;

namespace {

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

int Sweep(Communicator& comm) {
  const int p = comm.size();
  int bad = 0;
  for (AllreduceAlgorithm algo : testing::kAlgorithms)
    for (DataType t : testing::kTypes) {
      for (size_t count :
           {size_t{0}, size_t{1}, static_cast<size_t>(p > 1 ? p - 1 : 2), size_t{1031}})
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
          std::string err = testing::CheckAllreduce(comm, algo, t, op, count);
          if (!err.empty()) {
            std::fprintf(stderr, "WRONG %s\n", err.c_str());
            ++bad;
          }
        }
      std::string err = testing::CheckAllreduce(comm, algo, t, ReduceOp::kSum, testing::kLarge);
      if (!err.empty()) {
        std::fprintf(stderr, "WRONG %s\n", err.c_str());
        ++bad;
      }
    }
  std::printf("SWEEP rank=%d wrong=%d\n", comm.rank(), bad);
  return bad == 0 ? 0 : 1;
}

int FailAndRecover(Store& store, Communicator& comm, int survivors, CommunicatorOptions o) {
  std::vector<float> buf(1 << 18, 1.0f);
  int64_t last_ok = MonotonicNs();
  uint64_t iterations = 0;
  try {
    for (;;) {
      comm.Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kSum)->Wait();
      last_ok = MonotonicNs();
      if (++iterations == 3) std::printf("RUNNING rank=%d pid=%d\n", comm.rank(), getpid());
      std::fflush(stdout);
    }
  } catch (const Error& e) {
    std::printf("FAILED rank=%d detected_ns=%lld last_ok_ns=%lld code=%s peer=%d\nMESSAGE %s\n",
                comm.rank(), static_cast<long long>(MonotonicNs()), static_cast<long long>(last_ok),
                ErrorCodeName(e.code()), e.context().peer_rank, e.what());
    std::fflush(stdout);
  }
  // Generation 1: survivors take new ranks in order of arrival.
  o.generation = 1;
  o.size = survivors;
  o.rank = static_cast<int>(store.Add(o.job_id + "/gen1/arrivals", 1) - 1);
  auto next = ConnectTcpCommunicator(store, o);
  int32_t v = 1;
  next->Allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
  std::printf("RECOVERED new_rank=%d world=%d sum=%d\n", next->rank(), next->size(), v);
  std::fflush(stdout);
  return v == survivors ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cdt_test_worker sweep | fail-and-recover SURVIVORS\n");
    return 2;
  }
  try {
    std::string mode = argv[1];
    net::HostPort hp = net::ParseHostPort(
        std::string(std::getenv("MASTER_ADDR")) + ":" + std::getenv("MASTER_PORT"), "MASTER");
    TcpStoreClient store(hp, std::getenv("CDT_JOB_SECRET"), std::chrono::seconds(30));
    CommunicatorOptions o;
    o.rank = EnvInt("RANK", 0);
    o.size = EnvInt("WORLD_SIZE", 1);
    o.job_id = "it";
    o.timeout = std::chrono::milliseconds(EnvInt("CDT_TIMEOUT_MS", 30000));
    if (mode == "sweep") {
      o.segment_bytes = 4096;
      o.host_id = "node" + std::to_string(o.rank * 2 / o.size);  // two emulated nodes
    }
    auto comm = ConnectTcpCommunicator(store, o);
    if (mode == "sweep") return Sweep(*comm);
    if (mode == "fail-and-recover" && argc == 3)
      return FailAndRecover(store, *comm, std::atoi(argv[2]), o);
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cdt_test_worker: %s\n", e.what());
    return 1;
  }
}
