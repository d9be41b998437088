#include "dashboard/token.h"

#include <sodium.h>

#include <cstdint>
#include <initializer_list>

#include "cdt/error.h"

namespace cdt::dashboard {

std::string DashboardToken(std::string_view secret, std::string_view job_id) {
  if (secret.empty()) return "";
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "dashboard token: libsodium failed to start");
  unsigned char key[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(key, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key, sizeof key);
  for (std::string_view part : {std::string_view(kTokenLabel), job_id}) {
    const auto n = static_cast<uint32_t>(part.size());
    const unsigned char len[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                  static_cast<unsigned char>(n >> 16),
                                  static_cast<unsigned char>(n >> 24)};
    crypto_auth_hmacsha256_update(&state, len, sizeof len);
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(part.data()),
                                  part.size());
  }
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, mac);
  sodium_memzero(key, sizeof key);
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : mac) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool TokenMatches(std::string_view given, std::string_view token) {
  if (token.empty() || given.size() != token.size()) return false;
  return sodium_memcmp(given.data(), token.data(), token.size()) == 0;
}

}  // namespace cdt::dashboard
