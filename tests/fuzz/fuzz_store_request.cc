// The store server's side of a connection after the handshake: frames opened with the session's
// MAC (altered, forged or replayed ones must be refused), then the request applied to the map.
// Input: a sequence of frames, each `u8 type | u16 length | payload`, for one connection; a first
// byte with the top bit set sends the frame unsealed (a forgery) instead.
#include <cstring>
#include <unordered_map>

#include "cdt/error.h"
#include "comm/store/store_protocol.h"
#include "comm/store/store_requests.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cdt;
  std::unordered_map<std::string, std::string> map;
  const std::string key(32, 'k');
  store::FrameAuthenticator client(key, false), server(key, true);
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t type = data[at];
    uint16_t len;
    std::memcpy(&len, data + at + 1, 2);
    at += 3;
    len = static_cast<uint16_t>(std::min<size_t>(len, size - at));
    const std::string payload(reinterpret_cast<const char*>(data + at), len);
    at += len;
    std::string frame;
    if (type & 0x80) {  // forged: the right shape, no valid MAC
      frame.resize(4);
      frame += static_cast<char>(type & 0x7f);
      frame += payload;
      frame.append(store::kFrameMacBytes, '\0');
    } else {
      client.Seal(&frame, static_cast<store::MsgType>(type), payload);
    }
    try {
      store::MsgType got;
      const std::string_view body = server.Open(std::string_view(frame).substr(4), &got);
      store::StoreReply reply = store::ApplyStoreRequest(map, got, body);
      if (!reply.parked) {
        std::string sealed;
        server.Seal(&sealed, reply.type, reply.payload);
        client.Open(std::string_view(sealed).substr(4), &got);
      }
    } catch (const Error&) {
      return 0;  // the server drops the connection here
    }
  }
  return 0;
}
