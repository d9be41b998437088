// The dashboard's HTTP server (cpp-httplib from Debian): the page and its assets (served by the
// binary: no internet needed), /api/state for the page, /metrics for Prometheus, and
// POST /api/fault, which queues a fault in the job only with its secret (docs/dashboard.md,
// "Security"). Reads one JobView; changes nothing itself but through `FaultAction`.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dashboard/job_view.h"

namespace httplib {
class Server;
}

namespace cdt::dashboard {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  int port = 8470;     // 0: any free port (port() says which)
  std::string secret;  // the job's (SetSecret replaces it); empty: changing requests are refused
  // Where the page says the data come from, and which panels it opens with.
  bool topology_view = true, carbon_timeline = true, fault_sim = true;
};

// kind: kill | hang | slow | cut; rank: the worker's starting rank; value: slow factor or cut
// seconds. Returns the fault spec queued; throws cdt::Error for a request it refuses.
using FaultAction = std::function<std::string(const std::string& kind, int rank, double value)>;

class Server {
 public:
  Server(JobView& view, ServerOptions options, FaultAction act);
  ~Server();

  // Binds (throws cdt::Error(kIo) naming the address) and serves on a thread of its own.
  void Start();
  void Stop();
  int port() const { return port_; }
  // The job's secret once known (the job may start after the dashboard). Any thread.
  void SetSecret(std::string secret);

 private:
  bool HostAllowed(const std::string& host) const;

  JobView& view_;
  const ServerOptions o_;
  FaultAction act_;
  mutable std::mutex secret_mu_;
  std::string secret_;  // guarded by secret_mu_
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
  std::atomic<bool> stopping_{false}, exited_{false};
  int port_ = 0;
};

// Whether `given` equals `secret`, in time independent of where they differ.
bool SecretMatches(const std::string& given, const std::string& secret);

}  // namespace cdt::dashboard
