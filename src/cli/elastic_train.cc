#include "cli/elastic_train.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "cdt/error.h"
#include "cli/live_publisher.h"
#include "elastic/driver.h"
#include "elastic/fault_spec.h"
#include "elastic/rendezvous.h"
#include "train/elastic_training.h"

namespace cdt::cli {
namespace {}  // namespace

void AddElasticOptions(CLI::App* cmd, ElasticOptions* o) {
  cmd->add_flag("--elastic", o->enabled,
                "survive lost workers in process: re-form the group without them and train on from "
                "the last committed step (docs/elastic.md)");
  cmd->add_option("--inject", o->inject,
                  "scripted faults: kill:RANK@STEP,hang:RANK@STEP,slow:RANK=FACTOR@STEP,"
                  "cut:NODE@STEP+SECONDS (RANK as first launched)");
  cmd->add_option("--spares", o->spares,
                  "elastic: hot spares per node, loaded and waiting to take a lost worker's place")
      ->capture_default_str();
  cmd->add_option("--min-workers", o->min_workers, "elastic: fewest workers to train on with")
      ->capture_default_str();
  cmd->add_option(
         "--pause-timeout", o->pause_timeout_s,
         "elastic: below --min-workers the group pauses (checkpointed, with --checkpoint-dir) and "
         "waits this many seconds for workers")
      ->capture_default_str();
  cmd->add_option("--rdzv-last-call", o->last_call_s,
                  "elastic: seconds a re-forming group waits for workers neither present nor "
                  "reported dead (hung); at least 3 mean step times")
      ->capture_default_str();
}

std::map<std::string, std::string> ElasticLaunch(const ElasticOptions& elastic,
                                                 const std::string& job_file,
                                                 LaunchOptions* launch) {
  ParseFaults(elastic.inject);  // bad specs fail here, before any worker starts
  if (!elastic.inject.empty() && !elastic.enabled)
    throw Error(ErrorCode::kInvalidArgument,
                "--inject needs --elastic (without it a fault ends the job)");
  if (elastic.spares < 0 || (elastic.spares > 0 && !elastic.enabled))
    throw Error(ErrorCode::kInvalidArgument, "--spares needs --elastic and must not be negative");
  if (elastic.min_workers < 1)
    throw Error(ErrorCode::kInvalidArgument, "--min-workers must be at least 1");
  if (!elastic.enabled) return {};
  launch->elastic = true;
  launch->spares = elastic.spares;
  launch->job_file = job_file;
  const auto number = [](double v) {
    std::ostringstream out;
    out << v;
    return out.str();
  };
  std::map<std::string, std::string> vars{
      {"CDT_ELASTIC", "1"},
      {"CDT_MIN_WORKERS", std::to_string(elastic.min_workers)},
      {"CDT_PAUSE_TIMEOUT", number(elastic.pause_timeout_s)},
      {"CDT_RDZV_LAST_CALL", number(elastic.last_call_s)},
      {"CDT_TIMEOUT", number(launch->timeout_s)}};
  if (!elastic.inject.empty()) vars["CDT_INJECT"] = elastic.inject;
  return vars;
}

int RunElasticTraining(const Environment& env, const LaunchOptions& launch,
                       TrainCommandOptions options, const ElasticOptions& elastic,
                       int local_world_size, const TopoScanOptions* adaptive) {
#ifndef CDT_HAVE_TORCH
  (void)env, (void)launch, (void)options, (void)elastic, (void)local_world_size, (void)adaptive;
  throw Error(
      ErrorCode::kInvalidArgument,
      "this build has no trainer: install libtorch-dev (scripts/install-deps.sh) and rebuild");
#else
  options.train.local_world_size = local_world_size;
  const WorkerIdentity id = IdentityOf(env);
  WorkerSession s;
  ConnectStore(env, launch, &s);
  Store& store = *s.store;
  const CommunicatorOptions base = TrainingCommunicatorOptions(env, launch);

  // Spares (and nodes past MIN of --nnodes MIN:MAX) bring the group up to this.
  int target_world = id.world_size;
  if (env.target_world) {
    try {
      target_world = std::max(id.world_size, std::stoi(*env.target_world));
    } catch (...) {
      throw Error(ErrorCode::kInvalidArgument,
                  "CDT_TARGET_WORLD='" + *env.target_world + "' is not an integer");
    }
  }
  options.train.max_world_size = target_world;

  elastic::WorkerLaunch w;
  w.job_id = launch.job_id;
  w.worker_id = id.rank;
  w.node_rank = id.node_rank;
  w.local_rank = id.local_rank;
  w.world_size = id.world_size;
  w.target_world = target_world;
  w.min_workers = elastic.min_workers;
  w.spare = env.spare;
  w.joiner = env.joiner;
  w.timeout_s = launch.timeout_s;
  w.last_call_s = elastic.last_call_s;
  w.pause_timeout_s = elastic.pause_timeout_s;
  w.inject = elastic.inject;
  const elastic::DriverOptions d =
      elastic::WorkerDriverOptions(w, store, launch.log.ForRank(id.rank));

  if (env.live) options.train.metrics.publish = LivePublisher(store, launch.job_id);
  train::ElasticTraining state(options.train, id.rank,
                               [&options](const train::TrainResult& r, int rank) {
                                 return ReportTrainResult(r, options, rank);
                               });
  const bool priority_channel = options.train.reduction.overlap_next_forward;
  return elastic::RunElastic(store, d, state, [&](const elastic::Membership& m) {
    CommunicatorOptions co = base;
    co.rank = m.rank;
    co.size = m.world;
    co.generation = static_cast<uint64_t>(m.generation);
    co.log = launch.log.ForRank(m.rank);
    ConnectChannels(co, priority_channel, &s);
    if (adaptive) {
      try {
        const topology::Discovery d = DiscoverTopology(*s.comm, *adaptive, env.strategy_cache_dir);
        s.comm->SetAllreduceSelector(d.planner);
        if (s.priority_comm) s.priority_comm->SetAllreduceSelector(d.planner);
      } catch (const Error&) {  // a peer lost while probing: this generation never trained
        s.comm->Abort();
        if (s.priority_comm) s.priority_comm->Abort();
        throw;
      }
    }
    return elastic::Channels{std::move(s.comm), std::move(s.priority_comm)};
  });
#endif
}

}  // namespace cdt::cli
