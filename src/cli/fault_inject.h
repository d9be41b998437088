// `cann-dist-train fault-inject`: queues a fault for a running elastic job (docs/elastic.md,
// "Fault injection"). The job's workers read the queue every ten steps.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

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

}  // namespace cdt::cli
