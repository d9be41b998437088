// α-β cost model of every allreduce algorithm on a two-level cluster (ranks within a node, nodes
// linked by one uplink each), after Thakur, Rabenseifner & Gropp (2005) and the shape of NCCL's
// tuning.cc / HCCL's cost model: time = latency terms + bytes over the bottleneck link / bandwidth.
//
// Intra-node steps are bounded both by one stream (bytes per rank / β) and by the node as a whole
// (bytes moved by all its ranks / node bandwidth): on one host every copy shares the same cores.
// Inter-node terms count the bytes that cross a node's uplink, which all ranks of that node share:
// a flat ring moves 2(p-1)/p·n across it; recursive doubling and halving-doubling, per step, the
// buffer share of every rank of the node whose partner sits on another node (counted from the
// actual placement, so 1 + 3 ranks differ from 2 + 2); the hierarchical algorithm 2(N-1)/N·n in
// total. Ranks are assumed placed node by node (as our launcher does).
#pragma once

#include <string>
#include <vector>

#include "cdt/types.h"

namespace cdt::topology {

struct LinkLevel {
  std::string name;      // "intra" (same node) or "inter" (between nodes)
  double alpha_us = 0;   // one-way latency of a small message
  double beta_GBps = 0;  // bandwidth of one stream, 1e9 bytes/s
  // Intra only: what all streams inside one node achieve together (copies share the node's cores
  // and memory). 0 = unknown, treated as beta_GBps.
  double node_GBps = 0;
};

struct ClusterShape {
  std::vector<int> ranks_per_node;  // one entry per node
  int world() const;
  int nodes() const { return static_cast<int>(ranks_per_node.size()); }
  int max_ranks_per_node() const;
};

struct CostModel {
  ClusterShape shape;
  LinkLevel intra;                   // used when some node has >= 2 ranks
  LinkLevel inter;                   // used when there are >= 2 nodes
  size_t segment_bytes = 256 << 10;  // pipelining granularity of tree / chain
  // Same-node ranks share memory: the hierarchical allreduce's intra-node steps cost, per chunk of
  // shm_chunk_bytes, two barriers of shm.alpha_us (one for a single node's chunk up to 64 KiB)
  // plus the chunk over shm.beta_GBps (buffer bytes through the node's copy-in, reduction and
  // copy-out, all its ranks at once).
  bool shared_memory = false;
  LinkLevel shm{"shm"};
  size_t shm_chunk_bytes = 1 << 20;

  // Predicted time of one allreduce of `bytes` with `algo` (not kAuto), in microseconds.
  double PredictUs(AllreduceAlgorithm algo, double bytes) const;
};

// The parts of the hierarchical allreduce, in microseconds: its intra-node steps in shared memory,
// and its inter-node allreduce of the shards.
double ShmStepsUs(const CostModel& model, double bytes);
double HierInterNodeUs(const CostModel& model, double bytes);

// Best allreduce time for `bytes` over every algorithm the model knows, in microseconds.
double BestAllreduceUs(const CostModel& model, double bytes);

}  // namespace cdt::topology
