#include "dashboard/server.h"

#include <httplib.h>
#include <sodium.h>

#include <chrono>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "dashboard/page.h"

namespace cdt::dashboard {

namespace {

void Secure(httplib::Response& res) {
  // The page loads only its own assets and talks only to this server.
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
                 "connect-src 'self'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-store");
}

void JsonError(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(nlohmann::json{{"error", message}}.dump(), "application/json");
}

}  // namespace

bool SecretMatches(const std::string& given, const std::string& secret) {
  if (secret.empty() || given.size() != secret.size()) return false;
  return sodium_memcmp(given.data(), secret.data(), secret.size()) == 0;
}

Server::Server(JobView& view, ServerOptions options, FaultAction act)
    : view_(view), o_(std::move(options)), act_(std::move(act)), secret_(o_.secret) {}

void Server::SetSecret(std::string secret) {
  std::lock_guard<std::mutex> lock(secret_mu_);
  secret_ = std::move(secret);
}

Server::~Server() { Stop(); }

bool Server::HostAllowed(const std::string& host_header) const {
  // Bound to loopback, only loopback names may reach us: a web page elsewhere cannot read the job
  // through a DNS name it rebinds to 127.0.0.1 (DNS rebinding).
  if (o_.bind != "127.0.0.1" && o_.bind != "localhost" && o_.bind != "::1") return true;
  std::string host = host_header;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  return host == "127.0.0.1" || host == "localhost" || host == "[::1]";
}

void Server::Start() {
  http_ = std::make_unique<httplib::Server>();
  httplib::Server& s = *http_;
  s.set_read_timeout(5, 0);
  s.set_write_timeout(5, 0);
  s.set_keep_alive_timeout(5);
  s.set_payload_max_length(4096);
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    Secure(res);
    if (!HostAllowed(req.get_header_value("Host"))) {
      view_.RecordRefusal("Host '" + req.get_header_value("Host") + "' is not this machine",
                          UnixSeconds());
      JsonError(res, 403, "this dashboard answers to 127.0.0.1 or localhost only");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method != "GET" && req.method != "HEAD" && req.path != "/api/fault") {
      view_.RecordRefusal(req.method + " " + req.path, UnixSeconds());
      JsonError(res, 405, "only GET here; changes go through POST /api/fault with the secret");
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  s.Get("/", [this](const httplib::Request&, httplib::Response& res) {
    std::string page = kIndexHtml;
    const nlohmann::json panels = {
        {"topology", o_.topology_view}, {"carbon", o_.carbon_timeline}, {"faults", o_.fault_sim}};
    // The panels the command line asked for, as a data attribute the script reads.
    const std::string marker = "data-panels=\"\"";
    const size_t at = page.find(marker);
    if (at != std::string::npos) {
      std::string value = panels.dump();
      std::string escaped;
      for (char c : value) escaped += c == '"' ? std::string("&quot;") : std::string(1, c);
      page.replace(at, marker.size(), "data-panels=\"" + escaped + "\"");
    }
    res.set_content(page, "text/html; charset=utf-8");
  });
  s.Get("/app.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kAppJs, "text/javascript; charset=utf-8");
  });
  s.Get("/style.css", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kStyleCss, "text/css; charset=utf-8");
  });
  s.Get("/api/state", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        view_.State(UnixSeconds()).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(ExpositionText(view_.Metrics(UnixSeconds())), kExpositionContentType);
  });
  s.Post("/api/fault", [this](const httplib::Request& req, httplib::Response& res) {
    const double now = UnixSeconds();
    std::string secret;
    {
      std::lock_guard<std::mutex> lock(secret_mu_);
      secret = secret_;
    }
    if (secret.empty()) {
      view_.RecordRefusal("fault request: this dashboard has no job secret", now);
      return JsonError(res, 403,
                       "this dashboard was started without the job's secret: changes are off");
    }
    if (!SecretMatches(req.get_header_value("X-CDT-Secret"), secret)) {
      view_.RecordRefusal("fault request without the job's secret", now);
      return JsonError(res, 403, "refused: the X-CDT-Secret header does not hold the job's secret");
    }
    const nlohmann::json body = nlohmann::json::parse(req.body, nullptr, false);
    if (!body.is_object() || !body.contains("kind") || !body["kind"].is_string() ||
        !body.contains("rank") || !body["rank"].is_number_integer()) {
      view_.RecordRefusal("fault request: bad body", now);
      return JsonError(res, 400,
                       R"(expected {"kind": "kill|hang|slow|cut", "rank": N, "value": X})");
    }
    const double value =
        body.contains("value") && body["value"].is_number() ? body["value"].get<double>() : 0;
    try {
      const std::string spec = act_(body["kind"], body["rank"].get<int>(), value);
      view_.RecordFault(spec, now);
      res.set_content(nlohmann::json{{"queued", spec}}.dump(), "application/json");
    } catch (const Error& e) {
      view_.RecordRefusal(std::string("fault request: ") + e.what(), now);
      JsonError(res, 400, e.what());
    }
  });
  if (o_.port == 0) {
    port_ = s.bind_to_any_port(o_.bind);
    if (port_ < 0)
      throw Error(ErrorCode::kIo, "dashboard: cannot listen on " + o_.bind + " (any port)");
  } else {
    if (!s.bind_to_port(o_.bind, o_.port))
      throw Error(ErrorCode::kIo, "dashboard: cannot listen on " + o_.bind + ":" +
                                      std::to_string(o_.port) +
                                      " (in use? give --port, or 0 for any free one)");
    port_ = o_.port;
  }
  thread_ = std::thread([this] {
    while (!stopping_.load()) {
      http_->listen_after_bind();
      // cpp-httplib 0.11 closes its listening socket and returns on any accept() error but
      // EMFILE (a client that resets before accept: ECONNABORTED; EINTR): listen again on the
      // same port rather than leave the page "connection refused" while the process lives on.
      for (int i = 0; i < 100 && !stopping_.load() && !http_->bind_to_port(o_.bind, port_); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    exited_.store(true);
  });
}

void Server::Stop() {
  if (!http_) return;
  stopping_.store(true);
  // stop() ends a running listen; repeat it until the thread is out (it may be between two).
  while (!exited_.load()) {
    http_->stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (thread_.joinable()) thread_.join();
  http_.reset();
}

}  // namespace cdt::dashboard
