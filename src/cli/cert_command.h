// `cann-dist-train cert keygen | issue | verify` (docs/green.md): Ed25519-signed carbon reports.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct CertOptions {
  std::string report;                    // the file signed / checked
  std::string certificate;               // default: <report>.cert
  std::string key;                       // default: Environment::signing_key
  std::vector<std::string> public_keys;  // verify: trusted signers (base64), besides the file's
  std::string trusted_keys;              // default: Environment::trusted_keys
};

// `cert verify` exit codes: the report is unchanged and signed by a trusted key; it was changed or
// the certificate is not valid; it is unchanged and validly signed, by a key nobody trusts.
constexpr int kCertValid = 0, kCertInvalid = 1, kCertUnknownSigner = 3;

struct CertCommands {
  CLI::App* keygen = nullptr;
  CLI::App* issue = nullptr;
  CLI::App* verify = nullptr;
};

CertCommands AddCertCommands(CLI::App* app, CertOptions* o);
// Runs whichever of the three was parsed; the exit code (verify: kCert*).
int RunCert(const CertCommands& c, CertOptions o, const Environment& env);

}  // namespace cdt::cli
