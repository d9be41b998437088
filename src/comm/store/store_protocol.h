// Wire protocol of the TCP store (docs/wire_format.md, "Store").
//
// Connection:  server -> client  Challenge { magic "CDTS" u32, version u32, nonce[32] }
//              client -> server  Frame(kAuth, hmac_sha256(key = sha256(secret), nonce)[32])
//              server -> client  Frame(kOk) or Frame(kAuthFailed) then close
// Then requests and responses, one at a time per connection, each a Frame:
//   u32 length (of what follows, <= kMaxFrameBytes) | u8 type | payload
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cdt::store {

constexpr uint32_t kMagic = 0x53544443;  // "CDTS" little-endian
constexpr uint32_t kVersion = 1;
constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;
constexpr uint32_t kMaxFrameBytes = 256u << 20;  // one value may carry a model's state
constexpr size_t kMaxKeyBytes = 4096;

enum class MsgType : uint8_t {
  // requests
  kAuth = 1,
  kSet = 2,         // key, value
  kGet = 3,         // key                      -> kValue | kNotFound
  kWait = 4,        // u32 n, keys..., u64 ms    -> kOk | kTimeout
  kAdd = 5,         // key, i64 delta            -> kInt
  kCompareSet = 6,  // key, expected, desired    -> kValue
  kDelete = 7,      // key                      -> kBool
  kCheck = 8,       // key                      -> kBool
  // responses
  kOk = 64,
  kValue = 65,
  kNotFound = 66,
  kTimeout = 67,
  kInt = 68,
  kBool = 69,
  kAuthFailed = 70,
  kError = 71,  // payload: message
};

// HMAC-SHA256 of nonce under a key derived from the job secret (libsodium).
std::string ComputeMac(const std::string& secret, std::string_view nonce);
bool MacEquals(std::string_view a, std::string_view b);  // constant time
std::string RandomBytes(size_t n);

}  // namespace cdt::store
