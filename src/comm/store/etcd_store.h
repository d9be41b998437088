// EtcdStore: cdt::Store on an etcd v3 server through its JSON gateway (etcd-server from Debian,
// 3.4; `--rdzv-backend etcd`). The store then lives outside the job: losing node 0 (and the agent
// that would host the TCP store) does not lose the rendezvous. torchrun's etcd backends use the v2
// API that etcd 3.6 dropped (pytorch#158326); this speaks v3 only.
//
// Mapping: Set = put; Get / Wait = range, and while the key is missing a watch of it from the
// revision the range saw (POST /v3/watch on its own connection, a stream the server ends with the
// put; re-opened every kWatchSlice), so a waiter is parked in etcd as in the TCP store: polled,
// 1,024 waiters of a rendezvous round kept the server too busy for the round to form in 300 s
// (docs/benchmarks.md). A server without the watch endpoint (HTTP 404: a proxy, an old gateway)
// is polled instead, with backoff (1 → 50 ms, after the first second up to 500 ms). Add and
// CompareSet = read the key, then a transaction that writes only if the key's mod revision (or
// its absence, create revision 0) is still what was read, retried when another writer got there
// first after a random pause whose window doubles (2 ms … 512 ms; Add(0) of an existing key is
// only the read); a CompareSet lost to another writer returns what that writer wrote, read by
// the lost transaction itself (its failure branch). Delete = delete range; Check = range.
// Keys and values are base64 in the gateway's JSON (etcd_reply.h reads the replies).
//
// Errors: every reply is read as untrusted (etcd_reply.h): garbage, an empty body, JSON of the
// wrong shape, bad base64, a reply over etcd::kMaxReplyBytes or one still arriving after the
// request timeout all throw cdt::Error(kStore) naming the server, the request and its key. No
// call waits past its deadline: Get and Wait take a timeout (then kTimeout); every other call,
// including the whole retry loop of Add and CompareSet, is bounded by `request_timeout`, and Add
// and CompareSet also by `transaction_tries` (then kStore: "never succeeded after N tries in T s").
// Timeouts too large to add to the clock saturate (a wait "forever"), never wrap.
//
// No authentication: etcd's own TLS/users are not configured here (the TCP store's job secret
// has no counterpart). Keys persist in etcd across runs: give each run its own --job-id.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cdt/store.h"
#include "comm/store/etcd_reply.h"
#include "comm/transport/socket.h"

namespace httplib {
class Client;
}

namespace cdt {

class EtcdStore : public Store {
 public:
  // How many read-then-write rounds Add and CompareSet try before giving up: each lost round means
  // another writer changed the key in between, so under fair contention one of N writers wins
  // each round and a few hundred rounds cover the largest job.
  static constexpr int kDefaultTransactionTries = 500;
  // Get and Wait poll at most every 50 ms for this long, then at most every 500 ms (servers
  // without watches).
  static constexpr std::chrono::seconds kPromptPolling{1};
  // The longest one watch stream stays open before the key is read again.
  static constexpr std::chrono::seconds kWatchSlice{10};

  // Checks the server answers GET /version as etcd does within `connect_timeout`; throws kTimeout
  // if nothing answers, kStore if something that is not etcd does.
  EtcdStore(const net::HostPort& server, std::chrono::milliseconds connect_timeout,
            std::chrono::milliseconds request_timeout = std::chrono::seconds(10),
            int transaction_tries = kDefaultTransactionTries);
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
  etcd::KeyValue Range(const std::string& key);
  // Watches `key` from the revision after `seen` (on a connection of its own, so that the shared
  // client stays free) until it is put or `until`: the value put, or nullopt when `until` came
  // first, the server ended the watch or has no watch endpoint (then watches_ turns false).
  std::optional<std::string> WatchForPut(const std::string& key, int64_t seen,
                                         std::chrono::steady_clock::time_point until);
  // Writes `value` at `key` if the key is still as `seen` (same mod revision, or still missing);
  // returns whether it did. When it did not and `now` is given, the transaction's failure branch
  // read the key into it (left empty by a reply without that read).
  bool PutIfUnchanged(const std::string& key, const etcd::KeyValue& seen, const std::string& value,
                      std::optional<etcd::KeyValue>* now);
  // One HTTP exchange. `failure` is empty when a reply came: at most etcd::kMaxReplyBytes,
  // arriving within the request timeout (else failure says which), with any status.
  struct Reply {
    int status = 0;
    std::string body;
    std::string failure;
  };
  Reply Exchange(const std::string& method, const std::string& path, const std::string& body);
  // POSTs `body` to `path` and returns the reply body; kStore unless the reply came with status
  // 200. `request` names it in errors: "range of key [k]".
  std::string Post(const std::string& path, const std::string& body, const std::string& request);
  std::string Where(const std::string& request) const { return where_ + ": " + request; }

  // Constant after construction.
  const net::HostPort server_;
  const std::string where_;  // "etcd at host:port"
  const std::chrono::milliseconds request_timeout_;
  const int transaction_tries_;

  std::atomic<bool> watches_{true};  // false once the server answered a watch with 404
  std::mutex mu_;                    // httplib::Client is used by one thread at a time
  std::unique_ptr<httplib::Client> http_;
};

}  // namespace cdt
