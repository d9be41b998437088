// `cann-dashboard cluster` (also `cann-dist-train dashboard cluster`): serves the dashboard of a
// running job (docs/dashboard.md). Finds the job through its job file (or --job), reads its
// workers' live documents from the job's store once a second, picks the measured topology of the
// job's shape from the strategy cache, maps a carbon trace onto the wall clock, and queues faults
// the page asks for with the job's secret.
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

}  // namespace cdt::cli
