// Signed carbon reports: `cert issue` signs a report file with Ed25519 (libsodium) and writes a
// certificate next to it; `cert verify` checks that the report's bytes are unchanged and the
// signature is the key's. The statement it carries says what it is — a self-attested report
// following GSF SCI / ISO 14064-style accounting — and never claims a certification nobody issued.
// The key file holds the 64-byte Ed25519 secret key in base64, mode 0600.
#pragma once

#include <string>
#include <vector>

namespace cdt::green {

// Creates `path` with a new key (0600) unless it exists; returns the base64 public key.
std::string EnsureSigningKey(const std::string& path);

// The certificate (JSON text) for `report_bytes` named `report_name`, signed with the key file.
std::string IssueCertificate(const std::string& report_bytes, const std::string& report_name,
                             const std::string& key_path);

struct Verification {
  bool ok = false;         // the report is unchanged and the signature is the certificate's key's
  bool trusted = false;    // ... and that key is one of the trusted ones
  std::string public_key;  // base64 of the key that signed
  std::string why;         // what failed, or what was checked
};
// Checks the report against the certificate and the signer against `trusted_public_keys` (base64).
// A certificate anyone can make: `ok` alone says only that the report is the one its key signed;
// `trusted` says that key is one the caller trusts (otherwise anyone could re-sign a changed report
// with their own key).
Verification VerifyCertificate(const std::string& report_bytes, const std::string& certificate_json,
                               const std::vector<std::string>& trusted_public_keys = {});

// The base64 public key of an existing key file (nothing is created); empty if there is none.
std::string PublicKeyOfExistingKey(const std::string& path);

// Trusted signers, one base64 public key per line ('#' starts a comment); empty if the file is
// missing. Throws cdt::Error(kInvalidArgument) naming file:line for a line that is not a key.
std::vector<std::string> ReadTrustedKeys(const std::string& path);

}  // namespace cdt::green
