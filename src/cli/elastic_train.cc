#include "cli/elastic_train.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <thread>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "elastic/fault_spec.h"
#include "elastic/rendezvous.h"

namespace cdt::cli {
namespace {

// Failures the group survives by re-forming; anything else (bad options, divergence, a dead
// store) ends the job as it would without --elastic.
bool Recoverable(const Error& e) {
  return e.code() == ErrorCode::kPeerLost || e.code() == ErrorCode::kTimeout ||
         e.code() == ErrorCode::kAborted;
}

// cut: every interface of this node's network namespace but lo goes down for `seconds`, then
// up again, by a detached shell (the outside world: ip(8) from iproute2; needs CAP_NET_ADMIN, as
// inside tools/emulate-cluster's namespaces).
void CutLinks(double seconds) {
  const std::string script =
      "ifs=$(ls /sys/class/net | grep -v '^lo$'); for i in $ifs; do ip link set dev $i down; done; "
      "sleep " +
      std::to_string(seconds) + "; for i in $ifs; do ip link set dev $i up; done";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    if (::fork() == 0) {
      ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::_exit(0);
  }
  if (pid > 0) ::waitpid(pid, nullptr, 0);
}

}  // namespace

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

int RunElasticTraining(const Environment& env, const LaunchOptions& launch,
                       TrainCommandOptions options, const ElasticOptions& elastic,
                       int local_world_size) {
#ifndef CDT_HAVE_TORCH
  (void)env, (void)launch, (void)options, (void)elastic, (void)local_world_size;
  throw Error(
      ErrorCode::kInvalidArgument,
      "this build has no trainer: install libtorch-dev (scripts/install-deps.sh) and rebuild");
#else
  options.train.local_world_size = local_world_size;
  const WorkerIdentity id = IdentityOf(env);
  WorkerSession s;
  ConnectStore(env, launch, &s);
  Store& store = *s.store;
  const CommunicatorOptions base = CommunicatorOptionsFor(env, launch);

  train::ElasticSession session;
  session.worker_id = id.rank;
  int current_world = id.world_size;
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
  std::vector<Fault> faults = ParseFaults(elastic.inject);
  std::vector<bool> fired(faults.size(), false);  // once per process: a step run again after a
                                                  // recovery does not repeat its fault
  int64_t faults_seen = 0;                        // of the queue `fault-inject` fills
  auto store_quiet_until = std::chrono::steady_clock::now();
  bool store_warned = false;
  // slow: the step's own time is measured between calls, before the fault starts.
  auto last_call = std::chrono::steady_clock::now();
  double normal_step_s = 0;
  int64_t normal_steps = 0;
  session.before_step = [&](int64_t step) {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_call).count();
    last_call = now;
    for (size_t i = 0; i < faults.size(); ++i) {
      const Fault& f = faults[i];
      if (f.kind == "slow" && f.worker == session.worker_id && step >= f.step && normal_steps > 0) {
        if (!fired[i])
          std::fprintf(stderr,
                       "\ncann-dist-train: worker %d: injected fault: slow x%.1f from step %lld\n",
                       f.worker, f.factor, static_cast<long long>(step));
        fired[i] = true;
        std::this_thread::sleep_for(
            std::chrono::duration<double>((f.factor - 1) * normal_step_s / normal_steps));
        last_call = std::chrono::steady_clock::now();
        return;
      }
    }
    if (step > 0) normal_step_s += dt, ++normal_steps;
    // Every tenth step: faults queued by `fault-inject`, and on rank 0 whether workers wait to
    // (re)join. Training does not need the store: while it is out of reach (its host died, a
    // link is down), say so once and look again every 30 s instead of every tenth step.
    if (step % 10 == 0 && std::chrono::steady_clock::now() >= store_quiet_until) {
      std::vector<std::string> specs;
      try {
        specs = elastic::QueuedFaults(store, launch.job_id, &faults_seen);
        if (session.is_rank0 && current_world < target_world)
          session.regroup_requested = elastic::RegroupRequests(store, launch.job_id) > 0;
      } catch (const Error& e) {
        if (!store_warned)
          std::fprintf(stderr,
                       "\ncann-dist-train: worker %d: the store is out of reach (%s); training on, "
                       "looking again every 30 s\n",
                       id.rank, e.what());
        store_warned = true;
        store_quiet_until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      }
      for (const std::string& spec : specs) try {
          for (Fault f : ParseFaults(spec)) {
            faults.push_back(f);
            fired.push_back(false);
          }
        } catch (const Error& e) {
          std::fprintf(stderr,
                       "cann-dist-train: worker %d: a queued fault was not understood: %s\n",
                       id.rank, e.what());
        }
    }
    for (size_t i = 0; i < faults.size(); ++i) {
      const Fault& f = faults[i];
      if (f.kind != "cut" || f.worker != id.node_rank || id.local_rank != 0 || step < f.step ||
          fired[i])
        continue;
      fired[i] = true;
      std::fprintf(
          stderr,
          "\ncann-dist-train: node %d: injected fault: its links down for %.1f s at step %lld\n",
          f.worker, f.factor, static_cast<long long>(step));
      elastic::ReportFault(store, launch.job_id, session.worker_id, "cut", UnixSeconds());
      CutLinks(f.factor);
    }
    for (size_t i = 0; i < faults.size(); ++i) {
      const Fault& f = faults[i];
      if (f.kind == "slow" || f.kind == "cut" || f.worker != session.worker_id || step < f.step ||
          fired[i])
        continue;
      fired[i] = true;
      std::fprintf(
          stderr, "\ncann-dist-train: worker %d (pid %d): injected fault: %s at step %lld\n",
          f.worker, static_cast<int>(::getpid()), f.kind.c_str(), static_cast<long long>(step));
      elastic::ReportFault(store, launch.job_id, f.worker, f.kind, UnixSeconds());
      ::kill(::getpid(), f.kind == "kill" ? SIGKILL : SIGSTOP);
    }
  };

  elastic::RendezvousOptions ro;
  ro.job_id = launch.job_id;
  ro.worker_id = id.rank;
  ro.min_workers = elastic.min_workers;
  ro.target_world = target_world;
  ro.pause_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(elastic.pause_timeout_s * 1000));
  ro.on_pause = [&](const std::vector<int>& present) {
    const bool writer =
        !present.empty() && id.rank == *std::min_element(present.begin(), present.end());
    std::string file;
    if (writer) {
      try {
        file = train::CheckpointSession(options.train, &session);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "cann-dist-train: worker %d: paused, but the checkpoint failed: %s\n",
                     id.rank, e.what());
      }
    }
    std::fprintf(stderr,
                 "cann-dist-train: worker %d: paused: %zu worker(s) present, --min-workers %d; "
                 "waiting up to "
                 "%.0f s for more%s%s\n",
                 id.rank, present.size(), elastic.min_workers, elastic.pause_timeout_s,
                 file.empty() ? "" : "; state checkpointed to ", file.c_str());
  };
  ro.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(std::max(60.0, launch.timeout_s) * 1000));
  ro.abandon_after = std::chrono::milliseconds(static_cast<int64_t>(launch.timeout_s * 1000));
  std::vector<int> previous(static_cast<size_t>(id.world_size));
  std::iota(previous.begin(), previous.end(), 0);
  // Newcomers — spares, and workers that arrived after their round closed (hung, or cut off and
  // back) — wait for a round that opens from `from` on and join it; nullopt: the job finished.
  auto join_as_newcomer = [&](int64_t from,
                              bool ask_regroup) -> std::optional<elastic::Membership> {
    elastic::AnnounceSpare(store, launch.job_id);
    if (ask_regroup) elastic::RequestRegroup(store, launch.job_id, 1);
    for (int64_t g = from;; ++g) {
      g = elastic::WaitForRound(store, ro, g);
      if (g < 0) return std::nullopt;
      ro.last_call = ro.timeout;  // the members' last call decides
      const elastic::Membership m = elastic::JoinRound(
          store, ro, g, elastic::MembersOf(store, launch.job_id, g - 1, ro.timeout));
      if (m.rank < 0) continue;
      elastic::SpareJoined(store, launch.job_id);
      // What this worker held is older than the group's: it receives the group's state.
      session.snapshots[0] = {};
      session.snapshots[1] = {};
      session.pending = {};
      if (ask_regroup) elastic::RequestRegroup(store, launch.job_id, -1);
      std::fprintf(stderr, "cann-dist-train: %s worker %d joins generation %lld as rank %d of %d\n",
                   ask_regroup ? "joining" : "spare", id.rank, static_cast<long long>(g), m.rank,
                   m.world);
      return m;
    }
  };
  // Members join the round; a store out of reach (this node's link is down) is retried until the
  // rendezvous timeout; arriving after the round closed makes this worker a newcomer.
  auto join_round = [&](int64_t g) -> std::optional<elastic::Membership> {
    const auto deadline = std::chrono::steady_clock::now() + ro.timeout;
    for (bool said = false;;) {
      try {
        const elastic::Membership m = elastic::JoinRound(store, ro, g, previous);
        if (m.rank >= 0) return m;
        break;
      } catch (const Error& e) {
        const bool unreachable = e.code() == ErrorCode::kStore || e.code() == ErrorCode::kTimeout;
        if (!unreachable && e.code() != ErrorCode::kAborted) throw;
        if (!unreachable) break;
        if (std::chrono::steady_clock::now() >= deadline) throw;
        if (!said)
          std::fprintf(stderr,
                       "cann-dist-train: worker %d: the store is out of reach (%s); retrying\n",
                       id.rank, e.what());
        said = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
      }
    }
    std::fprintf(
        stderr, "cann-dist-train: worker %d: generation %lld formed without it; asking to rejoin\n",
        id.rank, static_cast<long long>(g));
    return join_as_newcomer(g + 1, true);
  };
  int64_t generation = 0;
  std::optional<elastic::Membership> first;
  if (env.spare || env.joiner) {
    // Loaded and waiting: a spare joins the first round after a failure that needs it; a node
    // past MIN asks the running group to take it in.
    train::LoadSessionData(options.train, &session);
    first = join_as_newcomer(1, env.joiner);
    if (!first) return 0;  // the job finished without needing us
  }
  for (;; ++generation) {
    // The first round waits for every worker to start; later ones only for the living.
    const train::TrainResult& so_far = session.result;
    const double step_s = so_far.steps > 0 ? so_far.wall_s / static_cast<double>(so_far.steps) : 0;
    ro.last_call = generation == 0 ? ro.timeout
                                   : std::chrono::milliseconds(static_cast<int64_t>(
                                         1000 * std::max(elastic.last_call_s, 3 * step_s)));
    std::optional<elastic::Membership> joined = first ? first : join_round(generation);
    first.reset();
    if (!joined) return 0;  // came back after the job finished
    const elastic::Membership m = *joined;
    generation = m.generation;
    session.generation = generation;
    if (session.pending.active && session.pending.lost.empty()) {
      for (int w : previous)
        if (std::find(m.workers.begin(), m.workers.end(), w) == m.workers.end()) {  // lost
          session.pending.lost.push_back(w);
          // Timed from the fault itself where one was injected (and reported), else from detection.
          const double at = elastic::FaultOf(store, launch.job_id, w).second;
          if (at > 0) session.pending.failure_unix = std::min(session.pending.failure_unix, at);
        }
    }
    previous = m.workers;
    session.is_rank0 = m.rank == 0;
    current_world = m.world;
    session.regroup_requested = false;
    CommunicatorOptions co = base;
    co.rank = m.rank;
    co.size = m.world;
    co.generation = static_cast<uint64_t>(generation);
    if (m.rank != 0) co.log = nullptr;
    try {
      ConnectChannels(co, options.train.reduction.overlap_next_forward, &s);
      train::TrainResult r =
          train::RunTraining(*s.comm, options.train, s.priority_comm.get(), &session);
      r.generation = generation;
      const int code = ReportTrainResult(r, options, m.rank);
      if (m.rank == 0) {
        try {
          elastic::ReportFinished(store, launch.job_id, generation);
        } catch (const Error& e) {
          // The store went with node 0's agent: the training is done and reported all the same.
          std::fprintf(stderr,
                       "cann-dist-train: worker %d: cannot tell the agents the job finished (%s); "
                       "they will stop what is left when they notice\n",
                       id.rank, e.what());
        }
      }
      return code;
    } catch (const Error& e) {
      if (!Recoverable(e)) throw;
      if (s.comm) s.comm->Abort();
      if (s.priority_comm) s.priority_comm->Abort();
      const double now = UnixSeconds();
      if (!session.pending.active) {
        session.pending = {};
        session.pending.active = true;
        session.pending.cause = e.what();
        session.pending.failure_unix = now;
        session.pending.detected_unix = now;
        session.pending.failed_step = session.current_step;
        session.pending.world_before = m.world;
      }
      std::fprintf(stderr,
                   "\ncann-dist-train: worker %d (rank %d of generation %lld): group broken at "
                   "step %lld: %s; re-forming\n",
                   id.rank, m.rank, static_cast<long long>(generation),
                   static_cast<long long>(session.current_step), e.what());
      s.priority_comm.reset();
      s.comm.reset();
    }
  }
#endif
}

}  // namespace cdt::cli
