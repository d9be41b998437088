#include "topology/link_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

namespace cdt::topology {

namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

// Runs the probe between ranks a (measures) and b; every rank then receives [alpha_us, beta_GBps]
// from a.
void ProbePair(Communicator& comm, int a, int b, const ProbeOptions& o, LinkLevel* out) {
  double result[2] = {0, 0};
  const int me = comm.rank();
  if (me == a || me == b) {
    const int peer = me == a ? b : a;
    uint64_t token = 0;
    std::vector<double> rtts;
    for (int i = 0; i < o.pingpong_iters + 5; ++i) {
      auto start = Clock::now();
      if (me == a) {
        comm.Send(&token, sizeof token, peer)->Wait();
        comm.Recv(&token, sizeof token, peer)->Wait();
      } else {
        comm.Recv(&token, sizeof token, peer)->Wait();
        comm.Send(&token, sizeof token, peer)->Wait();
      }
      if (i >= 5) rtts.push_back(Micros(Clock::now() - start));
    }
    std::vector<char> data(o.stream_bytes, 1);
    char ack = 0;
    auto start = Clock::now();
    for (int i = 0; i < o.stream_iters; ++i) {
      if (me == a)
        comm.Send(data.data(), data.size(), peer)->Wait();
      else
        comm.Recv(data.data(), data.size(), peer)->Wait();
    }
    if (me == a)
      comm.Recv(&ack, 1, peer)->Wait();
    else
      comm.Send(&ack, 1, peer)->Wait();
    double us = Micros(Clock::now() - start);
    std::nth_element(rtts.begin(), rtts.begin() + rtts.size() / 2, rtts.end());
    result[0] = rtts[rtts.size() / 2] / 2;
    result[1] = static_cast<double>(o.stream_bytes) * o.stream_iters / us / 1e3;
  }
  comm.Broadcast(result, 2, DataType::kFloat64, a)->Wait();
  out->alpha_us = result[0];
  out->beta_GBps = result[1];
}

// Node bandwidth: the ranks of one node pair up (0->1, 2->3, ...) and stream at the same time;
// every rank learns (sum of bytes) / (slowest pair's time).
double ProbeNode(Communicator& comm, const std::vector<int>& local, const ProbeOptions& o) {
  const int me = comm.rank();
  double elapsed_us = 0;
  const size_t pairs = local.size() / 2;
  for (size_t i = 0; i < 2 * pairs; ++i) {
    if (local[i] != me) continue;
    const int peer = local[i ^ 1];
    std::vector<char> data(o.stream_bytes, 1);
    char ack = 0;
    auto start = Clock::now();
    for (int it = 0; it < o.stream_iters; ++it) {
      if (i % 2 == 0)
        comm.Send(data.data(), data.size(), peer)->Wait();
      else
        comm.Recv(data.data(), data.size(), peer)->Wait();
    }
    if (i % 2 == 0)
      comm.Recv(&ack, 1, peer)->Wait();
    else
      comm.Send(&ack, 1, peer)->Wait();
    elapsed_us = Micros(Clock::now() - start);
  }
  comm.Allreduce(&elapsed_us, 1, DataType::kFloat64, ReduceOp::kMax)->Wait();
  return static_cast<double>(pairs) * o.stream_bytes * o.stream_iters / elapsed_us / 1e3;
}

// One-way stream from rank `from` to rank `to`, timed by the receiver from its "go" to the last
// byte; every rank receives the bandwidth (GB/s).
double ProbeStream(Communicator& comm, int to, int from, const ProbeOptions& o) {
  double beta = 0;
  const int me = comm.rank();
  if (me == to || me == from) {
    std::vector<char> data(o.stream_bytes, 1);
    char go = 0;
    if (me == to) {
      auto start = Clock::now();
      comm.Send(&go, 1, from)->Wait();
      for (int i = 0; i < o.stream_iters; ++i) comm.Recv(data.data(), data.size(), from)->Wait();
      beta =
          static_cast<double>(o.stream_bytes) * o.stream_iters / Micros(Clock::now() - start) / 1e3;
    } else {
      comm.Recv(&go, 1, to)->Wait();
      for (int i = 0; i < o.stream_iters; ++i) comm.Send(data.data(), data.size(), to)->Wait();
    }
  }
  comm.Broadcast(&beta, 1, DataType::kFloat64, to)->Wait();
  return beta;
}

// The slowest rank's median time of a hierarchical allreduce of `bytes`, in microseconds.
double HierCallUs(Communicator& comm, size_t bytes, int iters) {
  std::vector<float> buf(std::max<size_t>(bytes / sizeof(float), 1), 1.0f);
  AllreduceOptions ao;
  ao.algorithm = AllreduceAlgorithm::kHierarchical;
  auto call = [&] {
    comm.Allreduce(buf.data(), buf.size(), DataType::kFloat32, ReduceOp::kMax, ao)->Wait();
  };
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> us;
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    call();
    us.push_back(Micros(Clock::now() - start));
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  double median = us[us.size() / 2];
  comm.Allreduce(&median, 1, DataType::kFloat64, ReduceOp::kMax)->Wait();
  return median;
}

void ProbeShm(Communicator& comm, const ProbeOptions& o, ProbeResult* r) {
  CostModel m{r->shape, r->intra, r->inter};
  const double small = HierCallUs(comm, 8, o.pingpong_iters);
  const double large = HierCallUs(comm, o.stream_bytes, std::max(o.stream_iters, 5));
  const double L = static_cast<double>(o.stream_bytes);
  const double barriers_small = r->shape.nodes() <= 1 ? 1 : 2;
  r->shm.alpha_us = std::max(0.5, (small - HierInterNodeUs(m, 8)) / barriers_small);
  const double chunks = std::ceil(L / static_cast<double>(m.shm_chunk_bytes));
  const double copy_us = large - HierInterNodeUs(m, L) - 2 * chunks * r->shm.alpha_us;
  r->shm.beta_GBps = L / std::max(copy_us, 1.0) / 1e3;
}

}  // namespace

ClusterShape ShapeOf(const Communicator& comm) {
  ClusterShape s;
  s.ranks_per_node.assign(static_cast<size_t>(comm.layout().num_nodes), 0);
  for (int node : comm.layout().node_of_rank) ++s.ranks_per_node[static_cast<size_t>(node)];
  return s;
}

ProbeResult ProbeLinks(Communicator& comm, const ProbeOptions& o) {
  auto start = Clock::now();
  ProbeResult r;
  r.shape = ShapeOf(comm);
  const auto& node_of = comm.layout().node_of_rank;
  // intra: two lowest ranks of the first node (by node index) that has two.
  int ia = -1, ib = -1;
  for (int node = 0; node < comm.layout().num_nodes && ib < 0; ++node) {
    ia = ib = -1;
    for (int rank = 0; rank < comm.size(); ++rank) {
      if (node_of[static_cast<size_t>(rank)] != node) continue;
      if (ia < 0)
        ia = rank;
      else if (ib < 0)
        ib = rank;
    }
  }
  if (ib >= 0) {
    r.has_intra = true;
    ProbePair(comm, ia, ib, o, &r.intra);
    std::vector<int> local;
    for (int rank = 0; rank < comm.size(); ++rank)
      if (node_of[static_cast<size_t>(rank)] == node_of[static_cast<size_t>(ia)])
        local.push_back(rank);
    r.intra.node_GBps = ProbeNode(comm, local, o);
  }
  if (comm.layout().num_nodes > 1) {
    int ea = -1, eb = -1;
    for (int rank = 0; rank < comm.size(); ++rank) {
      if (node_of[static_cast<size_t>(rank)] == 0 && ea < 0) ea = rank;
      if (node_of[static_cast<size_t>(rank)] == 1 && eb < 0) eb = rank;
    }
    r.has_inter = true;
    ProbePair(comm, ea, eb, o, &r.inter);
    // The slowest uplink bounds every algorithm that crosses nodes: stream from the first rank of
    // each further node (up to kMaxInterProbes) to rank `ea` and keep the minimum.
    std::vector<int> leader(static_cast<size_t>(comm.layout().num_nodes), -1);
    for (int rank = comm.size() - 1; rank >= 0; --rank)
      leader[static_cast<size_t>(node_of[static_cast<size_t>(rank)])] = rank;
    const int last = std::min(comm.layout().num_nodes, 1 + kMaxInterProbes);
    for (int node = 2; node < last; ++node)
      r.inter.beta_GBps =
          std::min(r.inter.beta_GBps, ProbeStream(comm, ea, leader[static_cast<size_t>(node)], o));
  }
  if (comm.shares_memory() && r.has_intra) {
    r.has_shm = true;
    ProbeShm(comm, o, &r);
  }
  // A level that does not exist borrows the other's numbers, so formulas never divide by zero.
  if (!r.has_intra) r.intra = {"intra", r.inter.alpha_us, r.inter.beta_GBps};
  if (!r.has_inter) r.inter = {"inter", r.intra.alpha_us, r.intra.beta_GBps};
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return r;
}

}  // namespace cdt::topology
