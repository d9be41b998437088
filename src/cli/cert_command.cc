#include "cli/cert_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cdt/error.h"
#include "green/certificate.h"
#include "green/text.h"

namespace cdt::cli {
namespace {

std::string Slurp(const std::string& path, const char* what) {
  const std::optional<std::string> text = green::ReadWholeFile(path);
  if (!text)
    throw Error(ErrorCode::kInvalidArgument,
                std::string("cannot read ") + what + " '" + path + "'");
  return *text;
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
  c.verify =
      cert->add_subcommand("verify", "check a report against its certificate (exit 1 if changed)");
  c.verify->add_option("--report", o->report, "the report file")->required();
  c.verify->add_option("--cert", o->certificate, "certificate file (default REPORT.cert)");
  c.verify->add_option("--public-key", o->public_key,
                       "require this signer (base64, from `cert keygen`)");
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
    std::ofstream out(o.certificate);
    out << cert;
    if (!out.flush())
      throw Error(ErrorCode::kIo, "cannot write certificate '" + o.certificate + "'");
    std::printf(
        "signed %s -> %s (Ed25519, public key %s)\n"
        "a self-attested report following GSF SCI / ISO 14064-style accounting, not a third-party "
        "certification\n",
        o.report.c_str(), o.certificate.c_str(), pk.c_str());
    return 0;
  }
  const std::string report = Slurp(o.report, "report");
  const green::Verification v =
      green::VerifyCertificate(report, Slurp(o.certificate, "certificate"), o.public_key);
  std::printf("%s: %s: %s\n", o.report.c_str(), v.ok ? "VALID" : "INVALID", v.why.c_str());
  if (v.ok) std::printf("signer public key %s\n", v.public_key.c_str());
  return v.ok ? 0 : 1;
}

}  // namespace cdt::cli
