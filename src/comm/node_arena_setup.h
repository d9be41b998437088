// Setting up the shared-memory arena of a communicator's ranks on this node (issue 32), over the
// communicator's own authenticated connections:
//  1. The node's ranks are those whose host id is this rank's (TcpMesh::host_ids); fewer than two:
//     no arena.
//  2. The lowest of them (the leader) removes segments a dead leader of any job left behind
//     ("/dev/shm/cdt-…-p<PID>-…" whose PID no longer exists), creates
//     "/cdt-<job>-g<generation>-p<its pid>-<16 random hex digits>" (mode 0600, O_EXCL: never a
//     segment someone else prepared) and lays the arena out.
//  3. It sends the name to the others over the mesh — the handshake proved every connection, so
//     a name an impostor planted in /dev/shm is never opened; they map it and register.
//  4. Every member tells every other whether it succeeded (one byte each); then the leader
//     unlinks the name. From here the segment has no name: whatever happens to the group,
//     nothing is left in /dev/shm.
// If any member failed (a container that shares the host id but not /dev/shm, /dev/shm full),
// every member of the node goes on without an arena — collectives stay on TCP — and the leader
// logs why.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "cdt/log.h"
#include "comm/transport/node_arena.h"
#include "comm/transport/tcp_mesh.h"

namespace cdt {

struct NodeArenaOptions {
  bool enabled = true;          // CDT_SHM=0 turns it off
  size_t slot_bytes = 1 << 20;  // per member and set: 2 x members x this in /dev/shm
  std::string job_id = "cdt";
  uint64_t generation = 0;
  // How long a barrier wait spins (with sched_yield) before it sleeps on the futex. With more ranks
  // than cores, sleeping at once made a 1 MiB allreduce 3-6x slower than spinning 500 us
  // (docs/benchmarks.md, "Shared memory").
  std::chrono::microseconds spin{500};
  // Probe whether the node's ranks can read each other's memory (NodeArena::ProbeSingleCopy) and,
  // if every rank of the world that has an arena can, enable single-copy reads in the arenas.
  bool single_copy = true;
  Log log;
};

struct NodeArenaSetUp {
  std::unique_ptr<shm::NodeArena> arena;  // null: this rank's intra-node steps run over TCP
  // What every rank's hierarchical allreduce uses as its chunk (CollectiveContext): the smallest
  // of the arenas' slot sizes and kHierarchicalChunkBytes, agreed by all ranks, so that a node
  // on TCP (one rank, or no shared memory) cuts the same shards as a node with an arena.
  size_t hier_chunk_bytes = 0;
  // Every node with several ranks holds an arena, and some node does: the selectors may then
  // choose the hierarchical allreduce for its shared memory (the same answer on every rank).
  bool every_node_shares_memory = false;
};

// Collective over every rank of `mesh`: the node handshake above, then one small allreduce over
// the world for hier_chunk_bytes. Throws what TcpMesh::Exchange throws when a peer fails.
NodeArenaSetUp SetUpNodeArena(TcpMesh& mesh, const NodeArenaOptions& options);

// "/dev/shm" entries left by leaders that no longer run; returns how many were removed.
int RemoveStaleArenas();

}  // namespace cdt
