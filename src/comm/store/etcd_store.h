// EtcdStore: cdt::Store on an etcd v3 server through its JSON gateway (etcd-server from Debian,
// 3.4; `--rdzv-backend etcd`). The store then lives outside the job: losing node 0 (and the agent
// that would host the TCP store) does not lose the rendezvous. torchrun's etcd backends use the v2
// API that etcd 3.6 dropped (pytorch#158326); this speaks v3 only.
//
// Mapping: Set = put; Get / Wait = range, polled with backoff (1 → 50 ms) until the timeout; Add
// and CompareSet = transactions comparing the key's mod revision (or its absence, create
// revision 0) / value, retried on contention; Delete = delete range; Check = range.
// Keys and values are base64 in the gateway's JSON (libsodium's encoder).
//
// No authentication: etcd's own TLS/users are not configured here (the TCP store's job secret
// has no counterpart). Keys persist in etcd across runs: give each run its own --job-id.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "cdt/store.h"
#include "comm/transport/socket.h"

namespace httplib {
class Client;
}

namespace cdt {

class EtcdStore : public Store {
 public:
  // Checks the server answers (GET /version) within `connect_timeout`; throws kTimeout if not.
  EtcdStore(const net::HostPort& server, std::chrono::milliseconds connect_timeout,
            std::chrono::milliseconds request_timeout = std::chrono::seconds(10));
  ~EtcdStore() override;

  void Set(const std::string& key, const std::string& value) override;
  std::string Get(const std::string& key, std::chrono::milliseconds timeout) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  int64_t Add(const std::string& key, int64_t delta) override;
  std::string CompareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  bool Delete(const std::string& key) override;
  bool Check(const std::string& key) override;

 private:
  struct Value {
    bool exists = false;
    std::string value;
    std::string mod_revision;
  };
  Value Range(const std::string& key);
  std::string Post(const std::string& path, const std::string& body);  // returns the JSON reply

  const std::string where_;
  std::mutex mu_;  // httplib::Client is used by one thread at a time
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace cdt
