// A fake etcd for tests of EtcdStore against a server that misbehaves: a real HTTP server
// (cpp-httplib) on a free loopback port, whose answer to each path the test sets with On(). It
// answers GET /version as etcd 3.4.23 does, and every other request with 404 until told
// otherwise; it counts the requests per path. Stopped (and its threads joined) when it goes.
// For a real etcd, see etcd_server.h.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "comm/transport/socket.h"

namespace cdt::testing {

class FakeEtcd {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  // A response header as etcd 3.4 writes it, for building replies.
  static constexpr const char* kHeader =
      R"("header":{"cluster_id":"15118495548433857066","member_id":"13668033151171901709",)"
      R"("revision":"7","raft_term":"2"})";

  FakeEtcd() {
    On("/version", Answer(R"({"etcdserver":"3.4.23","etcdcluster":"3.4.0"})"));
    auto dispatch = [this](const httplib::Request& req, httplib::Response& res) {
      Handler h;
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++requests_[req.path];
        const auto it = handlers_.find(req.path);
        if (it != handlers_.end()) h = it->second;
      }
      if (h)
        h(req, res);
      else
        res.status = 404;
    };
    server_.Get(".*", dispatch);
    server_.Post(".*", dispatch);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] {
      server_.listen_after_bind();
      exited_ = true;
    });
  }
  ~FakeEtcd() {
    released_ = true;
    // stop() ends a running listen; repeat it until the thread is out (it may not have begun).
    while (!exited_) {
      server_.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    thread_.join();
  }

  // Sets how `path` ("/v3/kv/range", "/v3/kv/txn", "/version", ...) is answered from now on.
  void On(const std::string& path, Handler h) {
    std::lock_guard<std::mutex> lock(mu_);
    handlers_[path] = std::move(h);
  }
  // A handler answering `body` with `status`.
  static Handler Answer(std::string body, int status = 200) {
    return [body = std::move(body), status](const httplib::Request&, httplib::Response& res) {
      res.status = status;
      res.set_content(body, "application/json");
    };
  }
  // How many requests `path` received so far.
  int Requests(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_[path];
  }
  // True once the fake is going: a handler that stalls on purpose polls it to end in time.
  bool released() const { return released_; }

  int port() const { return port_; }  // -1 when no port could be bound
  net::HostPort address() const { return {"127.0.0.1", static_cast<uint16_t>(port_)}; }

 private:
  httplib::Server server_;
  int port_ = -1;
  std::thread thread_;
  std::atomic<bool> exited_{false}, released_{false};
  std::mutex mu_;
  std::map<std::string, Handler> handlers_;  // guarded by mu_
  std::map<std::string, int> requests_;      // guarded by mu_
};

}  // namespace cdt::testing
