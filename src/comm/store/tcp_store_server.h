// TcpStoreServer: the rendezvous key-value store, hosted by the node-0 agent (or rank 0 when no
// agent runs). One background thread serves every client with poll(); a client parked in Wait()
// costs no thread. Every connection must prove it knows the job secret (HMAC challenge, the secret
// never crosses the wire) before any key is read or written. Malformed input closes that connection
// only and is counted; it never stops the server.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "comm/transport/socket.h"

namespace cdt {

class TcpStoreServer {
 public:
  // Binds host:port (port 0 = any free port) and starts serving. Throws kIo if it cannot bind.
  TcpStoreServer(const std::string& host, uint16_t port, std::string secret);
  ~TcpStoreServer();  // Stops the server and closes every connection.
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  const net::HostPort& address() const { return address_; }
  // Connections closed for bad authentication or malformed frames since start.
  uint64_t rejected_connections() const { return rejected_.load(); }
  void Stop();

 private:
  struct State;
  void Serve();

  net::HostPort address_;
  std::unique_ptr<State> state_;  // touched only by the serving thread after construction
  int wake_fd_ = -1;
  std::atomic<uint64_t> rejected_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace cdt
