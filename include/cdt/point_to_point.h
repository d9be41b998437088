// PointToPoint: tagged messages between the ranks of a group, and receives from any source —
// torch.distributed's send / recv / recv from any source with tags, MPI's MPI_Send / MPI_Recv with
// MPI_ANY_SOURCE. It lives beside a Communicator (whose Send/Recv are untagged byte streams in its
// operation queue) and shares nothing with it but the store and the options.
//
// Contract:
//  * A message is (tag, bytes). A receive matches the first message, in order of arrival, from its
//    source (or from any rank with kAnySource) that carries its tag; messages from one sender
//    arrive in the order it sent them. A message nobody waits for yet is kept (copied) until a
//    receive matches it, as MPI's eager protocol does, up to
//    CommunicatorOptions::p2p_unexpected_max_bytes kept at once (256 MiB): so two ranks may send
//    each other that much before receiving. Past it, the next such message stays unread in its
//    connection until its receive is posted (MPI's rendezvous protocol: its send completes then,
//    once TCP's buffers are full) and that sender's later messages wait behind it; a receive
//    that times out behind it says so. Memory stays bounded whatever the peers send.
//  * Sizes must match: a receive of n bytes matched by a message of m != n bytes fails with
//    kInvalidArgument naming both (the message is consumed).
//  * Connections are made on demand, per pair of ranks, the first time a send or a receive names
//    the peer (a 2-rank TcpMesh: authenticated and sealed like the communicator's). A sender
//    "rings" the receiver through the store (<prefix>/bell/<rank>) so that a receive from any
//    source, which cannot know whom to connect to, learns who is sending. A rank that never
//    sends or receives costs nothing. Both ranks of a pair must reach the channel within the
//    timeout of each other, or the one waiting fails with kTimeout naming the other.
//  * Operations complete through their callback: a send once every byte is handed to the kernel,
//    a receive once its buffer holds the message. The callback runs on the channel's thread (or
//    on the calling thread when the result is known at once), holding no lock of the channel: it
//    may post more. A buffer must stay valid until its callback ran.
//  * Deadlines: a receive that no message matches within `timeout` fails alone with kTimeout
//    (nothing is written to its buffer). A peer whose connection closes (it ended its channel,
//    or died) fails what names it, then and later, with kPeerLost naming it; receives from any
//    source wait on for the others. A message stalled half-way (no byte for `timeout`), a
//    connection that does not form, a broken store or a bad frame (kProtocol) break the channel:
//    every pending and later operation fails with that error, as a communicator's do.
//  * The store must be usable from several threads (the engine's stores and torch's are).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "cdt/error.h"
#include "cdt/store.h"
#include "cdt/tcp_communicator.h"

namespace cdt {

class PointToPoint {
 public:
  static constexpr int kAnySource = -1;
  // `source`: the sender's rank (what a receive from kAnySource got); `error`: null on success.
  using Done = std::function<void(int source, const Error* error)>;

  virtual ~PointToPoint() = default;  // fails what is pending with kAborted, then returns
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void Send(const void* data, size_t bytes, int dst, int64_t tag, Done done) = 0;
  // `src`: a rank other than this one, or kAnySource.
  virtual void Recv(void* data, size_t bytes, int src, int64_t tag, Done done) = 0;
  // Fails every pending and later operation with kAborted; any thread, any number of times.
  virtual void Abort() = 0;
};

// Uses options.rank, size, generation, job_id (keys under "<job_id>/gen<g>/p2p/"), secret,
// allow_insecure, bind_host, advertise_host, encrypt, host_id, timeout, log and the socket
// buffer sizes. Connects nothing yet (see the contract); throws kInvalidArgument for a bad rank.
std::unique_ptr<PointToPoint> CreatePointToPoint(std::shared_ptr<Store> store,
                                                 const CommunicatorOptions& options);

}  // namespace cdt
