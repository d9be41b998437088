// `cann-dist-train train --elastic` / `cann-dist-train elastic`: the worker side of elastic
// training (docs/elastic.md). Each worker keeps its process and memory across failures: when its
// group breaks it joins the next rendezvous round (elastic/rendezvous.h), builds the next
// generation's communicators over the same store, and trains on from the group's committed state.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/environment.h"
#include "cli/launch_options.h"
#include "cli/topo_scan.h"
#include "cli/train_command.h"
#include "elastic/fault_spec.h"

namespace cdt::cli {

using elastic::Fault;
using elastic::ParseFaults;

struct ElasticOptions {
  bool enabled = false;
  std::string inject;
  int min_workers = 1;
  int spares = 0;                 // hot spares per node
  double pause_timeout_s = 3600;  // below --min-workers: how long to wait for workers
  // Close a rendezvous round without missing workers (hung ones) this long after arriving; at
  // least three mean step times of the run so far.
  double last_call_s = 0.5;
};

void AddElasticOptions(CLI::App* cmd, ElasticOptions* o);

// `launch --elastic -- PROG`: sets the agent's elastic mode, spares and `job_file` (where
// fault-inject finds the job) on `launch` (after validating `elastic`) and returns what every worker gets besides the launcher's
// variables — CDT_ELASTIC=1, CDT_MIN_WORKERS, CDT_PAUSE_TIMEOUT, CDT_RDZV_LAST_CALL, CDT_TIMEOUT,
// CDT_INJECT — which cann_dist.elastic.run reads (docs/python.md). Empty without --elastic.
std::map<std::string, std::string> ElasticLaunch(const ElasticOptions& elastic,
                                                 const std::string& job_file,
                                                 LaunchOptions* launch);

// Runs this worker until the job finishes; returns its exit code. With `adaptive` (the train
// verb's --adaptive-comm), every generation's communicators get the topology planner of that
// generation's shape: from the strategy cache when the shape was seen before, else probed (a
// fraction of a second on one host; the recovery's RTO includes it).
int RunElasticTraining(const Environment& env, const LaunchOptions& launch,
                       TrainCommandOptions options, const ElasticOptions& elastic,
                       int local_world_size, const TopoScanOptions* adaptive = nullptr);

}  // namespace cdt::cli
