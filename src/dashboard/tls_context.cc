#include "dashboard/tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>

#include "cdt/error.h"

namespace cdt::dashboard {

namespace {

// OpenSSL's reason for the last failure of this thread, then its error queue emptied.
std::string LastTlsError() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out.empty() ? "no reason given" : out;
}

// Runs `op` (SSL_accept, SSL_read_ex, ...) until it succeeds, fails, or the deadline passes,
// waiting on the socket for what OpenSSL says it needs. Returns op's final result and its
// SSL_get_error code.
template <typename Op>
std::pair<int, int> Drive(SSL* ssl, int fd, Deadline deadline, const Op& op) {
  for (;;) {
    ERR_clear_error();
    const int r = op();
    if (r > 0) return {r, SSL_ERROR_NONE};
    const int e = SSL_get_error(ssl, r);
    short wait = 0;
    if (e == SSL_ERROR_WANT_READ) wait = POLLIN;
    if (e == SSL_ERROR_WANT_WRITE) wait = POLLOUT;
    if (wait == 0 || !WaitForSocket(fd, wait, deadline)) return {r, e};
  }
}

class TlsChannel : public ByteChannel {
 public:
  TlsChannel(SSL* ssl, int fd) : ssl_(ssl), fd_(fd) {}
  ~TlsChannel() override { SSL_free(ssl_); }

  size_t Read(char* buf, size_t n, Deadline deadline) override {
    size_t got = 0;
    const auto [r, e] = Drive(ssl_, fd_, deadline, [&] { return SSL_read_ex(ssl_, buf, n, &got); });
    return r > 0 ? got : 0;
  }

  bool Write(std::string_view bytes, Deadline deadline) override {
    while (!bytes.empty()) {
      size_t put = 0;
      const auto [r, e] = Drive(ssl_, fd_, deadline, [&] {
        return SSL_write_ex(ssl_, bytes.data(), bytes.size(), &put);
      });
      if (r <= 0) return false;
      bytes.remove_prefix(put);
    }
    return true;
  }

  void Finish(Deadline deadline) override {
    // One close_notify; the peer's answer is not awaited (the listener lingers on the socket).
    Drive(ssl_, fd_, deadline, [&] { return SSL_shutdown(ssl_) >= 0 ? 1 : -1; });
  }

 private:
  SSL* const ssl_;
  const int fd_;
};

}  // namespace

TlsContext::TlsContext(const std::string& cert_file, const std::string& key_file) {
  const auto refuse = [](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument,
                 "dashboard TLS: " + what + ": " + LastTlsError() +
                     " (give a PEM certificate with --tls-cert and its key with --tls-key)");
  };
  ERR_clear_error();
  ctx_ = SSL_CTX_new(TLS_server_method());
  if (!ctx_) throw refuse("cannot create a TLS context");
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx_, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  if (SSL_CTX_use_certificate_chain_file(ctx_, cert_file.c_str()) != 1) {
    SSL_CTX_free(ctx_);
    throw refuse("cannot load the certificate " + cert_file);
  }
  if (SSL_CTX_use_PrivateKey_file(ctx_, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    SSL_CTX_free(ctx_);
    throw refuse("cannot load the private key " + key_file);
  }
  if (SSL_CTX_check_private_key(ctx_) != 1) {
    SSL_CTX_free(ctx_);
    throw refuse("the key " + key_file + " is not the certificate's (" + cert_file + ")");
  }
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

std::unique_ptr<ByteChannel> TlsContext::Accept(int fd, Deadline deadline) const {
  SSL* ssl = SSL_new(ctx_);
  if (!ssl) return nullptr;
  auto channel = std::make_unique<TlsChannel>(ssl, fd);  // frees `ssl` on every path
  if (SSL_set_fd(ssl, fd) != 1) return nullptr;
  const auto [r, e] = Drive(ssl, fd, deadline, [&] { return SSL_accept(ssl); });
  if (r <= 0) {
    ERR_clear_error();
    return nullptr;
  }
  return channel;
}

}  // namespace cdt::dashboard
