// HTTPS for the dashboard (`--tls-cert FILE --tls-key FILE`; docs/dashboard.md, "Security"): the
// server's certificate and key, loaded once, and the handshake of each accepted connection,
// bounded by that connection's deadline. OpenSSL underneath; TLS 1.2 at least, no renegotiation
// (a client could make the server redo handshakes for free), no compression.
//
// The dashboard terminates TLS itself rather than through cpp-httplib's SSLServer, whose
// connections would read request heads without a bound (http_listener.h says why).
#pragma once

#include <memory>
#include <string>

#include "dashboard/byte_channel.h"

typedef struct ssl_ctx_st SSL_CTX;

namespace cdt::dashboard {

class TlsContext {
 public:
  // Loads a PEM certificate chain and its private key. Throws cdt::Error(kInvalidArgument)
  // naming the file and OpenSSL's reason when either cannot be read or they do not match.
  TlsContext(const std::string& cert_file, const std::string& key_file);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  // Handshakes on the accepted, non-blocking socket `fd` by `deadline`. nullptr when the peer
  // does not complete one in time (a plain-HTTP client, a scanner, a slow client). The channel
  // does not own `fd`. Thread-safe: connections handshake in parallel.
  std::unique_ptr<ByteChannel> Accept(int fd, Deadline deadline) const;

 private:
  SSL_CTX* ctx_ = nullptr;
};

}  // namespace cdt::dashboard
