#include "comm/store/etcd_store.h"

#include <httplib.h>
#include <sodium.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <thread>

#include "cdt/error.h"

namespace cdt {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string B64(const std::string& bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::string Unb64(const std::string& text, const std::string& where) {
  std::string out(text.size(), '\0');
  size_t len = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    throw Error(ErrorCode::kProtocol, where + " returned a value that is not base64");
  out.resize(len);
  return out;
}

// etcd's gateway writes int64 fields as JSON strings.
int64_t Int(const json& j, const char* field) {
  if (!j.contains(field)) return 0;
  const json& v = j.at(field);
  return v.is_string() ? std::stoll(v.get<std::string>()) : v.get<int64_t>();
}

}  // namespace

EtcdStore::EtcdStore(const net::HostPort& server, std::chrono::milliseconds connect_timeout,
                     std::chrono::milliseconds request_timeout)
    : where_("etcd at " + server.ToString()),
      http_(std::make_unique<httplib::Client>(server.host, static_cast<int>(server.port))) {
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "libsodium failed to initialise");
  const auto t = std::chrono::duration_cast<std::chrono::microseconds>(request_timeout).count();
  http_->set_connection_timeout(0, static_cast<time_t>(std::min<int64_t>(t, 2000000)));
  http_->set_read_timeout(t / 1000000, t % 1000000);
  http_->set_write_timeout(t / 1000000, t % 1000000);
  const auto deadline = Clock::now() + connect_timeout;
  for (;;) {
    auto r = http_->Get("/version");
    if (r && r->status == 200) return;
    if (Clock::now() >= deadline)
      throw Error(ErrorCode::kTimeout,
                  "rendezvous: " + where_ + " did not answer within " +
                      std::to_string(connect_timeout.count()) +
                      " ms; is etcd running (Debian etcd-server)? check --rdzv-endpoint");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

EtcdStore::~EtcdStore() = default;

std::string EtcdStore::Post(const std::string& path, const std::string& body) {
  std::lock_guard<std::mutex> lock(mu_);
  auto r = http_->Post(path, body, "application/json");
  if (!r)
    throw Error(ErrorCode::kStore,
                where_ + ": " + path + " failed: " + httplib::to_string(r.error()));
  if (r->status != 200)
    throw Error(ErrorCode::kStore, where_ + ": " + path + " answered " + std::to_string(r->status) +
                                       ": " + r->body.substr(0, 300));
  return r->body;
}

EtcdStore::Value EtcdStore::Range(const std::string& key) {
  const json reply = json::parse(Post("/v3/kv/range", json{{"key", B64(key)}}.dump()));
  Value v;
  if (!reply.contains("kvs") || reply["kvs"].empty()) return v;
  const json& kv = reply["kvs"][0];
  v.exists = true;
  v.value = kv.contains("value") ? Unb64(kv["value"].get<std::string>(), where_) : "";
  v.mod_revision = std::to_string(Int(kv, "mod_revision"));
  return v;
}

void EtcdStore::Set(const std::string& key, const std::string& value) {
  Post("/v3/kv/put", json{{"key", B64(key)}, {"value", B64(value)}}.dump());
}

std::string EtcdStore::Get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (auto pause = std::chrono::milliseconds(1);;
       pause = std::min(pause * 2, std::chrono::milliseconds(50))) {
    Value v = Range(key);
    if (v.exists) return v.value;
    if (Clock::now() >= deadline)
      throw Error(ErrorCode::kTimeout, "waited " + std::to_string(timeout.count()) + " ms on " +
                                           where_ + " for key [" + key +
                                           "]: some process of the job did not arrive");
    std::this_thread::sleep_for(pause);
  }
}

void EtcdStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (const auto& k : keys) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    Get(k, std::max(left, std::chrono::milliseconds(0)));
  }
}

int64_t EtcdStore::Add(const std::string& key, int64_t delta) {
  for (;;) {
    const Value v = Range(key);
    int64_t now = 0;
    if (v.exists && !v.value.empty()) {
      try {
        now = std::stoll(v.value);
      } catch (...) {
        throw Error(ErrorCode::kStore,
                    where_ + ": Add on key [" + key + "] holding '" + v.value + "', not a number");
      }
    }
    const int64_t next = now + delta;
    json compare = v.exists ? json{{"key", B64(key)},
                                   {"result", "EQUAL"},
                                   {"target", "MOD"},
                                   {"mod_revision", v.mod_revision}}
                            : json{{"key", B64(key)},
                                   {"result", "EQUAL"},
                                   {"target", "CREATE"},
                                   {"create_revision", "0"}};
    const json txn = {
        {"compare", json::array({compare})},
        {"success",
         json::array(
             {json{{"request_put", {{"key", B64(key)}, {"value", B64(std::to_string(next))}}}}})}};
    const json reply = json::parse(Post("/v3/kv/txn", txn.dump()));
    if (reply.value("succeeded", false)) return next;  // else someone else changed it: again
  }
}

std::string EtcdStore::CompareSet(const std::string& key, const std::string& expected,
                                  const std::string& desired) {
  json compare = expected.empty() ? json{{"key", B64(key)},
                                         {"result", "EQUAL"},
                                         {"target", "CREATE"},
                                         {"create_revision", "0"}}
                                  : json{{"key", B64(key)},
                                         {"result", "EQUAL"},
                                         {"target", "VALUE"},
                                         {"value", B64(expected)}};
  const json txn = {
      {"compare", json::array({compare})},
      {"success",
       json::array({json{{"request_put", {{"key", B64(key)}, {"value", B64(desired)}}}}})}};
  const json reply = json::parse(Post("/v3/kv/txn", txn.dump()));
  if (reply.value("succeeded", false)) return desired;
  const Value v = Range(key);
  return v.exists ? v.value : "";
}

bool EtcdStore::Delete(const std::string& key) {
  const json reply = json::parse(Post("/v3/kv/deleterange", json{{"key", B64(key)}}.dump()));
  return Int(reply, "deleted") > 0;
}

bool EtcdStore::Check(const std::string& key) { return Range(key).exists; }

}  // namespace cdt
