// The rendezvous store over TCP, for programs that use the engine as a library (docs/library.md):
// one process serves it, every rank connects to it, and the communicator meets its peers there
// (ConnectTcpCommunicator, cdt/tcp_communicator.h). The same server and protocol as the launcher's
// (`cann-dist-train launch`): every connection proves it knows the job secret, both ways, before
// any key is read, and every later frame carries a MAC (docs/security.md).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "cdt/store.h"

namespace cdt {

// A running store server; destroying it stops it and closes every connection.
class StoreServer {
 public:
  virtual ~StoreServer() = default;
  virtual std::string host() const = 0;
  virtual uint16_t port() const = 0;  // the bound port (the one chosen when started with port 0)
};

// Binds host:port (port 0 = any free port) and serves from a background thread. Throws
// cdt::Error(kIo) if it cannot bind. `secret`: the job's shared secret (any non-empty bytes).
std::unique_ptr<StoreServer> StartTcpStore(const std::string& host, uint16_t port,
                                           const std::string& secret);

// Connects to a store server, retrying until connect_timeout (it may still be starting), and
// authenticates both ways. Throws cdt::Error: kTimeout if unreachable, kAuth if the secret is
// wrong, kProtocol if the address is not a store. Requests other than Get/Wait (which take their
// own timeout) give up after request_timeout. The store is thread-safe.
std::unique_ptr<Store> ConnectTcpStore(
    const std::string& host, uint16_t port, const std::string& secret,
    std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds request_timeout = std::chrono::seconds(30));

}  // namespace cdt
