// Building a communicator over TCP (full mesh) from a rendezvous store.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cdt/allreduce_rules.h"
#include "cdt/allreduce_selector.h"
#include "cdt/communicator.h"
#include "cdt/log.h"
#include "cdt/store.h"
#include "cdt/traffic_gate.h"

namespace cdt {

struct CommunicatorOptions {
  int rank = 0;
  int size = 1;
  // Generation of the group; a new group after a failure uses generation + 1 on the same store.
  uint64_t generation = 0;
  // Store namespace: keys live under "<job_id>/gen<generation>/".
  std::string job_id = "cdt";
  // The job secret (CDT_JOB_SECRET), shared by every rank: both ends of every peer connection prove
  // a key derived from it, the generation and both ranks' keys (docs/security.md). Empty = the
  // generation's token and the ranks' published keys alone, which are only as private as the
  // store: refused on an address beyond loopback unless allow_insecure (CDT_ALLOW_INSECURE=1).
  std::string secret;
  bool allow_insecure = false;
  std::string bind_host;                     // where to listen; empty = advertise_host only
  std::string advertise_host = "127.0.0.1";  // the address peers dial (CDT_NODE_ADDR)
  // Seal every byte sent over TCP (--encrypt, CDT_ENCRYPT=1): AES-256-GCM or ChaCha20-Poly1305
  // under keys from the handshake; a changed byte fails the operation with kProtocol naming the
  // peer. Same-node shared memory is not affected. Every rank must agree.
  bool encrypt = false;
  std::string host_id;  // node identity for hierarchical collectives; empty = this machine's
  // A peer that moves no byte for this long is declared silent (kTimeout). Also bounds set-up.
  std::chrono::milliseconds timeout{30000};
  // CDT_DEBUG=collectives: before each collective, ranks compare (op, dtype, count, root) and fail
  // with kMismatch showing what every rank submitted. Costs one small all-to-all per collective.
  bool check_fingerprints = false;
  // Default for AllreduceOptions::algorithm == kAuto (CDT_ALLREDUCE_ALGO); kAuto = ask `selector`.
  AllreduceAlgorithm default_algorithm = AllreduceAlgorithm::kAuto;
  std::shared_ptr<AllreduceSelector> selector;  // null = MakeFixedThresholdSelector()
  // User rules consulted before the selector (CDT_ALLREDUCE_RULES; cdt/allreduce_rules.h).
  std::shared_ptr<const AllreduceRules> rules;
  // Online autotuning (comm/allreduce_autotuner.h): where the selector names a runner-up, time
  // this many calls of each candidate per size class, then keep the faster. 0 = off
  // (CDT_AUTOTUNE=0).
  int autotune_trials = 2;
  // ... and until each candidate's timed calls moved this many bytes (small classes take more
  // calls).
  size_t autotune_min_bytes = 4 << 20;
  // Autotuning decisions (info, rank 0) and refused connections (warnings).
  Log log;
  size_t segment_bytes = 256 << 10;  // pipelining granularity
  // Ranks of one node share memory for their collectives (comm/node_arena_setup.h): per node
  // 2 x ranks x shm_slot_bytes of /dev/shm. CDT_SHM=0 turns it off (everything over TCP).
  bool shared_memory = true;
  size_t shm_slot_bytes = 1 << 20;
  // Large all-to-all blocks among a node's ranks move in one copy, the kernel reading each
  // sender's buffer into the receiver's (process_vm_readv, as Open MPI's CMA), when every rank of
  // the node may read the others' memory (probed at set-up; same user, no Yama restriction);
  // otherwise, or with CDT_SHM_SINGLE_COPY=0, through the slots as smaller blocks.
  bool shm_single_copy = true;
  // Operations moving at least this many bytes run on the bulk channel, smaller ones on the latency
  // channel (two connections per peer pair, tuned differently; see TcpMesh and docs/benchmarks.md).
  size_t bulk_min_bytes = 2 << 20;
  // Socket buffers per channel for same-host peers and for other hosts; 0 = kernel autotuning.
  int local_latency_socket_buffer_bytes = 0;
  int local_bulk_socket_buffer_bytes = 64 << 10;
  int remote_socket_buffer_bytes = 0;
  // Busy-wait (with yields) this long for data before sleeping in poll(), while some transfer
  // waits on a same-host peer (spin) or only on other hosts (remote_spin); see MeshOptions.
  std::chrono::microseconds spin{500};
  std::chrono::microseconds remote_spin{0};
  // After an operation, the background thread looks for the next one this long (yielding)
  // before it sleeps, and Work::Wait looks for completion this long before it sleeps. Waking a
  // sleeping thread costs ~25 us each way on this VM: a 1-rank allreduce took 53 us with both
  // asleep, 2 us with both spinning 100 us; 30 us each made a 4-rank 4 KiB allreduce in shared
  // memory 20 us instead of 36 (docs/benchmarks.md, "Shared memory"). 0 = sleep at once.
  std::chrono::microseconds idle_spin{30};
  // A collective of at most this many bytes submitted while nothing is queued or running runs on
  // the calling thread, not the background one: the call returns when it is done (its peers have
  // reached it too) and the Work is complete. The hand-off and wake-up it saves were half of a
  // 1 KiB all-gather on 4 ranks sharing 2 cores (docs/benchmarks.md, "Small collectives on the
  // caller's thread"). Never sends and receives. 0 = every operation on the background thread.
  size_t inline_max_bytes = 64 << 10;
  // Point-to-point (cdt/point_to_point.h): messages that arrive before their receive is posted
  // are kept, up to this many bytes in all. Past it, the next such message waits in its
  // connection until its receive is posted (TCP then holds its sender back, as MPI's rendezvous
  // protocol does for large messages), and what that sender sent after it waits behind it.
  size_t p2p_unexpected_max_bytes = 256 << 20;
  // A receive from another host sleeps until this many bytes can be read (SO_RCVLOWAT); 0 = any.
  int remote_receive_batch_bytes = 64 << 10;
  // Shared with another communicator over the same ranks (cdt/traffic_gate.h): the `urgent` one
  // holds the gate while it has bytes ready to send; the other yields to it.
  std::shared_ptr<TrafficGate> traffic_gate;
  bool urgent = false;
  // The yielding side's send buffer (SO_SNDBUF): bounds the bulk bytes queued ahead of urgent ones.
  // With a floor > 0 it follows the path toward another host, between the floor and that size
  // (twice the measured bandwidth-delay product; MeshOptions); 0, the default, keeps it fixed.
  int yield_send_buffer_bytes = 64 << 10;
  int yield_send_buffer_min_bytes = 0;
};

// Connects to every other rank (blocking, bounded by options.timeout) and returns a ready
// communicator. Throws cdt::Error naming missing ranks on timeout.
std::unique_ptr<Communicator> ConnectTcpCommunicator(Store& store,
                                                     const CommunicatorOptions& options);

}  // namespace cdt
