// Wire protocol of the TCP store, version 2 (docs/wire_format.md, "Store").
//
// Mutual authentication, then every frame authenticated:
//   server -> client  Challenge { magic "CDTS" u32, version u32, server_nonce[32] }
//   client -> server  Frame(kAuth, client_nonce[32] | client_proof[32])
//   server -> client  Frame(kOk, server_proof[32])   or Frame(kAuthFailed) and close
// where, with K = SHA-256(job secret) and N = server_nonce | client_nonce,
//   client_proof = HMAC(K, "cdt-store-v2 client", N)
//   server_proof = HMAC(K, "cdt-store-v2 server", N)
//   session_key  = HMAC(K, "cdt-store-v2 session", N)
// The client refuses a server whose proof is wrong: only a process holding the secret can answer a
// nonce it did not choose. Then requests and responses, one at a time per connection, each
//   u32 length (of what follows) | u8 type | payload | mac[16]
// with mac = HMAC(session_key, direction, sequence number, type, payload) cut to 16 bytes: a frame
// cannot be forged, altered, replayed, reordered, reflected or moved to another connection, and a
// relayed handshake gives the relay nothing it can use.
//
// Before authentication the server accepts only the auth frame (kMaxAuthFrameBytes): a larger
// length is dropped at once, so an unauthenticated peer controls no allocation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cdt::store {

constexpr uint32_t kMagic = 0x53544443;  // "CDTS" little-endian
constexpr uint32_t kVersion = 2;
constexpr size_t kNonceBytes = 32;
constexpr size_t kProofBytes = 32;
constexpr size_t kFrameMacBytes = 16;
constexpr size_t kChallengeBytes = 8 + kNonceBytes;
// The only frame accepted before authentication: type, client nonce, proof.
constexpr uint32_t kMaxAuthFrameBytes = 1 + kNonceBytes + kProofBytes;
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

// What both ends derive from the secret and the two nonces.
struct Handshake {
  std::string client_proof;
  std::string server_proof;
  std::string session_key;
};
Handshake DeriveHandshake(const std::string& secret, std::string_view server_nonce,
                          std::string_view client_nonce);

// Seals and opens the frames of one authenticated connection (see the header comment). Each
// direction numbers its frames from 0. Not thread-safe: one per connection, used under its lock.
class FrameAuthenticator {
 public:
  FrameAuthenticator() = default;
  FrameAuthenticator(std::string session_key, bool server);
  bool ready() const { return !key_.empty(); }

  // Appends `u32 length | u8 type | payload | mac` to *out.
  void Seal(std::string* out, MsgType type, std::string_view payload);
  // `body` is what follows a frame's length: type | payload | mac. Returns the payload and sets
  // *type, or throws cdt::Error(kAuth) if the frame is short or its MAC is wrong.
  std::string_view Open(std::string_view body, MsgType* type);

 private:
  std::string Mac(uint8_t direction, uint64_t seq, MsgType type, std::string_view payload) const;

  std::string key_;
  uint8_t send_direction_ = 0, recv_direction_ = 0;
  uint64_t sent_ = 0, received_ = 0;
};

}  // namespace cdt::store
