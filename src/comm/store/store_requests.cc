#include "comm/store/store_requests.h"

#include <algorithm>

#include "cdt/error.h"
#include "common/bytes.h"

namespace cdt::store {

StoreReply ApplyStoreRequest(std::unordered_map<std::string, std::string>& data, MsgType type,
                             std::string_view payload) {
  ByteReader r(payload, "store request");
  StoreReply reply;
  auto answer = [&](MsgType t) {
    reply.type = t;
    return reply;
  };
  switch (type) {
    case MsgType::kSet: {
      std::string key = r.Bytes(kMaxKeyBytes);
      std::string value = r.Bytes(kMaxFrameBytes);
      r.ExpectEnd();
      data[key] = std::move(value);
      return answer(MsgType::kOk);
    }
    case MsgType::kGet: {
      std::string key = r.Bytes(kMaxKeyBytes);
      r.ExpectEnd();
      auto it = data.find(key);
      if (it == data.end()) return answer(MsgType::kNotFound);
      ByteWriter(&reply.payload).Bytes(it->second);
      return answer(MsgType::kValue);
    }
    case MsgType::kWait: {
      const uint32_t n = r.U32();
      if (n > kMaxWaitKeys) throw Error(ErrorCode::kProtocol, "too many keys in wait");
      for (uint32_t i = 0; i < n; ++i) reply.wait_keys.push_back(r.Bytes(kMaxKeyBytes));
      reply.wait_ms = std::min<uint64_t>(r.U64(), kMaxWaitMs);
      r.ExpectEnd();
      reply.parked = true;  // answered by the server's wait sweep, even when all keys exist
      return reply;
    }
    case MsgType::kAdd: {
      std::string key = r.Bytes(kMaxKeyBytes);
      const int64_t delta = r.I64();
      r.ExpectEnd();
      int64_t current = 0;
      auto it = data.find(key);
      if (it != data.end()) {
        try {
          current = std::stoll(it->second);
        } catch (...) {
          ByteWriter(&reply.payload).Bytes("key '" + key + "' does not hold an integer");
          return answer(MsgType::kError);
        }
      }
      // Wraps like the two's-complement counter it is, instead of overflowing (undefined).
      current = static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(delta));
      data[key] = std::to_string(current);
      ByteWriter(&reply.payload).I64(current);
      return answer(MsgType::kInt);
    }
    case MsgType::kCompareSet: {
      std::string key = r.Bytes(kMaxKeyBytes);
      std::string expected = r.Bytes(kMaxFrameBytes);
      std::string desired = r.Bytes(kMaxFrameBytes);
      r.ExpectEnd();
      auto it = data.find(key);
      std::string current = it == data.end() ? std::string() : it->second;
      if (current == expected) {
        data[key] = desired;
        current = desired;
      }
      ByteWriter(&reply.payload).Bytes(current);
      return answer(MsgType::kValue);
    }
    case MsgType::kDelete:
    case MsgType::kCheck: {
      std::string key = r.Bytes(kMaxKeyBytes);
      r.ExpectEnd();
      const bool existed = data.count(key) != 0;
      if (type == MsgType::kDelete) data.erase(key);
      ByteWriter(&reply.payload).U8(existed ? 1 : 0);
      return answer(MsgType::kBool);
    }
    default:
      throw Error(ErrorCode::kProtocol,
                  "unknown store request type " + std::to_string(static_cast<int>(type)));
  }
}

}  // namespace cdt::store
