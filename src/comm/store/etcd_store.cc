#include "comm/store/etcd_store.h"

#include <httplib.h>
#include <sodium.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "cdt/error.h"
#include "common/printable.h"

namespace cdt {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;

// Deadlines saturate (net::DeadlineAfter): a timeout of 300 years, or milliseconds::max(), means
// "no deadline", not one that wrapped into the past.
using net::DeadlineAfter;

std::string Seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", std::chrono::duration<double>(d).count());
  return text;
}

// Bounds every read and write of `client` by `us` microseconds, and connecting by at most 2 s.
void Bound(httplib::Client& client, int64_t us) {
  client.set_connection_timeout(0, static_cast<time_t>(std::min<int64_t>(us, 2000000)));
  client.set_read_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
  client.set_write_timeout(static_cast<time_t>(us / 1000000), static_cast<time_t>(us % 1000000));
}

// The read-then-conditional-write loop of Add and CompareSet: a round lost to another writer is
// retried after a short random pause (so that contending writers spread out), until the tries
// are spent or the deadline passes; then a kStore error says so.
class TransactionRounds {
 public:
  TransactionRounds(int tries, milliseconds timeout)
      : tries_(std::max(1, tries)),
        start_(Clock::now()),
        deadline_(DeadlineAfter(timeout)),
        random_(std::random_device{}()) {}

  // Called after a lost round: pauses before the next one, or throws when there is none.
  void Lost(const std::string& where) {
    ++lost_;
    // 2, 4, ... 512 ms: the window grows with the contention, so that even 1,024 writers of one
    // counter (a rendezvous round's arrivals) spread out instead of colliding round after round.
    const milliseconds cap(1 << std::min(lost_, 9));
    const auto pause = milliseconds(std::uniform_int_distribution<int>(0, cap.count())(random_));
    if (lost_ < tries_ && Clock::now() + pause < deadline_) {
      std::this_thread::sleep_for(pause);
      return;
    }
    throw Error(ErrorCode::kStore,
                where + ": the transaction never succeeded after " + std::to_string(lost_) +
                    " tries in " + Seconds(Clock::now() - start_) +
                    " s: each time the key had changed since it was read; another process may "
                    "be rewriting it in a loop, or the server does not apply transactions "
                    "(check etcd's health: etcdctl endpoint status)");
  }

 private:
  const int tries_;
  const Clock::time_point start_, deadline_;
  int lost_ = 0;
  std::minstd_rand random_;
};

// What Add and CompareSet's transaction compares: the mod revision that was read, or, for a key
// that was missing, that it still has none (create revision 0).
json UnchangedSince(const std::string& key64, const etcd::KeyValue& seen) {
  if (seen.exists)
    return {{"key", key64},
            {"result", "EQUAL"},
            {"target", "MOD"},
            {"mod_revision", std::to_string(seen.mod_revision)}};
  return {{"key", key64}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}};
}

}  // namespace

EtcdStore::EtcdStore(const net::HostPort& server, milliseconds connect_timeout,
                     milliseconds request_timeout, int transaction_tries)
    : server_(server),
      where_("etcd at " + server.ToString()),
      request_timeout_(std::max(request_timeout, milliseconds(1))),
      transaction_tries_(transaction_tries),
      http_(std::make_unique<httplib::Client>(server.host, static_cast<int>(server.port))) {
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "libsodium failed to initialise");
  // Per-read and per-write limits of one request, at most a day (any more is "wait forever").
  const int64_t us = std::min<int64_t>(request_timeout_.count(), 86400000) * 1000;
  Bound(*http_, us);
  const auto deadline = DeadlineAfter(connect_timeout);
  for (;;) {
    const Reply r = Exchange("GET", "/version", "");
    if (r.failure.empty() && r.status == 200) {
      (void)etcd::ParseVersionReply(r.body, Where("GET /version"));
      return;
    }
    if (Clock::now() >= deadline)
      throw Error(ErrorCode::kTimeout,
                  "rendezvous: " + where_ + " did not answer within " +
                      std::to_string(connect_timeout.count()) + " ms (last: " +
                      (r.failure.empty() ? "HTTP " + std::to_string(r.status) : r.failure) +
                      "); is etcd running (Debian etcd-server)? check --rdzv-endpoint");
    std::this_thread::sleep_for(milliseconds(100));
  }
}

EtcdStore::~EtcdStore() = default;

EtcdStore::Reply EtcdStore::Exchange(const std::string& method, const std::string& path,
                                     const std::string& body) {
  httplib::Request req;
  req.method = method;
  req.path = path;
  req.body = body;
  if (!body.empty()) req.set_header("Content-Type", "application/json");
  // The reply is read through this receiver, which stops one that is too long or too slow (the
  // client's own read timeout is per read: a server dribbling bytes would pass it).
  Reply reply;
  const auto deadline = DeadlineAfter(request_timeout_);
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (reply.body.size() + n > etcd::kMaxReplyBytes) {
      reply.failure = "the reply is longer than " + std::to_string(etcd::kMaxReplyBytes >> 20) +
                      " MiB, which no etcd sends";
      return false;
    }
    if (Clock::now() > deadline) {
      reply.failure =
          "the reply was still arriving after " + std::to_string(request_timeout_.count()) + " ms";
      return false;
    }
    reply.body.append(data, n);
    return true;
  };
  std::lock_guard<std::mutex> lock(mu_);
  const httplib::Result r = http_->send(req);
  if (!r && reply.failure.empty()) reply.failure = httplib::to_string(r.error());
  if (r) reply.status = r->status;
  return reply;
}

std::string EtcdStore::Post(const std::string& path, const std::string& body,
                            const std::string& request) {
  const Reply r = Exchange("POST", path, body);
  const std::string where = Where(request) + " (POST " + path + ")";
  if (!r.failure.empty())
    throw Error(ErrorCode::kStore,
                where + " failed: " + r.failure +
                    "; is etcd running and healthy? check --rdzv-endpoint and etcd's log");
  if (r.status != 200)
    throw Error(ErrorCode::kStore, where + " answered HTTP " + std::to_string(r.status) + ": '" +
                                       Printable(r.body, 300) +
                                       "'; check --rdzv-endpoint and etcd's log");
  return r.body;
}

etcd::KeyValue EtcdStore::Range(const std::string& key) {
  const std::string request = "range of key [" + Printable(key) + "]";
  const std::string reply =
      Post("/v3/kv/range", json{{"key", etcd::ToBase64(key)}}.dump(), request);
  return etcd::ParseRangeReply(reply, key, Where(request));
}

bool EtcdStore::PutIfUnchanged(const std::string& key, const etcd::KeyValue& seen,
                               const std::string& value, std::optional<etcd::KeyValue>* now) {
  const std::string key64 = etcd::ToBase64(key);
  const json txn = {
      {"compare", json::array({UnchangedSince(key64, seen)})},
      {"success",
       json::array({json{{"request_put", {{"key", key64}, {"value", etcd::ToBase64(value)}}}}})},
      {"failure", json::array({json{{"request_range", {{"key", key64}}}}})}};
  const std::string request = "transaction on key [" + Printable(key) + "]";
  return etcd::ParseTxnReply(Post("/v3/kv/txn", txn.dump(), request), Where(request), key, now);
}

void EtcdStore::Set(const std::string& key, const std::string& value) {
  const std::string request = "put of key [" + Printable(key) + "]";
  const json body = {{"key", etcd::ToBase64(key)}, {"value", etcd::ToBase64(value)}};
  etcd::ParsePutReply(Post("/v3/kv/put", body.dump(), request), Where(request));
}

std::optional<std::string> EtcdStore::WatchForPut(const std::string& key, int64_t seen,
                                                  Clock::time_point until) {
  const std::string request = "watch of key [" + Printable(key) + "]";
  httplib::Client client(server_.host, static_cast<int>(server_.port));
  // Nothing arrives while the key stays missing: the read waits until `until` (and a little).
  // Connecting and sending the request are bounded by the same time (and 2 s at most to connect).
  const int64_t us = std::max<int64_t>(
      1000,
      std::chrono::duration_cast<std::chrono::microseconds>(until - Clock::now()).count() + 20000);
  Bound(client, us);
  json create = {{"key", etcd::ToBase64(key)}};
  if (seen > 0) create["start_revision"] = std::to_string(seen + 1);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v3/watch";
  req.body = json{{"create_request", create}}.dump();
  req.set_header("Content-Type", "application/json");
  int status = 0;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return r.status == 200;
  };
  std::string pending;  // the stream's bytes since its last newline
  std::optional<std::string> put;
  std::string failure;  // a bad message: thrown once the exchange is over
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    pending.append(data, n);
    try {
      for (size_t eol; (eol = pending.find('\n')) != std::string::npos;) {
        const etcd::WatchMessage m =
            etcd::ParseWatchMessage(std::string_view(pending).substr(0, eol), key, Where(request));
        pending.erase(0, eol + 1);
        if (m.put) put = m.put;
        if (m.put || m.canceled) return false;
      }
    } catch (const Error& e) {
      failure = e.what();
      return false;
    }
    if (pending.size() > etcd::kMaxReplyBytes) {
      failure = Where(request) + ": a message of the watch stream is longer than " +
                std::to_string(etcd::kMaxReplyBytes >> 20) + " MiB, which no etcd sends";
      return false;
    }
    return Clock::now() < until;
  };
  const httplib::Result r = client.send(req);
  if (!failure.empty()) throw Error(ErrorCode::kStore, failure);
  if (put) return put;
  if (status == 404) {
    watches_ = false;  // no watch endpoint: poll
    return std::nullopt;
  }
  if (status != 0 && status != 200)
    throw Error(ErrorCode::kStore, Where(request) + " (POST /v3/watch) answered HTTP " +
                                       std::to_string(status) +
                                       "; check --rdzv-endpoint and etcd's log");
  // A read that timed out at `until`, or a stream ended by the server (compaction, restart):
  // the caller reads the key again. A connection that never opened is the server's failure.
  if (!r && r.error() == httplib::Error::Connection)
    throw Error(ErrorCode::kStore, Where(request) + " failed: " + httplib::to_string(r.error()) +
                                       "; is etcd running and healthy? check --rdzv-endpoint");
  return std::nullopt;
}

std::string EtcdStore::Get(const std::string& key, milliseconds timeout) {
  const auto deadline = DeadlineAfter(timeout);
  const auto start = Clock::now();
  for (auto pause = milliseconds(1);;
       pause = std::min(pause * 2, Clock::now() - start < kPromptPolling ? milliseconds(50)
                                                                         : milliseconds(500))) {
    etcd::KeyValue v = Range(key);
    if (v.exists) return std::move(v.value);
    const auto now = Clock::now();
    if (now >= deadline)
      throw Error(ErrorCode::kTimeout, "waited " + std::to_string(timeout.count()) + " ms on " +
                                           where_ + " for key [" + Printable(key) +
                                           "]: some process of the job did not arrive");
    if (watches_) {
      const auto until = deadline - now < kWatchSlice ? deadline : now + kWatchSlice;
      std::optional<std::string> put = WatchForPut(key, v.revision, until);
      if (put) return std::move(*put);
      // Ended before `until` (the server cancelled it): not at once again.
      if (Clock::now() < until) std::this_thread::sleep_for(std::min(pause, milliseconds(50)));
      continue;
    }
    std::this_thread::sleep_for(pause);
  }
}

void EtcdStore::Wait(const std::vector<std::string>& keys, milliseconds timeout) {
  const auto deadline = DeadlineAfter(timeout);
  for (const auto& k : keys) {
    // Saturated: time left before a deadline at the clock's end does not fit in milliseconds.
    const auto left = deadline == Clock::time_point::max()
                          ? milliseconds::max()
                          : std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    Get(k, std::max(left, milliseconds(0)));
  }
}

int64_t EtcdStore::Add(const std::string& key, int64_t delta) {
  const std::string where =
      Where("Add(" + std::to_string(delta) + ") on key [" + Printable(key) + "]");
  for (TransactionRounds rounds(transaction_tries_, request_timeout_);; rounds.Lost(where)) {
    // Read after the pause: the lost transaction's own read (below) is stale by then, and a
    // round based on it lost again at once (1,024 members formed in 7.6-8.0 s, not 4.5-5.4).
    const etcd::KeyValue seen = Range(key);
    const int64_t now = etcd::ParseCounter(seen.value, where);
    // Add(0) of an existing counter is a read: writing it back would contend with every writer
    // of the key (a round's coordinator reading the arrivals lost to 1,024 arriving members).
    if (delta == 0 && seen.exists) return now;
    int64_t next = 0;
    if (__builtin_add_overflow(now, delta, &next))
      throw Error(ErrorCode::kStore, where + ": the key holds " + std::to_string(now) +
                                         ", and adding would overflow int64; reset the counter "
                                         "or give the run its own --job-id");
    if (PutIfUnchanged(key, seen, std::to_string(next), nullptr)) return next;
  }
}

std::string EtcdStore::CompareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  const std::string where = Where("CompareSet on key [" + Printable(key) + "]");
  for (TransactionRounds rounds(transaction_tries_, request_timeout_);; rounds.Lost(where)) {
    etcd::KeyValue seen = Range(key);
    if (seen.value != expected) return std::move(seen.value);  // a missing key reads as ""
    std::optional<etcd::KeyValue> now;
    if (PutIfUnchanged(key, seen, desired, &now)) return desired;
    // Lost to another writer: what it wrote came back with the transaction (its failure branch),
    // so 1,023 losers of a round's "open" need no second read.
    if (now && now->value != expected) return std::move(now->value);
  }
}

bool EtcdStore::Delete(const std::string& key) {
  const std::string request = "deleterange of key [" + Printable(key) + "]";
  const std::string reply =
      Post("/v3/kv/deleterange", json{{"key", etcd::ToBase64(key)}}.dump(), request);
  return etcd::ParseDeleteRangeReply(reply, Where(request)) > 0;
}

bool EtcdStore::Check(const std::string& key) { return Range(key).exists; }

}  // namespace cdt
