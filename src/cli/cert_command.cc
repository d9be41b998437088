#include "cli/cert_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/file_system.h"
#include "green/certificate.h"

namespace cdt::cli {
namespace {

std::string Slurp(const std::string& path, const char* what) {
  return LocalFileSystem().Read(path, kMaxTextFileBytes, what);
}

}  // namespace

CertCommands AddCertCommands(CLI::App* app, CertOptions* o) {
  CLI::App* cert = app->add_subcommand(
      "cert", "sign and verify carbon reports (self-attested, Ed25519; docs/green.md)");
  cert->require_subcommand(1);
  CertCommands c;
  c.keygen = cert->add_subcommand(
      "keygen", "create the signing key (mode 0600) unless it exists; print the public key");
  c.keygen->add_option(
      "--key", o->key,
      "key file (default $CDT_SIGNING_KEY or ~/.config/cann-dist-train/signing.key)");
  c.issue = cert->add_subcommand("issue", "sign a report: writes REPORT.cert");
  c.issue
      ->add_option("--report", o->report,
                   "the report file (green --json or the report directory's JSON)")
      ->required();
  c.issue->add_option("--key", o->key, "signing key file (created if missing)");
  c.issue->add_option("--out", o->certificate, "certificate file (default REPORT.cert)");
  c.verify = cert->add_subcommand(
      "verify",
      "check a report against its certificate and its signer against the keys you trust (exit 0 "
      "valid and trusted, 1 changed or invalid, 3 valid but signed by an unknown key)");
  c.verify->add_option("--report", o->report, "the report file")->required();
  c.verify->add_option("--cert", o->certificate, "certificate file (default REPORT.cert)");
  c.verify->add_option("--public-key", o->public_keys,
                       "trust this signer (base64, from `cert keygen`; may repeat)");
  c.verify->add_option("--trusted-keys", o->trusted_keys,
                       "file of trusted signers, one base64 key per line (default "
                       "$XDG_CONFIG_HOME or ~/.config /cann-dist-train/trusted_keys); your own "
                       "signing key is trusted too");
  return c;
}

int RunCert(const CertCommands& c, CertOptions o, const Environment& env) {
  if (o.key.empty()) o.key = env.signing_key;
  if (o.certificate.empty()) o.certificate = o.report + ".cert";
  auto ensure_key = [&] {
    const std::filesystem::path dir = std::filesystem::path(o.key).parent_path();
    if (!dir.empty()) std::filesystem::create_directories(dir);
    return green::EnsureSigningKey(o.key);
  };
  if (c.keygen->parsed()) {
    std::printf("signing key %s\npublic key %s\n", o.key.c_str(), ensure_key().c_str());
    return 0;
  }
  if (c.issue->parsed()) {
    const std::string pk = ensure_key();
    const std::string cert = green::IssueCertificate(
        Slurp(o.report, "report"), std::filesystem::path(o.report).filename().string(), o.key);
    WriteFileAtomically(o.certificate, cert);
    std::printf(
        "signed %s -> %s (Ed25519, public key %s)\n"
        "a self-attested report following GSF SCI / ISO 14064-style accounting, not a third-party "
        "certification\n",
        o.report.c_str(), o.certificate.c_str(), pk.c_str());
    return 0;
  }
  const std::string report = Slurp(o.report, "report");
  std::vector<std::string> trusted = o.public_keys;
  const std::vector<std::string> listed =
      green::ReadTrustedKeys(o.trusted_keys.empty() ? env.trusted_keys : o.trusted_keys);
  trusted.insert(trusted.end(), listed.begin(), listed.end());
  if (const std::string own = green::PublicKeyOfExistingKey(o.key); !own.empty())
    trusted.push_back(own);
  const green::Verification v =
      green::VerifyCertificate(report, Slurp(o.certificate, "certificate"), trusted);
  std::printf("%s: %s: %s\n", o.report.c_str(),
              !v.ok       ? "INVALID"
              : v.trusted ? "VALID"
                          : "VALID SIGNATURE, UNKNOWN SIGNER",
              v.why.c_str());
  if (v.ok) std::printf("signer public key %s\n", v.public_key.c_str());
  return !v.ok ? kCertInvalid : v.trusted ? kCertValid : kCertUnknownSigner;
}

}  // namespace cdt::cli
