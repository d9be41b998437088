#include "comm/store/etcd_reply.h"

#include <sodium.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "common/printable.h"

namespace cdt::etcd {
namespace {

using nlohmann::json;

constexpr const char* kNextStep =
    "check that --rdzv-endpoint names the client URL of an etcd 3.4 or later (etcdctl "
    "--endpoints=<it> endpoint status) and that no proxy in between rewrites its replies";

[[noreturn]] void Refuse(const std::string& where, const std::string& what, std::string_view body) {
  throw Error(ErrorCode::kStore,
              where + ": " + what + " (reply: '" + Printable(body, 120) + "'); " + kNextStep);
}

// A field's value, short, for a message: never dump() of an array or object (deep nesting from a
// hostile reply would recurse, and its size is the reply's).
std::string Describe(const json& v) {
  if (v.is_string()) return "\"" + Printable(v.get_ref<const std::string&>(), 40) + "\"";
  if (v.is_primitive()) return Printable(v.dump(), 40);
  return std::string("an ") + v.type_name();
}

// A decimal int64, all of `text` and nothing else (no sign but '-', no blanks, no overflow).
std::optional<int64_t> Decimal(std::string_view text) {
  return ParseIntegerIn(text, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max());
}

// The reply as a JSON object carrying etcd's response header; refuses anything else, quoting
// etcd's own error message when the reply is one.
json ParseResponse(std::string_view body, const std::string& where) {
  if (body.empty()) Refuse(where, "the reply is empty", body);
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_discarded()) Refuse(where, "the reply is not JSON", body);
  if (!j.is_object()) Refuse(where, "the reply is not a JSON object", body);
  const auto header = j.find("header");
  if (header == j.end()) {
    const auto message = j.find("message");
    if (message != j.end() && message->is_string())
      Refuse(where, "etcd answered an error: " + Printable(message->get<std::string>()), body);
    Refuse(where, "the reply has no response header", body);
  }
  if (!header->is_object())
    Refuse(where, "the reply's header is " + Describe(*header) + ", not an object", body);
  return j;
}

// An int64 field (a JSON string of decimal digits, as the gateway writes it, or a JSON integer);
// nullopt when absent or null.
std::optional<int64_t> IntField(const json& obj, const char* field, const std::string& where,
                                std::string_view body) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::optional<int64_t> v =
      it->is_string() ? Decimal(it->get_ref<const std::string&>()) : JsonIntegerIn(*it, kMin, kMax);
  if (!v)
    Refuse(where, std::string("field '") + field + "' is " + Describe(*it) + ", not an int64",
           body);
  return v;
}

// A base64 field's bytes; nullopt when absent or null.
std::optional<std::string> BytesField(const json& obj, const char* field, const std::string& where,
                                      std::string_view body) {
  const auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string())
    Refuse(where, std::string("field '") + field + "' is " + Describe(*it) + ", not a string",
           body);
  std::optional<std::string> bytes = FromBase64(it->get_ref<const std::string&>());
  if (!bytes)
    Refuse(where, std::string("field '") + field + "' is " + Describe(*it) + ", not base64", body);
  return bytes;
}

}  // namespace

std::string ToBase64(std::string_view bytes) {
  std::string out(sodium_base64_ENCODED_LEN(bytes.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), reinterpret_cast<const unsigned char*>(bytes.data()),
                    bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

std::optional<std::string> FromBase64(std::string_view text) {
  // libsodium 1.0.18 takes bytes >= 0x80 for base64 digits ("\xA3m9iL24=" decodes to five bytes;
  // found by fuzz_etcd_reply): only the alphabet and the padding reach it.
  for (const char c : text)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
          c == '/' || c == '='))
      return std::nullopt;
  std::string out(text.size() / 4 * 3 + 3, '\0');
  size_t len = 0;
  // A null b64_end: the whole text must be base64 (libsodium also refuses non-zero pad bits).
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                        text.size(), nullptr, &len, nullptr, sodium_base64_VARIANT_ORIGINAL) != 0)
    return std::nullopt;
  out.resize(len);
  return out;
}

namespace {

// The key of a range response `j` (a reply, or a txn's response_range; `body` is the whole reply,
// for messages).
KeyValue RangeOf(const json& j, std::string_view key, const std::string& where,
                 std::string_view body) {
  const auto header = j.find("header");
  if (header == j.end() || !header->is_object())
    Refuse(where, "a range response has no header object", body);
  KeyValue out;
  out.revision = IntField(*header, "revision", where, body).value_or(0);
  if (out.revision < 0) Refuse(where, "the header's revision is negative", body);
  const auto kvs = j.find("kvs");
  if (kvs == j.end() || kvs->is_null()) return out;
  if (!kvs->is_array()) Refuse(where, "field 'kvs' is " + Describe(*kvs) + ", not an array", body);
  if (kvs->empty()) return out;
  if (kvs->size() > 1)
    Refuse(where, "the reply holds " + std::to_string(kvs->size()) + " keys for a request of one",
           body);
  const json& kv = kvs->front();
  if (!kv.is_object()) Refuse(where, "kvs[0] is " + Describe(kv) + ", not an object", body);
  const std::optional<std::string> got = BytesField(kv, "key", where, body);
  if (!got || *got != key)
    Refuse(where, "kvs[0] is not the key asked for ('" + Printable(got.value_or("")) + "')", body);
  out.exists = true;
  out.value = BytesField(kv, "value", where, body).value_or("");
  out.mod_revision = IntField(kv, "mod_revision", where, body).value_or(0);
  if (out.mod_revision <= 0) Refuse(where, "kvs[0] has no positive mod_revision", body);
  return out;
}

}  // namespace

KeyValue ParseRangeReply(std::string_view body, std::string_view key, const std::string& where) {
  return RangeOf(ParseResponse(body, where), key, where, body);
}

WatchMessage ParseWatchMessage(std::string_view line, std::string_view key,
                               const std::string& where) {
  if (line.empty()) Refuse(where, "a message of the watch stream is empty", line);
  const json j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    Refuse(where, "a message of the watch stream is not a JSON object", line);
  const auto result = j.find("result");
  if (result == j.end()) {
    const auto error = j.find("error");
    if (error != j.end() && error->is_object()) {
      const auto message = error->find("message");
      if (message != error->end() && message->is_string())
        Refuse(where,
               "etcd ended the watch with an error: " + Printable(message->get<std::string>()),
               line);
    }
    Refuse(where, "a message of the watch stream has no result", line);
  }
  if (!result->is_object())
    Refuse(where, "the watch message's result is " + Describe(*result) + ", not an object", line);
  WatchMessage out;
  const auto canceled = result->find("canceled");
  if (canceled != result->end() && !canceled->is_null()) {
    if (!canceled->is_boolean())
      Refuse(where, "field 'canceled' is " + Describe(*canceled) + ", not true or false", line);
    out.canceled = canceled->get<bool>();
  }
  const auto events = result->find("events");
  if (events == result->end() || events->is_null()) return out;
  if (!events->is_array())
    Refuse(where, "field 'events' is " + Describe(*events) + ", not an array", line);
  for (const json& e : *events) {
    if (!e.is_object()) Refuse(where, "an event is " + Describe(e) + ", not an object", line);
    const auto type = e.find("type");  // proto3 leaves out PUT, the enum's zero
    if (type != e.end() && !type->is_null()) {
      if (!type->is_string())
        Refuse(where, "an event's type is " + Describe(*type) + ", not a string", line);
      const std::string& t = type->get_ref<const std::string&>();
      if (t == "DELETE") continue;
      if (t != "PUT") Refuse(where, "an event's type is " + Describe(*type), line);
    }
    const auto kv = e.find("kv");
    if (kv == e.end() || !kv->is_object()) Refuse(where, "a put event carries no kv object", line);
    const std::optional<std::string> got = BytesField(*kv, "key", where, line);
    if (!got || *got != key)
      Refuse(where, "an event is not for the key watched ('" + Printable(got.value_or("")) + "')",
             line);
    out.put = BytesField(*kv, "value", where, line).value_or("");
    return out;
  }
  return out;
}

bool ParseTxnReply(std::string_view body, const std::string& where, std::string_view key,
                   std::optional<KeyValue>* read) {
  const json j = ParseResponse(body, where);
  bool held = false;  // proto3 leaves out false
  const auto succeeded = j.find("succeeded");
  if (succeeded != j.end() && !succeeded->is_null()) {
    if (!succeeded->is_boolean())
      Refuse(where, "field 'succeeded' is " + Describe(*succeeded) + ", not true or false", body);
    held = succeeded->get<bool>();
  }
  if (held || read == nullptr) return held;
  // The failure branch's read, when there is one: {"responses":[{"response_range":{...}}]}.
  const auto responses = j.find("responses");
  if (responses == j.end() || responses->is_null()) return false;
  if (!responses->is_array() || responses->size() != 1 || !responses->front().is_object())
    Refuse(where, "field 'responses' is not the one response of the failure branch", body);
  const auto range = responses->front().find("response_range");
  if (range == responses->front().end() || !range->is_object())
    Refuse(where, "the failure branch's response is not a range", body);
  *read = RangeOf(*range, key, where, body);
  return false;
}

void ParsePutReply(std::string_view body, const std::string& where) {
  (void)ParseResponse(body, where);
}

int64_t ParseDeleteRangeReply(std::string_view body, const std::string& where) {
  const json j = ParseResponse(body, where);
  const int64_t deleted = IntField(j, "deleted", where, body).value_or(0);
  if (deleted < 0) Refuse(where, "field 'deleted' is negative: " + std::to_string(deleted), body);
  return deleted;
}

std::string ParseVersionReply(std::string_view body, const std::string& where) {
  const json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_object()) {
    const auto server = j.find("etcdserver");
    if (server != j.end() && server->is_string() && !server->get_ref<const std::string&>().empty())
      return server->get<std::string>();
  }
  Refuse(where, "the answer is not etcd's ({\"etcdserver\":\"3.4.23\",...})", body);
}

int64_t ParseCounter(std::string_view value, const std::string& where) {
  if (value.empty()) return 0;
  const std::optional<int64_t> v = Decimal(value);
  if (!v)
    throw Error(ErrorCode::kStore,
                where + ": the key holds '" + Printable(value) +
                    "', not a decimal int64; another program wrote it, or it is not a counter "
                    "(give the run its own --job-id)");
  return *v;
}

}  // namespace cdt::etcd
