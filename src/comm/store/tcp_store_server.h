// TcpStoreServer: the rendezvous key-value store, hosted by the node-0 agent (or rank 0 when no
// agent runs). One background thread serves every client with poll(); a client parked in Wait()
// costs no thread.
//
// Hostile-network rules (docs/security.md):
//  * Every connection must prove it knows the job secret, and the server proves it back, before
//    any key is read or written (store_protocol.h); every later frame carries a MAC.
//  * Before that proof a peer controls nothing that grows: the only frame read is the fixed-size
//    auth frame, at most `max_unauthenticated` connections wait for theirs (a newer one drops the
//    oldest of the source address holding the most: a flood evicts its own, not a slow client
//    elsewhere; comm/transport/admission.h) and each gets kAuthWindow. The launchers size it for
//    the job (UnauthenticatedFor): 1,024 members connecting at once to a cap of 64 had most of
//    their first connections dropped.
//  * After it, a connection's buffers are bounded: one frame in (<= kMaxFrameBytes), and no new
//    request is read while a reply is still being sent.
//  * Running out of descriptors or memory refuses or drops connections and says so; it never stops
//    the server. Malformed input closes that connection only and is counted.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "cdt/log.h"
#include "comm/transport/socket.h"

namespace cdt {

class TcpStoreServer {
 public:
  static constexpr size_t kMaxUnauthenticated = 64;
  static constexpr size_t kMaxClients = 4096;
  static constexpr std::chrono::seconds kAuthWindow{10};
  // The cap on connections awaiting authentication for a job of `clients` store connections
  // that may all connect at once: room for each twice over, never below kMaxUnauthenticated.
  static size_t UnauthenticatedFor(size_t clients) {
    return std::max(kMaxUnauthenticated, std::min(kMaxClients, 2 * clients));
  }

  // Binds host:port (port 0 = any free port) and starts serving. Throws kIo if it cannot bind.
  // `log`: the connections it drops or refuses (warnings, at most one a second).
  TcpStoreServer(const std::string& host, uint16_t port, std::string secret, Log log = Log(),
                 size_t max_unauthenticated = kMaxUnauthenticated);
  ~TcpStoreServer();  // Stops the server and closes every connection.
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const net::HostPort& address() const { return address_; }
  // Connections closed for bad authentication, malformed frames, or to make room, since start.
  uint64_t rejected_connections() const { return rejected_.load(); }
  void Stop();

 private:
  class State;
  void Serve();

  net::HostPort address_;
  std::unique_ptr<State> state_;  // touched only by the serving thread after construction
  int wake_fd_ = -1;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cdt
