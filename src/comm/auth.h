// Keyed authentication shared by the rendezvous store and the peer handshake (libsodium underneath;
// docs/security.md says what it protects and what it does not).
//
// Every process of a job holds the job secret. Nothing derived from it crosses the wire except
// HMACs over fresh nonces, so a listener learns nothing it could replay, and an offline guess needs
// a sniffed handshake (hence the warning for short secrets).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

namespace cdt::auth {

constexpr size_t kKeyBytes = 32;  // SHA-256 / HMAC-SHA256 output

// The job key: SHA-256 of the secret.
std::string KeyFromSecret(std::string_view secret);

// HMAC-SHA256 under `key` over the parts, each prefixed by its length (u32 little-endian), so that
// no two different part lists give the same input.
std::string Hmac(std::string_view key, std::initializer_list<std::string_view> parts);

// Compares in time that depends only on the lengths (sodium_memcmp).
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// n bytes from the operating system's CSPRNG.
std::string RandomBytes(size_t n);

// A fresh 256-bit job secret as 64 hex digits (`cann-dist-train secret`; what an agent gives a
// job on one node when the user gave none).
std::string NewSecret();

// Secrets shorter than this draw a warning: a sniffed handshake lets anyone guess offline.
constexpr size_t kMinSecretChars = 16;

}  // namespace cdt::auth
