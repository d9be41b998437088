// etcd's JSON gateway replies as EtcdStore reads them (src/comm/store/etcd_reply.h). The first
// byte picks the reply: 'r' range (of key "job/n"), 't' txn, 'p' put, 'd' deleterange,
// 'v' GET /version, 'c' Add's counter value, 'b' a base64 field, 'w' a message of a watch
// stream (of key "job/n"); any other byte, one chosen by its value. The rest is the reply body.
// Refused with cdt::Error or taken, nothing else.
#include "cdt/error.h"
#include "comm/store/etcd_reply.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body = cdt::fuzz::AsText(data + 1, size - 1);
  const std::string where = "etcd at fuzz: request";
  static constexpr char kKinds[] = "rtpdvcbw";
  const char* kind = std::char_traits<char>::find(kKinds, 8, static_cast<char>(data[0]));
  try {
    switch (kind ? *kind : kKinds[data[0] % 8]) {
      case 'r': {
        const cdt::etcd::KeyValue kv = cdt::etcd::ParseRangeReply(body, "job/n", where);
        if (kv.exists && kv.mod_revision <= 0) __builtin_trap();  // the contract
        break;
      }
      case 't': {
        std::optional<cdt::etcd::KeyValue> read;
        const bool held = cdt::etcd::ParseTxnReply(body, where, "job/n", &read);
        if (held != cdt::etcd::ParseTxnReply(body, where)) __builtin_trap();
        if (read && read->exists && read->mod_revision <= 0) __builtin_trap();
        break;
      }
      case 'p':
        cdt::etcd::ParsePutReply(body, where);
        break;
      case 'd':
        if (cdt::etcd::ParseDeleteRangeReply(body, where) < 0) __builtin_trap();
        break;
      case 'v':
        (void)cdt::etcd::ParseVersionReply(body, where);
        break;
      case 'c':
        (void)cdt::etcd::ParseCounter(body, where);
        break;
      case 'w':
        (void)cdt::etcd::ParseWatchMessage(body, "job/n", where);
        break;
      default: {
        // What decodes must encode back to the same text (the decoder accepts one spelling).
        const std::optional<std::string> bytes = cdt::etcd::FromBase64(body);
        if (bytes && cdt::etcd::ToBase64(*bytes) != body) __builtin_trap();
        break;
      }
    }
  } catch (const cdt::Error&) {
  }
  return 0;
}
