// `cann-dist-train cert keygen | issue | verify` (docs/green.md): Ed25519-signed carbon reports.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct CertOptions {
  std::string report;       // the file signed / checked
  std::string certificate;  // default: <report>.cert
  std::string key;          // default: Environment::signing_key
  std::string public_key;   // verify: the signer must be this key (base64)
};

struct CertCommands {
  CLI::App* keygen = nullptr;
  CLI::App* issue = nullptr;
  CLI::App* verify = nullptr;
};

CertCommands AddCertCommands(CLI::App* app, CertOptions* o);
// Runs whichever of the three was parsed; the exit code (verify: 0 valid, 1 not).
int RunCert(const CertCommands& c, CertOptions o, const Environment& env);

}  // namespace cdt::cli
