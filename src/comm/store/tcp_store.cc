// The public face of the TCP store (cdt/tcp_store.h): TcpStoreServer and TcpStoreClient behind
// the library's stable names, so that programs built against the installed headers need none of
// src/.
#include "cdt/tcp_store.h"

#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"

namespace cdt {
namespace {

class TcpStoreServerHandle final : public StoreServer {
 public:
  TcpStoreServerHandle(const std::string& host, uint16_t port, const std::string& secret)
      : server_(host, port, secret) {}
  std::string host() const override { return server_.address().host; }
  uint16_t port() const override { return server_.address().port; }

 private:
  TcpStoreServer server_;
};

}  // namespace

std::unique_ptr<StoreServer> StartTcpStore(const std::string& host, uint16_t port,
                                           const std::string& secret) {
  return std::make_unique<TcpStoreServerHandle>(host, port, secret);
}

std::unique_ptr<Store> ConnectTcpStore(const std::string& host, uint16_t port,
                                       const std::string& secret,
                                       std::chrono::milliseconds connect_timeout,
                                       std::chrono::milliseconds request_timeout) {
  return std::make_unique<TcpStoreClient>(net::HostPort{host, port}, secret, connect_timeout,
                                          request_timeout);
}

}  // namespace cdt
