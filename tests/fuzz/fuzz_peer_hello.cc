// The peer handshake's messages as a listener and a dialer read them (peer_handshake.h):
// Hello (56 bytes), then Challenge (72), then a proof (32), each taken from the input.
#include <cstring>

#include "cdt/error.h"
#include "comm/transport/peer_handshake.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cdt::handshake;
  if (size < sizeof(Hello)) return 0;
  static const RankKeys dialer = RankKeys::Generate(), listener = RankKeys::Generate();
  static const std::string key =
      *LinkKey(GenerationKey("fuzz secret", "job/gen3", "0123456789abcdef"), dialer.secret_key,
               listener.public_key, dialer.public_key, listener.public_key);
  Hello hello;
  std::memcpy(&hello, data, sizeof hello);
  CheckHello(hello, static_cast<int>(hello.to_rank % 8), 8, 2, (hello.flags & kSealed) != 0);
  // A published public key is outside input too: whatever 32 bytes, no crash, and a point of
  // small order yields no key.
  LinkKey(key, listener.secret_key, std::string(hello.nonce, kPublicKeyBytes), dialer.public_key,
          listener.public_key);
  if (size < sizeof(Hello) + sizeof(Challenge)) return 0;
  Challenge challenge;
  std::memcpy(&challenge, data + sizeof hello, sizeof challenge);
  std::string proof;
  uint32_t refused = 0;
  AnswerChallenge(key, hello, challenge, &proof, &refused);
  if (size < sizeof(Hello) + sizeof(Challenge) + kProofBytes) return 0;
  CheckProof(key, hello, challenge.nonce,
             reinterpret_cast<const char*>(data + sizeof hello + sizeof challenge));
  return 0;
}
