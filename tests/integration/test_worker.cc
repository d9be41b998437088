// Worker process for the multi-process tests (a test program: it reads its environment directly).
//
//   cdt_test_worker collectives           every collective once, checked (many-rank worlds)
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

// Every collective once (auto algorithms), each element against its closed form: what a world of
// many ranks must get right beyond allreduce. Values are small integers, exact in int64.
int Collectives(Communicator& comm) {
  const int p = comm.size(), r = comm.rank();
  const auto P = static_cast<size_t>(p);
  int bad = 0;
  auto expect = [&](bool ok, const char* what, size_t at) {
    if (!ok && bad++ < 5) std::fprintf(stderr, "WRONG rank %d %s at %zu\n", r, what, at);
  };
  // Allreduce (sum, max) of 1031 elements: rank q holds q + i.
  std::vector<int64_t> sum(1031), max(1031);
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = max[i] = r + static_cast<int64_t>(i);
  comm.Allreduce(sum.data(), sum.size(), DataType::kInt64, ReduceOp::kSum)->Wait();
  comm.Allreduce(max.data(), max.size(), DataType::kInt64, ReduceOp::kMax)->Wait();
  for (size_t i = 0; i < sum.size(); ++i) {
    expect(sum[i] == static_cast<int64_t>(P * i + P * (P - 1) / 2), "allreduce sum", i);
    expect(max[i] == static_cast<int64_t>(i) + p - 1, "allreduce max", i);
  }
  // Broadcast of 517 elements from the last rank.
  std::vector<int64_t> b(517, r == p - 1 ? 7 : -1);
  comm.Broadcast(b.data(), b.size(), DataType::kInt64, p - 1)->Wait();
  for (size_t i = 0; i < b.size(); ++i) expect(b[i] == 7, "broadcast", i);
  // Allgatherv: rank q contributes q % 3 + 1 elements 100 q + j.
  std::vector<size_t> counts(P);
  for (size_t q = 0; q < P; ++q) counts[q] = q % 3 + 1;
  std::vector<int64_t> mine(counts[static_cast<size_t>(r)]), all;
  for (size_t j = 0; j < mine.size(); ++j) mine[j] = 100 * r + static_cast<int64_t>(j);
  for (size_t q = 0; q < P; ++q)
    for (size_t j = 0; j < counts[q]; ++j) all.push_back(100 * static_cast<int64_t>(q) + j);
  std::vector<int64_t> got(all.size(), -1);
  comm.Allgatherv(mine.data(), got.data(), counts, DataType::kInt64)->Wait();
  for (size_t i = 0; i < got.size(); ++i) expect(got[i] == all[i], "allgatherv", i);
  // ReduceScatter (sum) of those counts: every rank's input element i is i + r.
  std::vector<int64_t> in(all.size()), slice(counts[static_cast<size_t>(r)], -1);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i) + r;
  comm.ReduceScatter(in.data(), slice.data(), counts, DataType::kInt64, ReduceOp::kSum)->Wait();
  size_t at = 0;
  for (size_t q = 0; q < static_cast<size_t>(r); ++q) at += counts[q];
  for (size_t j = 0; j < slice.size(); ++j)
    expect(slice[j] == static_cast<int64_t>(P * (at + j) + P * (P - 1) / 2), "reduce-scatter", j);
  // Alltoallv: rank q sends (q + d) % 3 elements 10000 q + 100 d + j to rank d.
  std::vector<size_t> send(P), recv(P);
  std::vector<int64_t> out_expect, send_data;
  for (size_t d = 0; d < P; ++d) {
    send[d] = (static_cast<size_t>(r) + d) % 3;
    recv[d] = (d + static_cast<size_t>(r)) % 3;
    for (size_t j = 0; j < send[d]; ++j) send_data.push_back(10000 * r + 100 * d + j);
    for (size_t j = 0; j < recv[d]; ++j) out_expect.push_back(10000 * d + 100 * r + j);
  }
  std::vector<int64_t> out(out_expect.size(), -1);
  comm.Alltoallv(send_data.data(), send, out.data(), recv, DataType::kInt64)->Wait();
  for (size_t i = 0; i < out.size(); ++i) expect(out[i] == out_expect[i], "alltoallv", i);
  // Reduce (sum) to rank 0 and Gatherv to the middle rank; a barrier to end.
  std::vector<int64_t> red(33, r);
  comm.Reduce(red.data(), red.size(), DataType::kInt64, ReduceOp::kSum, 0)->Wait();
  if (r == 0)
    for (size_t i = 0; i < red.size(); ++i)
      expect(red[i] == static_cast<int64_t>(P * (P - 1) / 2), "reduce", i);
  std::vector<int64_t> gathered(all.size(), -1);
  comm.Gatherv(mine.data(), gathered.data(), counts, DataType::kInt64, p / 2)->Wait();
  if (r == p / 2)
    for (size_t i = 0; i < gathered.size(); ++i) expect(gathered[i] == all[i], "gatherv", i);
  comm.Barrier()->Wait();
  std::printf("COLLECTIVES rank=%d world=%d wrong=%d\n", r, p, bad);
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
    std::fprintf(stderr,
                 "usage: cdt_test_worker sweep | collectives | fail-and-recover SURVIVORS\n");
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
    if (mode == "sweep" || mode == "collectives") {
      o.segment_bytes = 4096;
      o.host_id = "node" + std::to_string(o.rank * 2 / o.size);  // two emulated nodes
    }
    auto comm = ConnectTcpCommunicator(store, o);
    if (mode == "sweep") return Sweep(*comm);
    if (mode == "collectives") return Collectives(*comm);
    if (mode == "fail-and-recover" && argc == 3)
      return FailAndRecover(store, *comm, std::atoi(argv[2]), o);
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cdt_test_worker: %s\n", e.what());
    return 1;
  }
}
