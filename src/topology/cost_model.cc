#include "topology/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace cdt::topology {

int ClusterShape::world() const {
  int w = 0;
  for (int k : ranks_per_node) w += k;
  return w;
}

int ClusterShape::max_ranks_per_node() const {
  int k = 0;
  for (int r : ranks_per_node) k = std::max(k, r);
  return k;
}

namespace {

// Time of one step that moves `bytes` over a level, in µs (β in GB/s = 1e3 bytes/µs).
double Step(const LinkLevel& level, double bytes) {
  return level.alpha_us + bytes / (std::max(level.beta_GBps, 1e-6) * 1e3);
}

// An intra-node step where each of `ranks` ranks moves `bytes`.
double IntraStep(const LinkLevel& intra, double bytes, int ranks) {
  const double stream = std::max(intra.beta_GBps, 1e-6) * 1e3;
  const double node = std::max(intra.node_GBps > 0 ? intra.node_GBps : intra.beta_GBps, 1e-6) * 1e3;
  return intra.alpha_us + std::max(bytes / stream, bytes * ranks / node);
}

int FloorLog2(int p) {
  int l = 0;
  while ((2 << l) <= p) ++l;
  return l;
}

}  // namespace

double CostModel::PredictUs(AllreduceAlgorithm algo, double n) const {
  const int p = shape.world();
  const int N = shape.nodes();
  const int k = shape.max_ranks_per_node();
  if (p <= 1 || n <= 0) return 0;
  const bool multi = N > 1;
  const int pof2 = 1 << FloorLog2(p);
  // The intra part of a step: all k ranks of a node move `bytes` each at once.
  auto intra_step = [&](double bytes) { return IntraStep(intra, bytes, k); };
  // Ranks as the launcher places them: node by node.
  std::vector<int> node_of;
  for (int node = 0; node < N; ++node)
    node_of.insert(node_of.end(),
                   static_cast<size_t>(shape.ranks_per_node[static_cast<size_t>(node)]), node);
  // Power-of-two fold (comm/collectives/power_of_two_fold.h): the first 2·rem ranks pair up, the
  // odd one of each pair stays; survivor i is rank 2i+1 for i < rem, else i + rem.
  const int rem = p - pof2;
  auto survivor = [&](int i) { return i < rem ? 2 * i + 1 : i + rem; };
  // One exchange step where survivor i swaps `bytes` with survivor i ^ mask. A node's uplink
  // carries the bytes of every one of its ranks whose partner is elsewhere; the step takes as long
  // as the busiest uplink, or an intra-node step when no pair crosses.
  auto exchange_step = [&](int mask, double bytes) {
    std::vector<int> crossing(static_cast<size_t>(N), 0);
    for (int i = 0; i < pof2; ++i) {
      const int a = survivor(i), b = survivor(i ^ mask);
      if (node_of[static_cast<size_t>(a)] != node_of[static_cast<size_t>(b)])
        ++crossing[static_cast<size_t>(node_of[static_cast<size_t>(a)])];
    }
    const int busiest = *std::max_element(crossing.begin(), crossing.end());
    return busiest > 0 ? std::max(Step(inter, busiest * bytes), intra_step(bytes))
                       : intra_step(bytes);
  };
  double fold = 0;
  if (rem > 0) {
    bool fold_crosses = false;
    for (int i = 0; i < rem; ++i)
      fold_crosses |=
          node_of[static_cast<size_t>(2 * i)] != node_of[static_cast<size_t>(2 * i + 1)];
    fold = 2 * (fold_crosses ? Step(inter, n) : intra_step(n));
  }

  switch (algo) {
    case AllreduceAlgorithm::kRing:
      // 2(p-1) steps of n/p; on several nodes each step crosses an uplink with one stream.
      return 2.0 * (p - 1) *
             (multi ? std::max(Step(inter, n / p), intra_step(n / p)) : intra_step(n / p));
    case AllreduceAlgorithm::kRecursiveDoubling: {
      // lg p exchanges of the whole buffer between partners `mask` apart.
      double t = fold;
      for (int mask = 1; mask < pof2; mask <<= 1) t += exchange_step(mask, n);
      return t;
    }
    case AllreduceAlgorithm::kHalvingDoubling: {
      double t = fold;
      double part = n;
      for (int d = pof2 / 2; d >= 1; d /= 2) {
        part /= 2;
        // Reduce-scatter step and the matching allgather step move the same bytes.
        t += 2 * exchange_step(d, part);
      }
      return t;
    }
    case AllreduceAlgorithm::kTree: {
      // Two phases, each moving about n through the busiest node plus the pipeline fill.
      const int depth = std::max(1, FloorLog2(p));
      const double seg = std::min(static_cast<double>(segment_bytes), n / 2);
      const double body =
          multi ? n / (std::max(inter.beta_GBps, 1e-6) * 1e3) : intra_step(n) - intra.alpha_us;
      return 2.0 * (depth * (multi ? Step(inter, seg) : intra_step(seg)) + body);
    }
    case AllreduceAlgorithm::kHierarchical: {
      double t = 0;
      // Direct reduce-scatter + allgather: each rank moves (k-1)/k·n in one step, all at once;
      // in shared memory, the arena's barriers and copies.
      if (k > 1)
        t += shared_memory ? ShmStepsUs(*this, n) : 2 * IntraStep(intra, (k - 1.0) / k * n, k);
      return t + HierInterNodeUs(*this, n);
    }
    case AllreduceAlgorithm::kAuto:
      break;
  }
  return 0;
}

double HierInterNodeUs(const CostModel& m, double n) {
  const int N = m.shape.nodes();
  if (N <= 1) return 0;
  // Every shard's owners allreduce across nodes; the node's uplink carries 2(N-1)/N·n in all.
  const double shard = n / m.shape.max_ranks_per_node();
  if (shard >= (64 << 10))
    return 2.0 * (N - 1) * m.inter.alpha_us +
           2.0 * (N - 1) / N * n / (std::max(m.inter.beta_GBps, 1e-6) * 1e3);
  return std::ceil(std::log2(N)) * Step(m.inter, n);
}

double ShmStepsUs(const CostModel& m, double bytes) {
  const double chunk = static_cast<double>(std::max<size_t>(m.shm_chunk_bytes, 1));
  const double chunks = std::max(1.0, std::ceil(bytes / chunk));
  const double barriers = m.shape.nodes() <= 1 && bytes <= (64 << 10) ? 1 : 2 * chunks;
  return barriers * m.shm.alpha_us + bytes / (std::max(m.shm.beta_GBps, 1e-6) * 1e3);
}

double BestAllreduceUs(const CostModel& model, double bytes) {
  double best = std::numeric_limits<double>::infinity();
  for (AllreduceAlgorithm a : {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                               AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree,
                               AllreduceAlgorithm::kHierarchical})
    best = std::min(best, model.PredictUs(a, bytes));
  return best;
}

}  // namespace cdt::topology
