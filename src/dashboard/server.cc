#include "dashboard/server.h"

#include <arpa/inet.h>

#include <cmath>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "dashboard/page.h"
#include "dashboard/tls_context.h"
#include "dashboard/token.h"

namespace cdt::dashboard {

namespace {

using nlohmann::json;

const char kTokenHint[] = "cann-dist-train secret --dashboard-token";

HttpResponse Secure(HttpResponse res) {
  // The page loads only its own assets and talks only to this server.
  res.headers.emplace_back(
      "Content-Security-Policy",
      "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
      "connect-src 'self'; frame-ancestors 'none'");
  res.headers.emplace_back("X-Content-Type-Options", "nosniff");
  res.headers.emplace_back("Referrer-Policy", "no-referrer");
  res.headers.emplace_back("Cache-Control", "no-store");
  return res;
}

HttpResponse Content(std::string body, std::string type) {
  HttpResponse r;
  r.body = std::move(body);
  r.content_type = std::move(type);
  return r;
}

// A fault request's body checked field by field: kind, rank in 0..65535 (a JSON number is not
// narrowed: 4294967298 is not rank 2), value within the kind's range. An error message or "".
std::string CheckFaultBody(const json& body, std::string* kind, int* rank, double* value) {
  const std::string expected =
      R"( (expected {"kind": "kill|hang|slow|cut", "rank": N, "value": X}))";
  if (!body.is_object()) return "the body is not a JSON object" + expected;
  const auto k = body.find("kind");
  if (k == body.end() || !k->is_string()) return "kind is not a string" + expected;
  *kind = k->get<std::string>();
  if (*kind != "kill" && *kind != "hang" && *kind != "slow" && *kind != "cut")
    return "unknown fault kind '" + kind->substr(0, 20) + "' (kill, hang, slow, cut)";
  const auto r = body.find("rank");
  if (r == body.end() || !r->is_number_integer()) return "rank is not an integer" + expected;
  const bool in_range = r->is_number_unsigned()
                            ? r->get<uint64_t>() <= 65535
                            : r->get<int64_t>() >= 0 && r->get<int64_t>() <= 65535;
  if (!in_range) return "rank " + r->dump() + " is out of range (0..65535)";
  *rank = static_cast<int>(r->get<int64_t>());
  *value = 0;
  const auto v = body.find("value");
  if (v != body.end() && !v->is_null()) {
    if (!v->is_number()) return "value is not a number" + expected;
    *value = v->get<double>();
  }
  if (!std::isfinite(*value) || *value < 0) return "value must be a number >= 0";
  if (*kind == "slow" && *value != 0 && !(*value > 1 && *value <= 100))
    return "a slow factor must be over 1 and at most 100 (0: the default, 3)";
  if (*kind == "cut" && *value > 3600)
    return "a cut lasts at most 3600 seconds (0: the default, 5)";
  return "";
}

}  // namespace

bool IsLoopbackBind(const std::string& bind) {
  if (bind == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, bind.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, bind.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

Server::Server(JobView& view, ServerOptions options, FaultAction act)
    : view_(view), o_(std::move(options)), act_(std::move(act)) {
  if (o_.tls_cert.empty() != o_.tls_key.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "dashboard: --tls-cert and --tls-key go together (a certificate and its key)");
  if (!o_.tls_cert.empty()) tls_ = std::make_unique<TlsContext>(o_.tls_cert, o_.tls_key);
  SetSecret(o_.secret);
}

Server::~Server() { Stop(); }

void Server::SetSecret(std::string secret) {
  std::string token = DashboardToken(secret, o_.job_id);
  std::lock_guard<std::mutex> lock(secret_mu_);
  secret_ = std::move(secret);
  token_ = std::move(token);
}

std::string Server::Token() const {
  std::lock_guard<std::mutex> lock(secret_mu_);
  return token_;
}

bool Server::FaultActionsAllowed() const {
  if (!IsLoopbackBind(o_.bind) && !o_.allow_remote_faults) return false;
  std::lock_guard<std::mutex> lock(secret_mu_);
  return !token_.empty();
}

bool Server::HostAllowed(const std::string& host_header) const {
  // Bound to loopback, only loopback names may reach us: a web page elsewhere cannot read the job
  // through a DNS name it rebinds to 127.0.0.1 (DNS rebinding).
  if (!IsLoopbackBind(o_.bind)) return true;
  std::string host = host_header;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == o_.bind;
}

std::optional<HttpResponse> Server::Screen(const HttpRequest& head) {
  const double now = UnixSeconds();
  const auto refuse = [&](int status, const std::string& why, const std::string& message) {
    view_.RecordRefusal(why, now);
    return Secure(HttpJsonError(status, message));
  };
  if (!HostAllowed(head.Header("Host")))
    return refuse(403, "Host '" + head.Header("Host").substr(0, 80) + "' is not this machine",
                  "this dashboard answers to 127.0.0.1 or localhost only");
  const bool read = head.method == "GET" || head.method == "HEAD";
  if (!read && !(head.method == "POST" && head.path == "/api/fault")) {
    HttpResponse r = refuse(405, head.method + " " + head.path.substr(0, 80),
                            "only GET here; changes go through POST /api/fault with the token");
    r.headers.emplace_back("Allow", head.path == "/api/fault" ? "POST" : "GET, HEAD");
    return r;
  }
  if (read) return std::nullopt;
  // A fault request: refused on its headers, before its body is read.
  if (!IsLoopbackBind(o_.bind) && !o_.allow_remote_faults)
    return refuse(403, "fault request: fault actions are off beyond loopback",
                  "fault actions are off: this dashboard listens on " + o_.bind +
                      ", beyond loopback; restart it with --allow-remote-faults to allow them");
  std::string secret, token;
  {
    std::lock_guard<std::mutex> lock(secret_mu_);
    secret = secret_;
    token = token_;
  }
  if (token.empty())
    return refuse(403, "fault request: this dashboard has no job secret",
                  "this dashboard has no job secret yet (no job file, or --job without "
                  "CDT_JOB_SECRET): changes are off");
  const std::string given = head.Header("X-CDT-Token"), old = head.Header("X-CDT-Secret");
  if (TokenMatches(given, secret) || TokenMatches(old, secret))
    return refuse(403, "fault request with the job's secret instead of the token",
                  std::string("refused: that is the job's secret, which this dashboard never "
                              "takes (it keys the job's store and mesh); give the dashboard "
                              "token in X-CDT-Token (") +
                      kTokenHint + ")");
  if (!TokenMatches(given, token))
    return refuse(403, "fault request without the dashboard token",
                  std::string("refused: the X-CDT-Token header does not hold this job's "
                              "dashboard token (") +
                      kTokenHint + ")");
  return std::nullopt;
}

HttpResponse Server::Page() const {
  std::string page = kIndexHtml;
  const json panels = {{"topology", o_.topology_view},
                       {"carbon", o_.carbon_timeline},
                       {"faults", o_.fault_sim},
                       {"faults_remote_off", !IsLoopbackBind(o_.bind) && !o_.allow_remote_faults}};
  // The panels the command line asked for, as a data attribute the script reads.
  const std::string marker = "data-panels=\"\"";
  const size_t at = page.find(marker);
  if (at != std::string::npos) {
    std::string escaped;
    for (char c : panels.dump()) escaped += c == '"' ? std::string("&quot;") : std::string(1, c);
    page.replace(at, marker.size(), "data-panels=\"" + escaped + "\"");
  }
  return Content(std::move(page), "text/html; charset=utf-8");
}

HttpResponse Server::Respond(const HttpRequest& request) {
  if (request.method == "POST") return Secure(QueueFault(request));
  const std::string& p = request.path;
  if (p == "/") return Secure(Page());
  if (p == "/app.js") return Secure(Content(kAppJs, "text/javascript; charset=utf-8"));
  if (p == "/style.css") return Secure(Content(kStyleCss, "text/css; charset=utf-8"));
  if (p == "/api/state")
    return Secure(
        Content(view_.State(UnixSeconds()).dump(-1, ' ', false, json::error_handler_t::replace),
                "application/json"));
  if (p == "/metrics")
    return Secure(Content(ExpositionText(view_.Metrics(UnixSeconds())), kExpositionContentType));
  return Secure(HttpJsonError(404, "no such page: " + p.substr(0, 80)));
}

HttpResponse Server::QueueFault(const HttpRequest& request) {
  const double now = UnixSeconds();
  std::string kind;
  int rank = 0;
  double value = 0;
  const std::string bad =
      CheckFaultBody(json::parse(request.body, nullptr, false), &kind, &rank, &value);
  if (!bad.empty()) {
    view_.RecordRefusal("fault request: " + bad, now);
    return HttpJsonError(400, bad);
  }
  try {
    const std::string spec = act_(kind, rank, value);
    view_.RecordFault(spec, now);
    return Content(json{{"queued", spec}}.dump(), "application/json");
  } catch (const Error& e) {
    view_.RecordRefusal(std::string("fault request: ") + e.what(), now);
    return HttpJsonError(400, e.what());
  }
}

void Server::Start() {
  ListenerOptions lo = o_.connections;
  lo.bind = o_.bind;
  lo.port = o_.port;
  listener_ = std::make_unique<HttpListener>(
      lo, tls_.get(), [this](const HttpRequest& head) { return Screen(head); },
      [this](const HttpRequest& request) { return Respond(request); });
  listener_->Start();
}

void Server::Stop() {
  if (listener_) listener_->Stop();
  listener_.reset();
}

int Server::port() const { return listener_ ? listener_->port() : 0; }

std::string Server::Answer(std::string_view request_bytes) {
  HttpRequestReader reader(o_.connections.limits,
                           [this](const HttpRequest& head) { return Screen(head); });
  switch (reader.Feed(request_bytes)) {
    case HttpRequestReader::State::kNeedMore:
      return "";
    case HttpRequestReader::State::kRefused:
      return SerializeResponse(reader.refusal(), false);
    case HttpRequestReader::State::kComplete:
      break;
  }
  HttpResponse response;
  try {
    response = Respond(reader.request());
  } catch (const std::exception& e) {
    response = HttpJsonError(500, std::string("the dashboard failed: ") + e.what());
  }
  return SerializeResponse(response, reader.request().method == "HEAD");
}

}  // namespace cdt::dashboard
