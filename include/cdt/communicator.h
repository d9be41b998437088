// Communicator: a fixed group of ranks that runs collectives on raw buffers.
//
// Contract (shared by every backend):
//  * Membership never changes. On a failure, Abort() (or the failure itself) breaks the
//  communicator;
//    build a new one with generation + 1 on the same store (c10d's rule). Connections from an older
//    generation are refused by the new one.
//  * Operations are asynchronous: each call queues the operation and returns a Work handle at once.
//    Queued operations run one at a time, in submission order, on a background thread. Every rank
//    must submit the same collectives in the same order (DDP's rule; no negotiation). A backend
//    may run a small collective with nothing queued ahead of it on the calling thread instead
//    (TcpCommunicator: CommunicatorOptions::inline_max_bytes); the call then returns once it is
//    done, so collectives on two communicators must be submitted in the same order on every rank
//    too (as NCCL requires), and the Work it returns is already complete. With
//    CommunicatorOptions::check_fingerprints, ranks verify that before each collective.
//  * Buffers passed to an operation must stay valid and untouched until its Work completes.
//  * Failure: a dead peer (connection closed or reset) or a silent one (no byte moved for
//  `timeout`)
//    fails the running operation with cdt::Error(kPeerLost / kTimeout) naming this rank, the peer,
//    its address, the operation and its sequence number. The communicator then closes every
//    connection (so its peers fail fast too) and fails all queued and future operations with
//    kAborted carrying the original message.
//  * Destroying a communicator lets queued operations finish (each bounded by the timeout); call
//    Abort() first to drop them at once.
//  * Send/Recv block the queue until the bytes are handed over, as MPI_Send may: a pattern where
//    two ranks both send large messages to each other before receiving stalls until the timeout.
//    Order point-to-point operations as for MPI, or use the collectives.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cdt/types.h"

namespace cdt {

class AllreduceSelector;  // cdt/allreduce_selector.h

// Handle to one queued operation.
//
//   work->Wait(timeout):            (timeout > 0)
//     block until the operation finished;
//       while any operation of the communicator moves (this one, or those queued ahead of it),
//       keep waiting: a long queue on a slow link is not a failure;
//       once nothing moved on the communicator for `timeout`: abort the communicator, wait for
//       the operation to end (it fails with kAborted at once), then throw cdt::Error(kTimeout);
//     if it failed: rethrow its cdt::Error.
//   Whether it returns or throws, the operation is over: no buffer it was given is read or
//   written after Wait. (To look without blocking, use Completed().)
class Work {
 public:
  virtual ~Work() = default;
  virtual void Wait(std::chrono::milliseconds timeout) = 0;
  // Waits with the communicator's own timeout plus a margin: the transport itself fails an
  // operation whose peer moved nothing for the timeout, so this is the backstop.
  virtual void Wait() = 0;
  // True once the operation finished, successfully or not. Never blocks.
  virtual bool Completed() const = 0;
  // Seconds the operation ran on the communicator's thread (taken off the queue to finished);
  // 0 until it completed. The trainer's overlap accounting adds these up.
  virtual double run_seconds() const { return 0; }
  // When it ran there: taken off the queue, finished. Both zero until it completed. Timelines
  // (`train --timeline`) draw these.
  struct Interval {
    std::chrono::steady_clock::time_point start, end;
  };
  virtual Interval run_interval() const { return {}; }
};

// Waits for `work` (null: returns at once) and drops its error: for destructors, whose buffers an
// operation still queued or running writes into. Whoever else waits for it sees the error.
void WaitIgnoringError(const std::shared_ptr<Work>& work) noexcept;

struct AllreduceOptions {
  AllreduceAlgorithm algorithm = AllreduceAlgorithm::kAuto;
};

// Describes which ranks share a node; collectives that care (hierarchical) read it.
struct NodeLayout {
  std::vector<int> node_of_rank;  // node index (0..num_nodes-1) of each rank, in rank order
  int num_nodes = 1;
};

// What a communicator has moved since it was built (the dashboard's communication pattern and
// Prometheus metrics, docs/dashboard.md). Counted when an operation completes; a failed one is not.
struct CommStats {
  struct Algorithm {
    std::string name;  // AllreduceAlgorithmName: ring, rd, hd, tree, hier
    uint64_t ops = 0;
    uint64_t bytes = 0;  // buffer bytes reduced (count x element size), not wire bytes
    double seconds = 0;  // on the communicator thread, start to end of each operation
  };
  std::vector<Algorithm> allreduce;  // every algorithm that ran at least once
  // Per peer rank (size() entries, 0 at this rank): bytes this rank sent to it and received from
  // it over the network transport. Same-node ranks that share memory move most bytes there.
  std::vector<uint64_t> sent_bytes, received_bytes;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual uint64_t generation() const = 0;
  virtual const NodeLayout& layout() const = 0;
  // Whether the ranks of every node with several share a memory arena (the hierarchical
  // allreduce's intra-node steps then run in it; comm/node_arena_setup.h).
  virtual bool shares_memory() const { return false; }
  virtual std::string backend_name() const = 0;
  // A copy of the counters (any thread). Backends that keep none return empty vectors.
  virtual CommStats stats() const { return {}; }

  // In-place allreduce of `count` elements.
  virtual std::shared_ptr<Work> Allreduce(void* data, size_t count, DataType dtype, ReduceOp op,
                                          AllreduceOptions options = {}) = 0;
  // In-place broadcast of `count` elements from `root`.
  virtual std::shared_ptr<Work> Broadcast(void* data, size_t count, DataType dtype, int root) = 0;
  // Every rank contributes counts[rank] elements; `output` receives all contributions in rank order
  // (sum(counts) elements). Allgather is the case of equal counts.
  virtual std::shared_ptr<Work> Allgatherv(const void* input, void* output,
                                           const std::vector<size_t>& counts, DataType dtype) = 0;
  // `input` holds sum(counts) elements; rank r receives the reduction of its slice (counts[r]
  // elements at offset sum(counts[0..r))) into `output`.
  virtual std::shared_ptr<Work> ReduceScatter(const void* input, void* output,
                                              const std::vector<size_t>& counts, DataType dtype,
                                              ReduceOp op) = 0;
  // `count` elements reduced into `data` at `root`; the other ranks' `data` is left as it was.
  virtual std::shared_ptr<Work> Reduce(void* data, size_t count, DataType dtype, ReduceOp op,
                                       int root) = 0;
  // Rank r contributes counts[r] elements (every rank passes the same counts); at `root`,
  // `output` receives them all in rank order (sum(counts) elements). Elsewhere `output` is unused.
  virtual std::shared_ptr<Work> Gatherv(const void* input, void* output,
                                        const std::vector<size_t>& counts, DataType dtype,
                                        int root) = 0;
  // At `root`, `input` holds sum(counts) elements; rank r receives its slice (counts[r] elements
  // at offset sum(counts[0..r))) into `output`. Elsewhere `input` is unused.
  virtual std::shared_ptr<Work> Scatterv(const void* input, void* output,
                                         const std::vector<size_t>& counts, DataType dtype,
                                         int root) = 0;
  // send_counts[p] elements of `input` (blocks in rank order) go to rank p; recv_counts[p]
  // elements from rank p land in `output` (blocks in rank order). What rank p sends here must be
  // what this rank expects from it (send_counts[me] == recv_counts[me] here); `input` and
  // `output` must not overlap.
  virtual std::shared_ptr<Work> Alltoallv(const void* input, const std::vector<size_t>& send_counts,
                                          void* output, const std::vector<size_t>& recv_counts,
                                          DataType dtype) = 0;
  virtual std::shared_ptr<Work> Barrier() = 0;
  // Point to point: bytes are matched in submission order per (sender, receiver) pair.
  virtual std::shared_ptr<Work> Send(const void* data, size_t bytes, int dst) = 0;
  virtual std::shared_ptr<Work> Recv(void* data, size_t bytes, int src) = 0;

  // Equal-count allgather: output holds size() * count elements.
  std::shared_ptr<Work> Allgather(const void* input, void* output, size_t count, DataType dtype) {
    return Allgatherv(input, output, std::vector<size_t>(static_cast<size_t>(size()), count),
                      dtype);
  }

  // Replaces the policy that resolves AllreduceAlgorithm::kAuto (the topology planner installs
  // itself here). Call from the submitting thread, between operations; every rank must install an
  // equivalent selector so that all pick the same algorithm. Backends that choose for themselves
  // (MPI) keep it but do not consult it.
  virtual void SetAllreduceSelector(std::shared_ptr<AllreduceSelector> selector) = 0;
  // The algorithm an allreduce of `count` elements with kAuto would run (for reports).
  virtual AllreduceAlgorithm ResolveAllreduce(size_t count, DataType dtype) const = 0;

  // Unblocks every waiting thread at once: the running and queued operations fail with kAborted,
  // connections are closed. Safe to call from any thread, any number of times.
  virtual void Abort() = 0;
};

}  // namespace cdt
