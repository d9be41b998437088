// What etcd's v3 JSON gateway answers (etcd 3.4, grpc-gateway), read without trusting it.
//
// EtcdStore (etcd_store.h) sends its requests to whatever --rdzv-endpoint names; the reply may
// come from an etcd of another version, a proxy that rewrote it, an HTTP server that is not etcd
// at all, or an attacker on the path. Every function here reads a reply body as untrusted bytes:
// nothing throws anything but cdt::Error(ErrorCode::kStore, ...), whose message names `where`
// (the server and the request, e.g. "etcd at 10.0.0.1:2379: range of key [job/n]"), what was
// wrong with the reply, and what to check next. No reply is ever allowed to crash or hang the
// caller (tests/fuzz/fuzz_etcd_reply.cc).
//
// The shapes accepted, as etcd 3.4.23 writes them (tests/fuzz/corpus/etcd_reply/ holds real ones):
//   range {"header":{...},"kvs":[{"key":B64,"mod_revision":"5","value":B64,...}],"count":"1"}
//                with "kvs" (and "count") left out when the key is missing, and "value" left
//                out when it is empty;
//   txn          {"header":{...},"succeeded":true,"responses":[...]}, "succeeded" left out when
//                the comparison failed (then "responses" holds the failure branch's: one
//                {"response_range":{...as a range...}} for EtcdStore's transactions);
//   put          {"header":{...}};
//   deleterange  {"header":{...},"deleted":"1"}, "deleted" left out when nothing was;
//   GET /version {"etcdserver":"3.4.23","etcdcluster":"3.4.0"};
//   watch        a stream of newline-separated messages, each {"result":{"header":{...},...}}:
//                "created":true first, then "events":[{"kv":{...}}, {"type":"DELETE",...}],
//                or "canceled":true (with "compact_revision" when the start was compacted);
//                the gateway's own failure is {"error":{"grpc_code":..,"message":"..",...}}.
// The gateway writes int64 fields as JSON strings (proto3's JSON mapping); a JSON integer is
// accepted as well. Keys and values are standard base64 with padding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cdt::etcd {

// The largest reply body the client reads; a longer one is refused while it arrives. etcd itself
// refuses requests over 1.5 MiB by default (--max-request-bytes), and a rendezvous value is far
// smaller: a larger reply did not come from a sane etcd.
inline constexpr size_t kMaxReplyBytes = size_t{8} << 20;

// Standard base64 with padding (what the gateway expects for keys and values).
std::string ToBase64(std::string_view bytes);
// The bytes of `text`, or nullopt when it is not exactly standard padded base64.
std::optional<std::string> FromBase64(std::string_view text);

// One key as a range reply holds it. mod_revision (> 0) is what Add and CompareSet's
// transactions compare against; exists == false leaves the other fields empty.
struct KeyValue {
  bool exists = false;
  std::string value;
  int64_t mod_revision = 0;
  int64_t revision = 0;  // the store's revision when it answered (the header's; 0 if left out)
};

// A range reply for exactly `key` (the request names one key, no range end): at most one kv,
// whose key must decode to `key`.
KeyValue ParseRangeReply(std::string_view body, std::string_view key, const std::string& where);

// One message of a watch stream on exactly `key`. `put` holds the value of the first put of `key`
// it carries (a deletion is not one); `canceled` says the server ended the watch.
struct WatchMessage {
  bool canceled = false;
  std::optional<std::string> put;
};
WatchMessage ParseWatchMessage(std::string_view line, std::string_view key,
                               const std::string& where);

// A txn reply: whether the comparison held (and so the success branch ran). When it did not and
// `read` is given, the failure branch's range of `key` goes there (left empty when the reply
// carries none).
bool ParseTxnReply(std::string_view body, const std::string& where, std::string_view key = {},
                   std::optional<KeyValue>* read = nullptr);

// A put reply: only its shape is checked (a header and nothing contradicting success).
void ParsePutReply(std::string_view body, const std::string& where);

// A deleterange reply: how many keys were deleted (0 or more).
int64_t ParseDeleteRangeReply(std::string_view body, const std::string& where);

// GET /version: the server's version ("3.4.23"). Refuses a server that is not etcd.
std::string ParseVersionReply(std::string_view body, const std::string& where);

// The counter Add keeps at a key: a decimal int64 ("" when the key is missing reads as 0).
// Refuses anything else (another writer's bytes, "12abc", " 12", out of range) naming `where`.
int64_t ParseCounter(std::string_view value, const std::string& where);

}  // namespace cdt::etcd
