// `cann-dist-train fault-inject`: queues a fault for a running elastic job (docs/elastic.md,
// "Fault injection"). The job's workers read the queue every ten steps.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "cdt/store.h"
#include "cli/environment.h"

namespace cdt::cli {

struct FaultInjectOptions {
  std::string job_id = "cdt";
  std::string rdzv_backend, rdzv_endpoint, job_secret;  // empty: from the agent's job file
  int kill = -1, hang = -1, cut_link = -1;
  std::string slow;       // RANK=FACTOR
  double for_s = 10;      // --cut-link: seconds
  long long at_step = 0;  // 0: the next step the workers look (at most ten steps away)
};

void AddFaultInjectOptions(CLI::App* cmd, FaultInjectOptions* o, const Environment& env);
// The fault spec the options describe (kill:2@150 ...); throws cdt::Error(kInvalidArgument).
std::string FaultSpec(const FaultInjectOptions& o);
int RunFaultInject(const FaultInjectOptions& o, const Environment& env);

// Where an agent writes the rendezvous address of job `job_id` (its job file).
std::string JobFilePath(const Environment& env, const std::string& job_id);

// What a job file holds: its store, and the secret that opens it.
struct JobFile {
  std::string backend = "tcp", endpoint, job_id, secret;
  std::string path;  // where it was read ("" = given by hand)
};
// Reads and checks the job file of `job_id` (ours, in a private directory). Throws
// cdt::Error(kInvalidArgument) naming `verb`, the path and what to give instead (also when there
// is none).
JobFile ReadJobFile(const Environment& env, const std::string& job_id, const std::string& verb);
// A client of the job's store (TCP with the secret, or etcd), `timeout` per call.
std::unique_ptr<Store> ConnectJobStore(const JobFile& job, std::chrono::milliseconds timeout);

}  // namespace cdt::cli
