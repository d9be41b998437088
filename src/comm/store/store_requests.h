// The store's requests applied to its key-value map (store_protocol.h lists them): the part of the
// server that reads what a client sent, apart from sockets and authentication, so that it can be
// tested and fuzzed on its own (tests/fuzz/fuzz_store_request.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "comm/store/store_protocol.h"

namespace cdt::store {

constexpr uint32_t kMaxWaitKeys = 65536;
constexpr uint64_t kMaxWaitMs = 7ull * 24 * 3600 * 1000;

struct StoreReply {
  MsgType type = MsgType::kOk;
  std::string payload;
  // A wait whose keys are not all there yet: nothing is answered now; the server parks the client
  // until every key exists (kOk) or wait_ms passes (kTimeout).
  bool parked = false;
  std::vector<std::string> wait_keys;
  uint64_t wait_ms = 0;
};

// Applies one request of `type` with `payload` to `data`. Throws cdt::Error(kProtocol) saying what
// is malformed (a truncated field, a key over kMaxKeyBytes, trailing bytes, an unknown type).
StoreReply ApplyStoreRequest(std::unordered_map<std::string, std::string>& data, MsgType type,
                             std::string_view payload);

}  // namespace cdt::store
