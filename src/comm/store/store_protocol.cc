#include "comm/store/store_protocol.h"

#include <sodium.h>

#include <stdexcept>

#include "cdt/error.h"

namespace cdt::store {

namespace {
void EnsureSodium() {
  // sodium_init is idempotent and thread-safe; it returns 1 when already initialised.
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "libsodium failed to initialise");
}
}  // namespace

std::string ComputeMac(const std::string& secret, std::string_view nonce) {
  EnsureSodium();
  unsigned char key[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(key, reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key, sizeof key);
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(nonce.data()),
                                nonce.size());
  crypto_auth_hmacsha256_final(&state, mac);
  return std::string(reinterpret_cast<char*>(mac), sizeof mac);
}

bool MacEquals(std::string_view a, std::string_view b) {
  EnsureSodium();
  return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  EnsureSodium();
  std::string out(n, '\0');
  randombytes_buf(out.data(), n);
  return out;
}

}  // namespace cdt::store
