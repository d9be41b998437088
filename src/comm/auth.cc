#include "comm/auth.h"

#include <sodium.h>

#include <cstdint>

#include "cdt/error.h"

namespace cdt::auth {

namespace {
void EnsureSodium() {
  // sodium_init is idempotent and thread-safe; it returns 1 when already initialised.
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "libsodium failed to initialise");
}
}  // namespace

std::string KeyFromSecret(std::string_view secret) {
  EnsureSodium();
  unsigned char key[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(key, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  return std::string(reinterpret_cast<char*>(key), sizeof key);
}

std::string Hmac(std::string_view key, std::initializer_list<std::string_view> parts) {
  EnsureSodium();
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, reinterpret_cast<const unsigned char*>(key.data()),
                              key.size());
  for (std::string_view part : parts) {
    const uint32_t n = static_cast<uint32_t>(part.size());
    const unsigned char len[4] = {static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
                                  static_cast<unsigned char>(n >> 16),
                                  static_cast<unsigned char>(n >> 24)};
    crypto_auth_hmacsha256_update(&state, len, sizeof len);
    crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(part.data()),
                                  part.size());
  }
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_final(&state, mac);
  return std::string(reinterpret_cast<char*>(mac), sizeof mac);
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  EnsureSodium();
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  EnsureSodium();
  std::string out(n, '\0');
  randombytes_buf(out.data(), n);
  return out;
}

std::string NewSecret() {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : RandomBytes(32)) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

}  // namespace cdt::auth
