// TcpStoreClient: cdt::Store over one authenticated TCP connection to a TcpStoreServer.
// Thread-safe (requests are serialised on the connection). Each request has a deadline: Get/Wait
// use the caller's timeout, the others `request_timeout` given at construction. A request that
// fails half-way (the connection dropped, a link was down) throws and closes the connection; the
// next request connects and authenticates again within its own deadline. The failed request may or
// may not have been applied (an Add may count once more): callers that retry must tolerate that, as
// the elastic rendezvous does by timing out a round.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "cdt/store.h"
#include "comm/store/store_protocol.h"
#include "comm/transport/socket.h"

namespace cdt {

class TcpStoreClient : public Store {
 public:
  // Connects (retrying until connect_timeout: the server may still be starting) and authenticates
  // both ways. Throws kTimeout if unreachable, kAuth if the secret is wrong or the server cannot
  // prove it knows it (not this job's store), kProtocol if it is not a store at all.
  TcpStoreClient(const net::HostPort& server, const std::string& secret,
                 std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds request_timeout = std::chrono::seconds(30));

  void Set(const std::string& key, const std::string& value) override;
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool Delete(const std::string& key) override;
  bool Check(const std::string& key) override;

 private:
  // Connects and authenticates (sock_ invalid before). Throws kTimeout / kAuth / kProtocol.
  void Connect(net::Deadline connect_deadline, std::chrono::milliseconds handshake_timeout);
  // One connection and handshake; kPeerLost if the store closed it before the handshake ended.
  void ConnectOnce(net::Deadline connect_deadline, std::chrono::milliseconds handshake_timeout);
  // Sends one frame and reads the reply frame; returns (type, payload).
  std::pair<store::MsgType, std::string> Request(store::MsgType type, const std::string& payload,
                                                 net::Deadline deadline);
  std::pair<store::MsgType, std::string> ReadFrame(net::Deadline deadline);
  void WaitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);

  const net::HostPort server_;
  const std::string secret_;
  const std::string where_;  // "store at host:port"
  const std::chrono::milliseconds request_timeout_;
  std::mutex mu_;
  net::Socket sock_;                  // guarded by mu_
  store::FrameAuthenticator frames_;  // guarded by mu_; the connection's session
};

}  // namespace cdt
