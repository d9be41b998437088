#include "comm/store/store_protocol.h"

#include <cstring>

#include "cdt/error.h"
#include "comm/auth.h"
#include "common/bytes.h"

namespace cdt::store {

namespace {
constexpr uint8_t kFromClient = 1, kFromServer = 2;
}

Handshake DeriveHandshake(const std::string& secret, std::string_view server_nonce,
                          std::string_view client_nonce) {
  const std::string key = auth::KeyFromSecret(secret);
  return {auth::Hmac(key, {"cdt-store-v2 client", server_nonce, client_nonce}),
          auth::Hmac(key, {"cdt-store-v2 server", server_nonce, client_nonce}),
          auth::Hmac(key, {"cdt-store-v2 session", server_nonce, client_nonce})};
}

FrameAuthenticator::FrameAuthenticator(std::string session_key, bool server)
    : key_(std::move(session_key)),
      send_direction_(server ? kFromServer : kFromClient),
      recv_direction_(server ? kFromClient : kFromServer) {}

std::string FrameAuthenticator::Mac(uint8_t direction, uint64_t seq, MsgType type,
                                    std::string_view payload) const {
  char head[10];
  head[0] = static_cast<char>(direction);
  std::memcpy(head + 1, &seq, 8);
  head[9] = static_cast<char>(type);
  return auth::Hmac(key_, {std::string_view(head, sizeof head), payload}).substr(0, kFrameMacBytes);
}

void FrameAuthenticator::Seal(std::string* out, MsgType type, std::string_view payload) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(1 + payload.size() + kFrameMacBytes));
  w.U8(static_cast<uint8_t>(type));
  w.Raw(payload.data(), payload.size());
  const std::string mac = Mac(send_direction_, sent_++, type, payload);
  w.Raw(mac.data(), mac.size());
}

std::string_view FrameAuthenticator::Open(std::string_view body, MsgType* type) {
  if (body.size() < 1 + kFrameMacBytes)
    throw Error(ErrorCode::kAuth,
                "frame of " + std::to_string(body.size()) + " bytes is too short to carry its MAC");
  *type = static_cast<MsgType>(static_cast<uint8_t>(body[0]));
  std::string_view payload = body.substr(1, body.size() - 1 - kFrameMacBytes);
  std::string_view mac = body.substr(body.size() - kFrameMacBytes);
  if (!auth::ConstantTimeEquals(mac, Mac(recv_direction_, received_, *type, payload)))
    throw Error(ErrorCode::kAuth, "frame #" + std::to_string(received_) +
                                      " failed authentication (altered, replayed or forged)");
  ++received_;
  return payload;
}

}  // namespace cdt::store
