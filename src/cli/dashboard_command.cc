#include "cli/dashboard_command.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>

#include "cdt/error.h"
#include "cli/fault_inject.h"
#include "cli/live_publisher.h"
#include "common/file_io.h"
#include "common/unix_time.h"
#include "dashboard/job_view.h"
#include "dashboard/server.h"
#include "dashboard/token.h"
#include "elastic/rendezvous.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"

namespace cdt::cli {

namespace {

using Json = nlohmann::json;

// The strategy cache entry measured for this shape (ranks per node in node order), if any.
std::optional<std::pair<Json, std::string>> FindStrategy(const std::string& dir,
                                                         const std::vector<int>& shape) {
  std::error_code ec;
  if (dir.empty() || !std::filesystem::is_directory(dir, ec)) return std::nullopt;
  std::optional<std::pair<Json, std::string>> best;
  std::filesystem::file_time_type newest{};
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("strategy-", 0) != 0 || entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    const Json j = Json::parse(in, nullptr, false);
    if (!j.is_object() || j.value("format", "") != "cdt-strategy") continue;
    const Json& h = j.contains("hierarchy") ? j["hierarchy"] : Json();
    if (!h.is_object() || !h.contains("ranks_per_node") || h["ranks_per_node"] != Json(shape))
      continue;
    const auto when = entry.last_write_time(ec);
    if (!best || when > newest) {
      best = std::make_pair(j, entry.path().string() + " (" + j.value("fingerprint", "") + ")");
      newest = when;
    }
  }
  return best;
}

// The page's address as a browser takes it (an IPv6 literal in brackets).
std::string PageUrl(const DashboardOptions& o, int port) {
  const std::string host = o.bind.find(':') != std::string::npos ? "[" + o.bind + "]" : o.bind;
  return (o.tls_cert.empty() ? "http://" : "https://") + host + ":" + std::to_string(port) + "/";
}

// Prints the page's link with the dashboard token in its fragment (which browsers never send),
// once per token: at start when the secret is known, else when the job file first gives it.
void AnnounceToken(const DashboardOptions& o, const dashboard::Server& server,
                   std::string* announced) {
  const std::string token = server.Token();
  if (token.empty() || token == *announced) return;
  if (!dashboard::IsLoopbackBind(o.bind) && !o.allow_remote_faults) return;  // no use for it
  *announced = token;
  std::printf("cann-dashboard: fault actions open with the token: %s#token=%s\n",
              PageUrl(o, server.port()).c_str(), token.c_str());
  std::fflush(stdout);
}

dashboard::CarbonSeries LoadCarbon(const std::string& path, const std::string& start, double now,
                                   double budget_g, double pue) {
  const green::CarbonTrace trace = green::ReadCarbonTrace(path);
  dashboard::CarbonSeries c;
  const double first = trace.start_unix();
  // At most ten years of hours (the trace's own span otherwise): a trace whose times lie
  // centuries apart must not become an int overflow or a giant allocation.
  const double span_h = std::floor((trace.end_unix() - first) / 3600);
  const int hours = std::isfinite(span_h) ? static_cast<int>(std::clamp(span_h, 0.0, 87840.0)) : 0;
  c.first_hour_unix = first;
  c.g_per_kwh = trace.Hourly(first, hours);
  double mapped = trace.SameMomentOfYear(now);
  if (!start.empty()) {
    const auto t = green::ParseIsoTime(start);
    if (!t)
      throw Error(ErrorCode::kInvalidArgument,
                  "--trace-start '" + start + "' is not an ISO time (2022-03-14T05:00:00Z)");
    mapped = *t;
  }
  c.offset_s = now - mapped;
  c.source = trace.region() + " (" + path + "), now = " + green::FormatIsoTime(mapped) +
             (start.empty() ? " (the same moment of the trace's year)" : "");
  c.budget_g = budget_g;
  c.pue = pue;
  return c;
}

// Reads the job's store for the dashboard: the registered workers and their newest documents.
class Poller {
 public:
  // `announced`: the token whose link was printed (shared with the start banner).
  Poller(const DashboardOptions& o, const Environment& env, dashboard::JobView& view,
         dashboard::Server& server, std::string* announced)
      : o_(o), env_(env), view_(view), server_(server), announced_(announced) {}

  void Poll() {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      if (!store_) Connect();
      if (!store_) return;
      const int64_t n = store_->Add(LiveWorkersKey(job_.job_id), 0);
      if (n < 0 || n > 65536)
        throw Error(ErrorCode::kProtocol, "the job's store counts " + std::to_string(n) +
                                              " live workers (0..65536 expected)");
      for (int64_t i = static_cast<int64_t>(ids_.size()); i < n; ++i) {
        const std::string id =
            store_->Get(LiveWorkerKey(job_.job_id, i), std::chrono::milliseconds(2000));
        try {
          ids_.push_back(std::stoi(id));
        } catch (...) {
          throw Error(ErrorCode::kProtocol, "worker registration " + std::to_string(i) +
                                                " holds '" + id.substr(0, 40) + "', not an id");
        }
      }
      for (int id : ids_) {
        const std::string key = LiveKey(job_.job_id, id);
        if (!store_->Check(key)) continue;
        try {
          view_.Update(id, store_->Get(key, std::chrono::milliseconds(2000)), UnixSeconds());
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kInvalidArgument) throw;
          if (refused_docs_.insert(id).second)
            std::fprintf(stderr, "cann-dashboard: %s (ignored)\n", e.what());
        }
      }
      elastic::NoteWatcher(*store_, job_.job_id, UnixSeconds());
      if (view_.FinalSeen()) elastic::NoteFinalSeen(*store_, job_.job_id);
      view_.SetStoreError("");
      if (auto shape = view_.ShapeWanted(); shape && *shape != shape_tried_) {
        shape_tried_ = *shape;
        const std::string dir = o_.cache_dir.empty() ? env_.strategy_cache_dir : o_.cache_dir;
        if (auto found = FindStrategy(dir, *shape)) view_.SetTopology(found->first, found->second);
      }
    } catch (const Error& e) {
      // The job ended (its agent hosted the store) or the store is away: keep what was seen,
      // look for a job again at the next poll.
      view_.SetStoreError(std::string(e.what()).substr(0, 300));
      store_.reset();
      ids_.clear();
    }
  }

  std::string QueueFault(const std::string& kind, int rank, double value) {
    FaultInjectOptions f;
    if (kind == "kill")
      f.kill = rank;
    else if (kind == "hang")
      f.hang = rank;
    else if (kind == "slow")
      f.slow = std::to_string(rank) + "=" + std::to_string(value > 1 ? value : 3.0);
    else if (kind == "cut") {
      f.cut_link = rank;
      f.for_s = value > 0 ? value : 5;
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  "unknown fault kind '" + kind.substr(0, 20) + "' (kill, hang, slow, cut)");
    }
    if (rank < 0 || rank > 65535)
      throw Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(rank) + " is out of range");
    const std::string spec = FaultSpec(f);
    std::lock_guard<std::mutex> lock(mu_);
    if (!store_) throw Error(ErrorCode::kInvalidArgument, "no running job to send it to");
    elastic::QueueFault(*store_, job_.job_id, spec);
    std::printf("cann-dashboard: queued %s for job %s\n", spec.c_str(), job_.job_id.c_str());
    std::fflush(stdout);
    return spec;
  }

 private:
  void Connect() {
    if (!o_.job_endpoint.empty()) {
      job_ = {o_.rdzv_backend, o_.job_endpoint, o_.job_id, o_.job_secret, ""};
    } else {
      if (::access(JobFilePath(env_, o_.job_id).c_str(), F_OK) != 0) {
        view_.SetStoreError("waiting for job '" + o_.job_id + "' (no " +
                            JobFilePath(env_, o_.job_id) + " yet)");
        return;
      }
      job_ = ReadJobFile(env_, o_.job_id, "cann-dashboard");
    }
    store_ = ConnectJobStore(job_, std::chrono::milliseconds(3000));
    server_.SetSecret(job_.secret);
    AnnounceToken(o_, server_, announced_);
    view_.SetStore(job_.backend + " store at " + job_.endpoint +
                   (job_.path.empty() ? "" : " (job file " + job_.path + ")"));
  }

  const DashboardOptions& o_;
  const Environment& env_;
  dashboard::JobView& view_;
  dashboard::Server& server_;
  std::mutex mu_;  // the store is used by the poller and the HTTP threads
  JobFile job_;
  std::unique_ptr<Store> store_;
  std::vector<int> ids_;
  std::set<int> refused_docs_;
  std::vector<int> shape_tried_;
  std::string* const announced_;
};

}  // namespace

void AddDashboardOptions(CLI::App* cmd, DashboardOptions* o, const Environment& env) {
  o->job_id = env.job_id.value_or("cdt");
  o->job_secret = env.job_secret.value_or("");
  cmd->add_option("--job-id", o->job_id, "the job to watch (CDT_JOB_ID)")->capture_default_str();
  cmd->add_option("--job", o->job_endpoint,
                  "HOST:PORT of the job's store (default: from the job's file on this machine; "
                  "a TCP store needs CDT_JOB_SECRET)");
  cmd->add_option("--rdzv-backend", o->rdzv_backend, "with --job: tcp | etcd")
      ->capture_default_str();
  cmd->add_option("--bind", o->bind,
                  "address to listen on (other than loopback: anyone who reaches it sees the "
                  "job; fault actions are off there unless --allow-remote-faults)")
      ->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free one)")->capture_default_str();
  cmd->add_flag("--allow-remote-faults", o->allow_remote_faults,
                "allow fault actions (with the token) on a bind beyond loopback");
  cmd->add_option("--tls-cert", o->tls_cert, "serve HTTPS with this PEM certificate (chain)");
  cmd->add_option("--tls-key", o->tls_key, "the private key of --tls-cert (PEM)");
  cmd->add_flag("--topology-view", o->topology_view, "show the topology panel");
  cmd->add_flag("--carbon-timeline", o->carbon_timeline, "show the carbon timeline panel");
  cmd->add_flag("--fault-sim", o->fault_sim, "show the fault simulation panel");
  cmd->add_option("--trace", o->trace,
                  "carbon trace for the timeline (default: the knowledge base's CISO 2022)");
  cmd->add_option("--trace-start", o->trace_start,
                  "the trace time that is now (default: the same moment of the trace's year)");
  cmd->add_option("--carbon-budget", o->carbon_budget_g, "grams CO2e the job may emit (0: none)");
  cmd->add_option("--pue", o->pue, "data-centre PUE applied to metered energy")
      ->capture_default_str();
  cmd->add_option("--cache-dir", o->cache_dir, "strategy cache with the measured topologies");
  cmd->add_option("--poll", o->poll_s, "seconds between reads of the job's store")
      ->capture_default_str();
  cmd->add_option("--replay", o->replay,
                  "show a finished job from its --json result instead of a running one");
  cmd->add_option("--exit-after", o->exit_after_s,
                  "stop serving after this many seconds (0: "
                  "at Ctrl-C)");
}

namespace {

dashboard::ServerOptions ServerOptionsFrom(const DashboardOptions& o) {
  const bool all = !o.topology_view && !o.carbon_timeline && !o.fault_sim;
  dashboard::ServerOptions so;
  so.bind = o.bind;
  so.port = o.port;
  so.job_id = o.job_id;
  so.secret = o.job_endpoint.empty() ? "" : o.job_secret;
  so.allow_remote_faults = o.allow_remote_faults;
  so.tls_cert = o.tls_cert;
  so.tls_key = o.tls_key;
  so.topology_view = all || o.topology_view;
  so.carbon_timeline = all || o.carbon_timeline;
  so.fault_sim = all || o.fault_sim;
  return so;
}

// What the user must know at start: where the page is, the defaults taken, how fault actions
// open, and — loudly, on stderr — what a bind beyond loopback exposes.
void PrintStart(const DashboardOptions& o, const dashboard::Server& server,
                const std::vector<std::string>& defaults, std::string* announced) {
  std::printf("cann-dashboard: %s  (metrics: /metrics)\n", PageUrl(o, server.port()).c_str());
  if (!defaults.empty()) {
    std::printf("cann-dashboard: defaults used:");
    for (size_t i = 0; i < defaults.size(); ++i)
      std::printf("%s %s", i ? ";" : "", defaults[i].c_str());
    std::printf("\n");
  }
  const bool remote = !dashboard::IsLoopbackBind(o.bind);
  if (remote && o.tls_cert.empty())
    std::fprintf(stderr,
                 "cann-dashboard: WARNING: listening on %s without TLS: the job's data and the "
                 "dashboard token travel in clear to anyone on the path (give --tls-cert and "
                 "--tls-key)\n",
                 o.bind.c_str());
  if (remote && !o.allow_remote_faults)
    std::fprintf(stderr,
                 "cann-dashboard: fault actions are OFF: %s is beyond loopback "
                 "(--allow-remote-faults turns them on)\n",
                 o.bind.c_str());
  if (remote && o.allow_remote_faults)
    std::fprintf(stderr,
                 "cann-dashboard: WARNING: fault actions are ON for anyone who reaches %s:%d "
                 "with the dashboard token (--allow-remote-faults)\n",
                 o.bind.c_str(), server.port());
  if (server.Token().empty())
    std::printf(
        "cann-dashboard: fault buttons need the dashboard token: its link is printed here once "
        "the job's secret is known (`cann-dist-train secret --dashboard-token` prints it too); "
        "Ctrl-C stops\n");
  AnnounceToken(o, server, announced);
  std::fflush(stdout);
}

}  // namespace

int RunDashboard(const DashboardOptions& o, const Environment& env) {
  if (o.poll_s < 0.1 || o.poll_s > 60)
    throw Error(ErrorCode::kInvalidArgument, "--poll must be between 0.1 and 60 seconds");
  if (o.pue < 1 || o.pue > 3)
    throw Error(ErrorCode::kInvalidArgument, "--pue must be between 1 and 3");
  if (!(o.exit_after_s >= 0 && o.exit_after_s <= 1e9))
    throw Error(ErrorCode::kInvalidArgument, "--exit-after must be between 0 and 1e9 seconds");
  const dashboard::ServerOptions so = ServerOptionsFrom(o);
  dashboard::JobView view(o.job_id);
  std::vector<std::string> defaults;
  const std::string trace =
      o.trace.empty() ? env.knowledge_base + "/carbon_traces/CISO_2022.csv" : o.trace;
  if (o.trace.empty()) defaults.push_back("carbon trace " + trace);
  if (so.carbon_timeline)
    view.SetCarbon(LoadCarbon(trace, o.trace_start, UnixSeconds(), o.carbon_budget_g, o.pue));
  if (!o.replay.empty())
    view.Replay(ReadFileBounded(o.replay, 256 << 20), o.replay, UnixSeconds());
  else if (o.job_endpoint.empty())
    defaults.push_back("job '" + o.job_id + "' from its job file " + JobFilePath(env, o.job_id));
  if (o.cache_dir.empty()) defaults.push_back("measured topologies from " + env.strategy_cache_dir);

  std::string announced;  // the token whose link was printed
  std::unique_ptr<Poller> poller;
  dashboard::Server server(view, so, [&poller](const std::string& kind, int rank, double v) {
    return poller->QueueFault(kind, rank, v);
  });
  poller = std::make_unique<Poller>(o, env, view, server, &announced);

  // SIGINT/SIGTERM end the loop below (waited for, not handled: no handler, no global).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  server.Start();  // its threads inherit the blocked mask
  PrintStart(o, server, defaults, &announced);
  const double started = UnixSeconds();
  for (;;) {
    if (o.replay.empty()) poller->Poll();
    if (o.exit_after_s > 0 && UnixSeconds() - started >= o.exit_after_s) break;
    const timespec wait{static_cast<time_t>(o.poll_s),
                        static_cast<long>((o.poll_s - std::floor(o.poll_s)) * 1e9)};
    if (sigtimedwait(&stop, nullptr, &wait) > 0) break;
  }
  server.Stop();
  std::printf("cann-dashboard: stopped\n");
  return 0;
}

int DashboardMain(int argc, char** argv) {
  const Environment env = Environment::FromProcess();
  CLI::App app{"cann-dashboard: the web dashboard of a cann-dist-train job (docs/dashboard.md)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cann-dashboard 0.1.0");
  DashboardOptions o;
  AddDashboardOptions(app.add_subcommand("cluster", "serve the dashboard of a running job"), &o,
                      env);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return RunDashboard(o, env);
}

void AddDashboardTokenOptions(CLI::App* secret_cmd, DashboardTokenOptions* o,
                              const Environment& env) {
  o->job_id = env.job_id.value_or("cdt");
  secret_cmd->add_flag("--dashboard-token", o->print,
                       "print the token that opens the dashboard's fault actions for the job "
                       "(from its job file, else CDT_JOB_SECRET), not a new secret");
  secret_cmd->add_option("--job-id", o->job_id, "with --dashboard-token: the job (CDT_JOB_ID)")
      ->capture_default_str();
}

int PrintDashboardToken(const DashboardTokenOptions& o, const Environment& env) {
  const std::string path = JobFilePath(env, o.job_id);
  std::string secret, from;
  if (::access(path.c_str(), F_OK) == 0) {
    secret = ReadJobFile(env, o.job_id, "cann-dist-train secret").secret;
    from = "the job file " + path;
  } else if (env.job_secret && !env.job_secret->empty()) {
    secret = *env.job_secret;
    from = "CDT_JOB_SECRET";
  }
  if (secret.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "no secret for job '" + o.job_id + "': no job file " + path +
                    " holds one and CDT_JOB_SECRET is not set (start the job first, or give "
                    "--job-id; a dashboard started with --job uses CDT_JOB_SECRET)");
  std::printf("%s\n", dashboard::DashboardToken(secret, o.job_id).c_str());
  std::fprintf(stderr, "cann-dist-train secret: dashboard token of job '%s' from %s\n",
               o.job_id.c_str(), from.c_str());
  return 0;
}

}  // namespace cdt::cli
