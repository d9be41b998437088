// Signed carbon reports: `cert issue` signs a report file with Ed25519 (libsodium) and writes a
// certificate next to it; `cert verify` checks that the report's bytes are unchanged and the
// signature is the key's. The statement it carries says what it is — a self-attested report
// following GSF SCI / ISO 14064-style accounting — and never claims a certification nobody issued.
// The key file holds the 64-byte Ed25519 secret key in base64, mode 0600.
#pragma once

#include <string>

namespace cdt::green {

// Creates `path` with a new key (0600) unless it exists; returns the base64 public key.
std::string EnsureSigningKey(const std::string& path);

// The certificate (JSON text) for `report_bytes` named `report_name`, signed with the key file.
std::string IssueCertificate(const std::string& report_bytes, const std::string& report_name,
                             const std::string& key_path);

struct Verification {
  bool ok = false;
  std::string public_key;  // base64 of the key that signed
  std::string why;         // what failed, or what was checked
};
// Checks the report against the certificate; `trusted_public_key` (base64), when given, must be
// the signer's (otherwise anyone could re-sign a changed report with their own key).
Verification VerifyCertificate(const std::string& report_bytes, const std::string& certificate_json,
                               const std::string& trusted_public_key = "");

}  // namespace cdt::green
