#include "cli/elastic_train.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <thread>

#include "cdt/error.h"
#include "elastic/rendezvous.h"

namespace cdt::cli {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Failures the group survives by re-forming; anything else (bad options, divergence, a dead
// store) ends the job as it would without --elastic.
bool Recoverable(const Error& e) {
  return e.code() == ErrorCode::kPeerLost || e.code() == ErrorCode::kTimeout || e.code() == ErrorCode::kAborted;
}

}  // namespace

std::vector<Fault> ParseFaults(const std::string& spec) {
  std::vector<Fault> out;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto colon = item.find(':'), at = item.find('@');
    auto bad = [&](const std::string& why) {
      return Error(ErrorCode::kInvalidArgument, "--inject '" + item + "': " + why +
                                                    " (expected kill:RANK@STEP, hang:RANK@STEP or "
                                                    "slow:RANK=FACTOR@STEP)");
    };
    if (colon == std::string::npos || at == std::string::npos || at < colon) throw bad("malformed");
    Fault f;
    f.kind = item.substr(0, colon);
    if (f.kind != "kill" && f.kind != "hang" && f.kind != "slow") throw bad("unknown fault '" + f.kind + "'");
    try {
      size_t used = 0;
      std::string who = item.substr(colon + 1, at - colon - 1);
      if (f.kind == "slow") {
        const auto eq = who.find('=');
        if (eq == std::string::npos) throw bad("slow needs RANK=FACTOR");
        f.factor = std::stod(who.substr(eq + 1), &used);
        if (used != who.size() - eq - 1 || !(f.factor >= 1 && f.factor <= 1000))
          throw bad("FACTOR must be a number from 1 to 1000");
        who = who.substr(0, eq);
      }
      f.worker = std::stoi(who, &used);
      if (used != who.size()) throw bad("RANK is not an integer");
      f.step = std::stoll(item.substr(at + 1), &used);
      if (used != item.size() - at - 1) throw bad("STEP is not an integer");
    } catch (const Error&) {
      throw;
    } catch (...) {
      throw bad("RANK and STEP must be integers");
    }
    if (f.worker < 0 || f.step < 0) throw bad("RANK and STEP must not be negative");
    out.push_back(f);
  }
  return out;
}

void AddElasticOptions(CLI::App* cmd, ElasticOptions* o) {
  cmd->add_flag("--elastic", o->enabled,
                "survive lost workers in process: re-form the group without them and train on from "
                "the last committed step (docs/elastic.md)");
  cmd->add_option("--inject", o->inject,
                  "scripted faults: kill:RANK@STEP,hang:RANK@STEP,slow:RANK=FACTOR@STEP (RANK as first "
                  "launched)");
  cmd->add_option("--spares", o->spares,
                  "elastic: hot spares per node, loaded and waiting to take a lost worker's place")
      ->capture_default_str();
  cmd->add_option("--min-workers", o->min_workers, "elastic: fewest workers to train on with")
      ->capture_default_str();
  cmd->add_option("--rdzv-last-call", o->last_call_s,
                  "elastic: seconds a re-forming group waits for workers neither present nor "
                  "reported dead (hung); at least 3 mean step times")
      ->capture_default_str();
}

int RunElasticTraining(const Environment& env, const LaunchOptions& launch, TrainCommandOptions options,
                       const ElasticOptions& elastic, int local_world_size) {
#ifndef CDT_HAVE_TORCH
  (void)env, (void)launch, (void)options, (void)elastic, (void)local_world_size;
  throw Error(ErrorCode::kInvalidArgument,
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
  const std::vector<Fault> faults = ParseFaults(elastic.inject);
  // slow: the step's own time is measured between calls, before the fault starts.
  auto last_call = std::chrono::steady_clock::now();
  double normal_step_s = 0;
  int64_t normal_steps = 0;
  session.before_step = [&](int64_t step) {
    const auto now = std::chrono::steady_clock::now();
    const double dt = std::chrono::duration<double>(now - last_call).count();
    last_call = now;
    for (const Fault& f : faults) {
      if (f.kind == "slow" && f.worker == session.worker_id && step >= f.step && normal_steps > 0) {
        if (step == f.step)
          std::fprintf(stderr, "\ncann-dist-train: worker %d: injected fault: slow x%.1f from step %lld\n",
                       f.worker, f.factor, static_cast<long long>(step));
        std::this_thread::sleep_for(std::chrono::duration<double>((f.factor - 1) * normal_step_s / normal_steps));
        last_call = std::chrono::steady_clock::now();
        return;
      }
    }
    if (step > 0) normal_step_s += dt, ++normal_steps;
    for (const Fault& f : faults) {
      if (f.kind == "slow" || f.worker != session.worker_id || f.step != step) continue;
      std::fprintf(stderr, "\ncann-dist-train: worker %d: injected fault: %s at step %lld\n", f.worker,
                   f.kind.c_str(), static_cast<long long>(step));
      elastic::ReportFault(store, launch.job_id, f.worker, f.kind, UnixNow());
      ::kill(::getpid(), f.kind == "kill" ? SIGKILL : SIGSTOP);
    }
  };

  elastic::RendezvousOptions ro;
  ro.job_id = launch.job_id;
  ro.worker_id = id.rank;
  ro.min_workers = elastic.min_workers;
  ro.target_world = id.world_size;  // spares, where there are, restore it
  ro.timeout = std::chrono::milliseconds(static_cast<int64_t>(std::max(60.0, launch.timeout_s) * 1000));
  std::vector<int> previous(static_cast<size_t>(id.world_size));
  std::iota(previous.begin(), previous.end(), 0);
  int64_t generation = 0;
  if (env.spare) {
    // Loaded and waiting: join the first round after a failure that needs us.
    train::LoadSessionData(options.train, &session);
    elastic::AnnounceSpare(store, launch.job_id);
    for (generation = 1;; ++generation) {
      generation = elastic::WaitForRound(store, ro, generation);
      if (generation < 0) return 0;  // the job finished without needing us
      ro.last_call = ro.timeout;     // the survivors' last call decides
      previous = elastic::MembersOf(store, launch.job_id, generation - 1, ro.timeout);
      const elastic::Membership m = elastic::JoinRound(store, ro, generation, previous);
      if (m.rank < 0) continue;
      elastic::SpareJoined(store, launch.job_id);
      std::fprintf(stderr, "cann-dist-train: spare worker %d joins generation %lld as rank %d of %d\n",
                   id.rank, static_cast<long long>(generation), m.rank, m.world);
      previous = m.workers;
      break;
    }
  }
  for (bool joined = env.spare;; ++generation, joined = false) {
    // The first round waits for every worker to start; later ones only for the living.
    const train::TrainResult& so_far = session.result;
    const double step_s = so_far.steps > 0 ? so_far.wall_s / static_cast<double>(so_far.steps) : 0;
    ro.last_call = generation == 0 ? ro.timeout
                                   : std::chrono::milliseconds(static_cast<int64_t>(
                                         1000 * std::max(elastic.last_call_s, 3 * step_s)));
    const elastic::Membership m =
        joined ? elastic::Membership{generation, static_cast<int>(std::find(previous.begin(), previous.end(), id.rank) - previous.begin()),
                                     static_cast<int>(previous.size()), previous}
               : elastic::JoinRound(store, ro, generation, previous);
    if (m.rank < 0)
      throw Error(ErrorCode::kAborted, "worker " + std::to_string(id.rank) + " was left out of generation " +
                                           std::to_string(generation) + " (the group is full)");
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
    CommunicatorOptions co = base;
    co.rank = m.rank;
    co.size = m.world;
    co.generation = static_cast<uint64_t>(generation);
    if (m.rank != 0) co.log = nullptr;
    try {
      ConnectChannels(co, options.train.overlap_next_forward, &s);
      train::TrainResult r = train::RunTraining(*s.comm, options.train, s.priority_comm.get(), &session);
      r.generation = generation;
      const int code = ReportTrainResult(r, options, m.rank);
      if (m.rank == 0) {
        try {
          elastic::ReportFinished(store, launch.job_id, generation);
        } catch (const Error& e) {
          // The store went with node 0's agent: the training is done and reported all the same.
          std::fprintf(stderr, "cann-dist-train: worker %d: cannot tell the agents the job finished (%s); "
                               "they will stop what is left when they notice\n", id.rank, e.what());
        }
      }
      return code;
    } catch (const Error& e) {
      if (!Recoverable(e)) throw;
      if (s.comm) s.comm->Abort();
      if (s.priority_comm) s.priority_comm->Abort();
      const double now = UnixNow();
      if (!session.pending.active) {
        session.pending = {};
        session.pending.active = true;
        session.pending.cause = e.what();
        session.pending.failure_unix = now;
        session.pending.detected_unix = now;
        session.pending.failed_step = session.current_step;
        session.pending.world_before = m.world;
      }
      std::fprintf(stderr, "\ncann-dist-train: worker %d (rank %d of generation %lld): group broken at "
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
