// The dashboard's HTTP server: the page and its assets (served by the binary: no internet
// needed), /api/state for the page, /metrics for Prometheus, and POST /api/fault, which queues a
// fault in the job only with the dashboard token (token.h) — never with the job's secret itself
// (docs/dashboard.md, "Security"). Reads one JobView; changes nothing itself but through
// `FaultAction`. The sockets, their bounds and TLS are http_listener.h's; this file decides what
// each request gets.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "dashboard/http_listener.h"
#include "dashboard/http_request.h"
#include "dashboard/job_view.h"

namespace cdt::dashboard {

class TlsContext;

struct ServerOptions {
  std::string bind = "127.0.0.1";
  int port = 8470;             // 0: any free port (port() says which)
  std::string job_id = "cdt";  // the token is derived from the secret and this
  std::string secret;  // the job's (SetSecret replaces it); empty: changing requests are refused
  // Beyond loopback, fault actions are refused unless this is set (`--allow-remote-faults`).
  bool allow_remote_faults = false;
  // Both set: HTTPS with this PEM certificate chain and key (`--tls-cert`, `--tls-key`).
  std::string tls_cert, tls_key;
  // Per-connection bounds (deadlines, how many at once, head and body sizes); its own bind and
  // port are replaced by the two above.
  ListenerOptions connections;
  // Where the page says the data come from, and which panels it opens with.
  bool topology_view = true, carbon_timeline = true, fault_sim = true;
};

// kind: kill | hang | slow | cut; rank: the worker's starting rank (0..65535); value: the slow
// factor (0: the default, else 1 < value <= 100) or the cut's seconds (0: the default, else up to
// 3600), checked before the call. Returns the fault spec queued; throws cdt::Error for a request
// it refuses.
using FaultAction = std::function<std::string(const std::string& kind, int rank, double value)>;

// Whether `bind` names this machine's loopback only: "localhost", 127.0.0.0/8, ::1.
bool IsLoopbackBind(const std::string& bind);

class Server {
 public:
  // Loads the TLS certificate and key when given (throws cdt::Error(kInvalidArgument) naming the
  // file that is wrong).
  Server(JobView& view, ServerOptions options, FaultAction act);
  ~Server();

  // Binds (throws cdt::Error(kIo) naming the address) and serves on threads of its own.
  void Start();
  void Stop();
  int port() const;
  // The job's secret once known (the job may start after the dashboard). Any thread.
  void SetSecret(std::string secret);
  // The token that opens fault actions now ("" until the secret is known).
  std::string Token() const;
  // Whether POST /api/fault can succeed at all: a secret is known and the bind is loopback or
  // --allow-remote-faults was given.
  bool FaultActionsAllowed() const;

  // What the network gets for these request bytes, through the same reader, screen and handler
  // as a connection, without a socket: for the fuzzer and tests. Bytes that do not complete a
  // request get "" (a connection would wait for more, then time out).
  std::string Answer(std::string_view request_bytes);

 private:
  // Decides on a head before its body is read: Host, method, path, and for /api/fault the token.
  std::optional<HttpResponse> Screen(const HttpRequest& head);
  HttpResponse Respond(const HttpRequest& request);
  HttpResponse QueueFault(const HttpRequest& request);
  HttpResponse Page() const;
  bool HostAllowed(const std::string& host) const;

  // Constant after construction.
  JobView& view_;
  const ServerOptions o_;
  const FaultAction act_;
  std::unique_ptr<TlsContext> tls_;
  std::unique_ptr<HttpListener> listener_;

  mutable std::mutex secret_mu_;
  std::string secret_;  // guarded by secret_mu_
  std::string token_;   // guarded by secret_mu_: DashboardToken(secret_, job_id)
};

}  // namespace cdt::dashboard
