#include "green/certificate.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

#include <sodium.h>
#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "common/file_system.h"
#include "common/unix_time.h"
#include "green/iso_time.h"

namespace cdt::green {
namespace {

constexpr const char* kFormat = "cann-dist-train-certificate/1";
constexpr const char* kStatement =
    "Self-attested carbon report of a cann-dist-train run, following GSF SCI (ISO/IEC 21031:2024) "
    "and ISO "
    "14064-style accounting. The signature shows the report is unchanged since the key holder "
    "issued it; it is "
    "not a certification by any third party.";

void Init() {
  if (sodium_init() < 0) throw Error(ErrorCode::kIo, "libsodium failed to initialise");
}

std::string B64(const unsigned char* p, size_t n) {
  std::string out(sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(out.data(), out.size(), p, n, sodium_base64_VARIANT_ORIGINAL);
  out.resize(out.size() - 1);  // the terminating NUL
  return out;
}

bool FromB64(const std::string& s, std::vector<unsigned char>* out, size_t expect) {
  out->assign(s.size(), 0);
  size_t n = 0;
  if (sodium_base642bin(out->data(), out->size(), s.data(), s.size(), " \n", &n, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0)
    return false;
  out->resize(n);
  return n == expect;
}

std::string Sha256Hex(const std::string& bytes) {
  unsigned char h[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(h, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  std::string hex(2 * sizeof h + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), h, sizeof h);
  hex.pop_back();
  return hex;
}

std::vector<unsigned char> LoadSecretKey(const std::string& path) {
  std::istringstream in(
      LocalFileSystem().Read(path, 4096, "signing key", "create one with `cert keygen`"));
  std::string text;
  if (!std::getline(in, text))
    throw Error(ErrorCode::kInvalidArgument,
                "cannot read signing key " + path + " (create one with `cert keygen`)");
  std::vector<unsigned char> sk;
  if (!FromB64(text, &sk, crypto_sign_SECRETKEYBYTES))
    throw Error(ErrorCode::kInvalidArgument, path + " is not an Ed25519 secret key in base64");
  return sk;
}

}  // namespace

std::string EnsureSigningKey(const std::string& path) {
  Init();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0) throw Error(ErrorCode::kIo, "cannot create signing key " + path);
    const std::string text = B64(sk, sizeof sk) + "\n";
    const bool ok =
        write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
    close(fd);
    sodium_memzero(sk, sizeof sk);
    if (!ok) throw Error(ErrorCode::kIo, "cannot write signing key " + path);
    return B64(pk, sizeof pk);
  }
  std::vector<unsigned char> sk = LoadSecretKey(path);
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_ed25519_sk_to_pk(pk, sk.data());
  sodium_memzero(sk.data(), sk.size());
  return B64(pk, sizeof pk);
}

std::string IssueCertificate(const std::string& report, const std::string& name,
                             const std::string& key_path) {
  Init();
  std::vector<unsigned char> sk = LoadSecretKey(key_path);
  unsigned char pk[crypto_sign_PUBLICKEYBYTES];
  crypto_sign_ed25519_sk_to_pk(pk, sk.data());
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(report.data()),
                       report.size(), sk.data());
  sodium_memzero(sk.data(), sk.size());
  nlohmann::json c = {{"format", kFormat},
                      {"statement", kStatement},
                      {"report", name},
                      {"report_bytes", report.size()},
                      {"report_sha256", Sha256Hex(report)},
                      {"algorithm", "Ed25519"},
                      {"public_key", B64(pk, sizeof pk)},
                      {"signature", B64(sig, sizeof sig)},
                      {"issued_at", FormatIsoTime(UnixSeconds())}};
  return c.dump(1) + "\n";
}

std::string PublicKeyOfExistingKey(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  return EnsureSigningKey(path);
}

std::vector<std::string> ReadTrustedKeys(const std::string& path) {
  std::vector<std::string> keys;
  std::istringstream in(LocalFileSystem().ReadIfExists(path, kMaxTextFileBytes).value_or(""));
  std::string line;
  for (size_t n = 1; in && std::getline(in, line); ++n) {
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t\r"));
    line.erase(line.find_last_not_of(" \t\r") + 1);
    if (line.empty()) continue;
    std::vector<unsigned char> pk;
    if (!FromB64(line, &pk, crypto_sign_PUBLICKEYBYTES))
      throw Error(ErrorCode::kInvalidArgument,
                  path + ":" + std::to_string(n) + ": not an Ed25519 public key in base64");
    keys.push_back(line);
  }
  return keys;
}

Verification VerifyCertificate(const std::string& report, const std::string& cert_text,
                               const std::vector<std::string>& trusted) {
  Init();
  Verification v;
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(cert_text);
  } catch (const nlohmann::json::exception& e) {
    v.why = std::string("the certificate is not JSON: ") + e.what();
    return v;
  }
  // Every field read must be a string: a number or an object there is a malformed certificate
  // (nlohmann's value() would throw a type_error).
  auto text = [&](const char* key) {
    return c.is_object() && c.contains(key) && c[key].is_string() ? c[key].get<std::string>()
                                                                  : std::string();
  };
  if (text("format") != kFormat || text("public_key").empty() || text("signature").empty()) {
    v.why = std::string("not a ") + kFormat + " certificate";
    return v;
  }
  v.public_key = text("public_key");
  std::vector<unsigned char> pk, sig;
  if (!FromB64(v.public_key, &pk, crypto_sign_PUBLICKEYBYTES) ||
      !FromB64(text("signature"), &sig, crypto_sign_BYTES)) {
    v.why = "malformed public key or signature";
    return v;
  }
  if (text("report_sha256") != Sha256Hex(report)) {
    v.why = "the report's SHA-256 differs from the certified one: the report was changed";
    return v;
  }
  if (crypto_sign_verify_detached(sig.data(), reinterpret_cast<const unsigned char*>(report.data()),
                                  report.size(), pk.data()) != 0) {
    v.why = "the signature does not match the report";
    return v;
  }
  v.ok = true;
  v.trusted = std::find(trusted.begin(), trusted.end(), v.public_key) != trusted.end();
  v.why = "report unchanged, Ed25519 signature valid, " +
          std::string(v.trusted ? "signer is a trusted key"
                                : "but the signer is not a key you trust: anyone can sign a report "
                                  "with a key of their own (pass --public-key, or add the key to "
                                  "your trusted keys file)");
  return v;
}

}  // namespace cdt::green
