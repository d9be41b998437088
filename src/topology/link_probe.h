// Measures each link level with point-to-point probes over a communicator: α (latency) from a
// ping-pong of 8-byte messages (median round trip / 2), β (bandwidth) from a one-way stream (bytes
// / time until the receiver's acknowledgement), and for the intra level also the node bandwidth,
// with the node's ranks streaming in pairs (0->1, 2->3, ...) at once. "intra" is measured on the
// first node that has two ranks; "inter" α between the lowest ranks of nodes 0 and 1, and β as the
// minimum over streams from nodes 1, 2, ... (at most kMaxInterProbes of them) to node 0 — the
// slowest uplink bounds every algorithm that crosses nodes (--link-of on the emulated cluster).
// With shared memory, the "shm" level is timed through the hierarchical allreduce itself: α from
// 8-byte calls (its barriers), β from 4 MiB calls (its copies), the model's inter-node part of the
// same calls taken off on several nodes (the slowest rank's median; kMax keeps the data finite).
// Collective: every rank must call it; results are broadcast so every rank returns the same.
// Takes well under a second on loopback, about 0.3 s more per level on a 1 Gbit/s link.
#pragma once

#include <cstddef>

#include "cdt/communicator.h"
#include "topology/cost_model.h"

namespace cdt::topology {

inline constexpr int kMaxInterProbes = 16;

struct ProbeOptions {
  int pingpong_iters = 50;
  size_t stream_bytes = 4 << 20;
  int stream_iters = 4;
};

struct ProbeResult {
  ClusterShape shape;
  bool has_intra = false;
  bool has_inter = false;
  bool has_shm = false;  // the communicator shares memory (Communicator::shares_memory)
  LinkLevel intra{"intra"};
  LinkLevel inter{"inter"};
  LinkLevel shm{"shm"};
  double seconds = 0;  // wall time of the probes
};

ClusterShape ShapeOf(const Communicator& comm);
ProbeResult ProbeLinks(Communicator& comm, const ProbeOptions& options = {});

}  // namespace cdt::topology
