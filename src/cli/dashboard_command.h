// `cann-dashboard cluster` (also `cann-dist-train dashboard cluster`): serves the dashboard of a
// running job (docs/dashboard.md). Finds the job through its job file (or --job), reads its
// workers' live documents from the job's store once a second, picks the measured topology of the
// job's shape from the strategy cache, maps a carbon trace onto the wall clock, and queues faults
// the page asks for with the dashboard token (derived from the job's secret: dashboard/token.h).
// Also `cann-dist-train secret --dashboard-token`, which prints that token.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "cli/environment.h"

namespace cdt::cli {

struct DashboardOptions {
  std::string job_id = "cdt";
  std::string job_endpoint;  // --job HOST:PORT: the job's store; "" = from the job file
  std::string rdzv_backend = "tcp", job_secret;
  std::string bind = "127.0.0.1";
  int port = 8470;
  bool allow_remote_faults = false;  // fault actions beyond a loopback bind
  std::string tls_cert, tls_key;     // both: HTTPS
  bool topology_view = false, carbon_timeline = false, fault_sim = false;  // none = all panels
  std::string trace;        // carbon trace; "" = the knowledge base's CISO 2022
  std::string trace_start;  // ISO time the job's start maps to; "" = the same moment of the year
  double carbon_budget_g = 0;
  double pue = 1.0;
  std::string cache_dir;  // strategy cache ("" = the default)
  double poll_s = 1.0;
  double exit_after_s = 0;  // 0 = until SIGINT/SIGTERM
  std::string replay;       // a finished job's --json result, shown instead of a live job
};

void AddDashboardOptions(CLI::App* cmd, DashboardOptions* o, const Environment& env);
int RunDashboard(const DashboardOptions& o, const Environment& env);

// The `cann-dashboard` binary's main (one verb: cluster).
int DashboardMain(int argc, char** argv);

// `cann-dist-train secret --dashboard-token [--job-id ID]`: prints the token that opens the
// dashboard's fault actions for that job, from the secret the dashboard would use — the job
// file's on this machine, else CDT_JOB_SECRET (`--job` dashboards). Exit 2 naming both when
// neither holds one.
struct DashboardTokenOptions {
  bool print = false;  // --dashboard-token given
  std::string job_id = "cdt";
};
void AddDashboardTokenOptions(CLI::App* secret_cmd, DashboardTokenOptions* o,
                              const Environment& env);
int PrintDashboardToken(const DashboardTokenOptions& o, const Environment& env);

}  // namespace cdt::cli
