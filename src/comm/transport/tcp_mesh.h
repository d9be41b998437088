// TcpMesh: two TCP connections to every other rank of a communicator (one per direction), and the
// single progress primitive every algorithm uses, Exchange().
//
// Exchange(transfers) posts a set of sends and receives and returns when all are done. Transfers to
// the same peer and of the same kind complete in list order (TCP is a byte stream, so the receiver
// must list its receives in the sender's order — every algorithm here does). All sockets are
// non-blocking and driven from the calling thread with poll(); there are no I/O threads and no
// allocation per message. This is what lets a ring step send right and receive left at once without
// deadlock, and what makes failure detection exact:
//  * a peer that closes or resets (killed process) fails the exchange at once with kPeerLost;
//  * a peer that moves no byte for `timeout` (stopped process, cut link) fails it with kTimeout;
//  * Wake() from any thread fails the running and every later exchange with kAborted.
// Errors name this rank, the peer rank and address, the operation and its sequence number.
//
// Connection set-up (Connect) goes through the store, under options.key_prefix:
//   token           16 random bytes chosen by rank 0 for this generation
//   addr/<rank>     "host:port\nhost_id\n<X25519 public key, hex>\n<aes|chacha>" of each rank
// Every rank listens on the address it advertises only, and dials every other rank (its send
// channel); both ends of every connection prove a key derived from the job secret, the key
// prefix, the token and both ranks' published keys (peer_handshake.h), so neither a process of an
// older generation, nor one without the secret, nor one that read the store but does not hold the
// rank's key can join, and a silent connection cannot hold up the others. The accepted connection
// is the receive channel. With MeshOptions::encrypt every byte of data then travels in sealed
// frames (comm/transport/sealed_stream.h): a changed byte fails the operation, naming the peer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <poll.h>

#include "cdt/error.h"
#include "cdt/log.h"
#include "cdt/store.h"
#include "cdt/traffic_gate.h"
#include "comm/transport/peer_handshake.h"
#include "comm/transport/sealed_stream.h"
#include "comm/transport/socket.h"

namespace cdt {

struct Transfer {
  enum class Kind : uint8_t { kSend, kRecv };
  Kind kind;
  int peer;    // global rank
  void* data;  // const for sends
  size_t bytes;
  size_t done = 0;
  // Called on the exchanging thread the moment this transfer completes, while the others are still
  // in flight: this is how a ring reduces one received segment while the next one streams in.
  void (*on_complete)(void* arg, const Transfer& self) = nullptr;
  void* arg = nullptr;
  // When set, the transfer may not start before *gate drops to 0 (an on_complete callback of an
  // earlier transfer in the same exchange counts it down): "forward segment k once it is reduced".
  const int* gate = nullptr;

  static Transfer Send(int peer, const void* data, size_t bytes) {
    return Transfer{Kind::kSend, peer,   const_cast<void*>(data), bytes, 0, nullptr,
                    nullptr,     nullptr};
  }
  static Transfer Recv(int peer, void* data, size_t bytes) {
    return Transfer{Kind::kRecv, peer, data, bytes, 0, nullptr, nullptr, nullptr};
  }
};

// Names the operation in error messages.
struct OpLabel {
  const char* name = "";
  uint64_t seq = 0;
};

struct MeshOptions {
  Log log;  // refused connections
  int rank = 0;
  int size = 1;
  uint64_t generation = 0;
  std::string key_prefix = "cdt";  // store namespace of this communicator
  // The job secret every rank holds: keys the peer handshake (with the generation's token). Empty
  // = the token and the ranks' published keys alone: only as private as the store — so it is
  // refused on an address beyond loopback unless allow_insecure says the risk is taken.
  std::string secret;
  bool allow_insecure = false;
  std::string bind_host;                     // where this rank listens; empty = advertise_host
  std::string advertise_host = "127.0.0.1";  // what peers dial
  // Seal every data byte (AES-256-GCM or ChaCha20-Poly1305 per connection, keys from the
  // handshake): --encrypt / CDT_ENCRYPT=1. Every rank must agree (the handshake refuses a mix).
  bool encrypt = false;
  std::string host_id;  // node identity; empty = this machine's (hostname+netns+boot)
  std::chrono::milliseconds timeout{30000};
  // SO_SNDBUF/SO_RCVBUF (0 = kernel autotuning) of the two channels to ranks on the same host.
  // Measured on loopback (docs/benchmarks.md): small buffers keep the bytes in flight
  // cache-resident and win from ~4 MiB up (1.4x at 16 MiB), autotuned ones win up to 1 MiB (1.3x).
  int local_latency_socket_buffer_bytes = 0;
  int local_bulk_socket_buffer_bytes = 64 << 10;
  // Both channels to other hosts, where the bandwidth-delay product rules: autotuning.
  int remote_socket_buffer_bytes = 0;
  // How long Exchange keeps retrying (with sched_yield) after the last progress before it sleeps
  // in poll(), while some waiting transfer is latency-bound (below). Trades a little CPU for
  // wake-up latency; 0 = always sleep.
  std::chrono::microseconds spin{500};
  // The same while every waiting transfer is a stream with another host (more than a receive
  // batch left, or a send into a full buffer). There the bytes arrive at the link's pace, and a
  // spin that catches each packet as it lands costs the training thread sharing the core a
  // context switch per packet (docs/benchmarks.md, "Wake-ups on slow links"), so the default is
  // to sleep. A small message from another host (its last batch) still gets `spin`: compressed
  // reductions are chains of such messages and lose their latency otherwise.
  std::chrono::microseconds remote_spin{0};
  // A receive from another host sleeps until this many bytes (or all that is left of it) can be
  // read at once (SO_RCVLOWAT), instead of waking for every packet; 0 = wake for any byte.
  int remote_receive_batch_bytes = 64 << 10;
  // Shared with another mesh over the same ranks (cdt/traffic_gate.h). `urgent`: this mesh holds
  // the gate while it has bytes ready to send. Otherwise it yields: its sends pause while the gate
  // is held, and its send sockets hold at most `yield_send_buffer_bytes` (SO_SNDBUF, which bounds
  // the bytes in flight and so the queue the urgent bytes wait behind; 64 KiB keeps a 10 Gbit/s
  // link with a 50 us round trip busy), at most `yield_unsent_bytes` of it unsent
  // (TCP_NOTSENT_LOWAT).
  std::shared_ptr<TrafficGate> traffic_gate;
  bool urgent = false;
  int yield_send_buffer_bytes = 64 << 10;
  int yield_unsent_bytes = 32 << 10;
  // With a floor > 0, toward another host that send buffer follows the path: twice the
  // bandwidth-delay product TCP measured, between this floor and yield_send_buffer_bytes, looked
  // at (at most every 20 ms) when a send finds it full (comm/transport/send_pacing.h). 0 (the
  // default), or a floor at or above the cap: fixed at yield_send_buffer_bytes. Off by default:
  // on the emulated 20 and 100 Mbit/s links it moved waiting from the priority buckets to the
  // bulk ones without a throughput gain beyond noise (docs/benchmarks.md, "A send buffer that
  // follows the path").
  int yield_send_buffer_min_bytes = 0;
  // Bumped (relaxed) whenever an exchange moves bytes or waits on the traffic gate: what a
  // waiting Work watches (comm/operation_watch.h). Must outlive the mesh; null = not counted.
  std::atomic<uint64_t>* progress = nullptr;
  // The ranks that errors of Advance() name, by mesh rank, for a mesh over two ranks of a larger
  // group (comm/point_to_point.cc); empty = the mesh's own ranks.
  std::vector<int> rank_names;
};

class TcpMesh {
 public:
  // Builds the full mesh. Throws kTimeout if some rank does not arrive within options.timeout.
  static std::unique_ptr<TcpMesh> Connect(Store& store, const MeshOptions& options);
  ~TcpMesh();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& peer_address(int rank) const { return addresses_[rank]; }
  const std::vector<std::string>& host_ids() const { return host_ids_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  bool sealed() const { return !senders_.empty(); }

  // Two connections per direction and peer, tuned differently (MeshOptions): every operation runs
  // entirely on one channel, chosen by the communicator from its size.
  static constexpr int kChannels = 2;
  static constexpr int kLatencyChannel = 0;
  static constexpr int kBulkChannel = 1;
  // The channel later Exchange calls use. Same thread as Exchange; change it between operations
  // only.
  void UseChannel(int channel) { channel_ = channel; }

  // Runs every transfer to completion (see the header comment). Throws cdt::Error.
  void Exchange(Transfer* transfers, size_t count, const OpLabel& label);

  // For callers that drive transfers themselves (comm/point_to_point.cc, which polls many meshes
  // at once): moves what the socket of `channel` takes or holds of `x` now, without blocking;
  // returns whether any byte moved. Errors as Exchange's (kPeerLost for a closed peer, kProtocol
  // for a bad sealed frame, kAborted after Wake); silence is the caller's to time. Same thread
  // rules as Exchange.
  bool Advance(Transfer& x, int channel, const OpLabel& label);
  // The socket `x` moves on in `channel`: what to poll for it.
  int SocketOf(const Transfer& x, int channel) const {
    const size_t slot = Slot(channel, x.peer);
    return (x.kind == Transfer::Kind::kSend ? send_socks_ : recv_socks_)[slot].fd();
  }

  // From any thread: wake a blocked Exchange and make every later one throw kAborted.
  void Wake();
  // Shuts every connection down so peers blocked on us fail at once instead of timing out.
  void ShutdownAll();
  bool aborted() const { return aborted_.load(); }

  // Bytes of completed Exchange calls to and from `peer` (any thread; both channels).
  uint64_t bytes_sent_to(int peer) const {
    return sent_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
  }
  uint64_t bytes_received_from(int peer) const {
    return received_[static_cast<size_t>(peer)].load(std::memory_order_relaxed);
  }

 private:
  TcpMesh() = default;
  // Exchange's cold paths: a transfer naming no peer of this mesh (kInvalidArgument), and no byte
  // moved for the timeout (kTimeout naming the first peer still waited on, and every pending one).
  void CheckPeers(const Transfer* t, size_t n, const OpLabel& label) const;
  [[noreturn]] void ThrowStalled(const Transfer* t, size_t npoll, const OpLabel& label) const;
  [[noreturn]] void ThrowPeerError(ErrorCode code, int peer, const std::string& what,
                                   const OpLabel& label) const;

  // Constant after Connect.
  std::vector<int> rank_names_;  // MeshOptions::rank_names
  int Name(int rank) const { return rank_names_.empty() ? rank : rank_names_[rank]; }
  int rank_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{30000};
  std::chrono::microseconds spin_{500};
  std::chrono::microseconds remote_spin_{0};
  int remote_receive_batch_ = 0;
  std::shared_ptr<TrafficGate> gate_;
  bool urgent_ = false;
  std::atomic<uint64_t>* progress_ = nullptr;  // MeshOptions::progress
  // Yielding toward other hosts: the send buffer follows the path (MeshOptions). Per send slot:
  // the size last set (0 = not paced) and when to look again.
  int yield_floor_ = 0, yield_cap_ = 0;
  std::vector<int> paced_send_buffer_;
  std::vector<std::chrono::steady_clock::time_point> next_pacing_;
  void PaceSendBuffer(size_t slot, int fd);
  // One connection per direction and peer, indexed by rank (invalid at rank_): a socket that only
  // ever carries data one way never enters Linux's delayed-ACK "pingpong" (interactive) mode, so
  // the ACKs that open a small send window come back at once whatever algorithm ran before.
  // Indexed by Slot(channel, rank).
  std::vector<net::Socket> send_socks_;
  std::vector<net::Socket> recv_socks_;
  size_t Slot(int channel, int rank) const {
    return static_cast<size_t>(channel) * static_cast<size_t>(size_) + static_cast<size_t>(rank);
  }
  int channel_ = kLatencyChannel;       // used by the exchanging thread only
  std::vector<std::string> addresses_;  // "host:port" of each rank's listener
  std::vector<std::string> host_ids_;
  std::vector<char> remote_;        // per rank: on another host
  std::vector<int> receive_lowat_;  // per receiving socket: SO_RCVLOWAT last set (1 = Linux's)
  // With MeshOptions::encrypt, by slot (invalid at our own rank): the sealed side of each
  // connection we send on and receive on. Empty otherwise.
  std::vector<std::unique_ptr<sealed::SealedSender>> senders_;
  std::vector<std::unique_ptr<sealed::SealedReceiver>> receivers_;
  // One non-blocking send or receive of transfer `x` on its socket: bytes done (> 0), 0 for a
  // closed peer, or -1 with errno; sets *moved when any byte moved on the socket.
  ssize_t Move(Transfer& x, size_t slot, int fd, bool* moved, const OpLabel& label);
  // Connect's steps: the address records, and the sealed sides once the handshakes are done.
  void ReadPeers(Store& store, const MeshOptions& o, std::vector<std::string>* public_keys,
                 std::vector<char>* aes);
  void SealLinks(const handshake::Handshaken& links, const std::vector<char>& aes, bool my_aes);
  // Socket buffers, non-blocking mode and the yielding side's limits, once the mesh has formed.
  void TuneSockets(const MeshOptions& o);
  int wake_fd_ = -1;

  std::atomic<bool> aborted_{false};
  // Per peer, written by the exchanging thread only (relaxed: counters, read for reports).
  std::unique_ptr<std::atomic<uint64_t>[]> sent_, received_;
  void CountCompleted(const Transfer* t, size_t n);
  // Scratch for Exchange, sized at Connect so the hot path never allocates. Used by one thread.
  std::vector<pollfd> pollfds_;
  std::vector<int> poll_owner_;  // transfer index behind each pollfd
  std::vector<int> prev_;        // per transfer: previous one on the same stream
  std::vector<int> last_of_;     // per (peer, kind): last transfer seen
};

// This machine's identity: hostname, network namespace and boot id (two network namespaces on one
// host are two nodes of the emulated cluster).
std::string LocalHostId();

}  // namespace cdt
