#include "elastic/driver.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <thread>
#include <utility>

#include "cdt/error.h"
#include "common/unix_time.h"
#include "elastic/fault_spec.h"

namespace cdt::elastic {

namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Failures the group survives by re-forming; anything else (bad options, divergence, a dead
// store) ends the job as it would without elasticity.
bool Recoverable(const Error& e) {
  return e.code() == ErrorCode::kPeerLost || e.code() == ErrorCode::kTimeout ||
         e.code() == ErrorCode::kAborted;
}

class Driver {
 public:
  Driver(Store& store, const DriverOptions& o, ElasticState& state, const Connect& connect);
  int Run();

 private:
  // The step hook: faults, and on rank 0 whether workers wait to join.
  bool BeforeStep(int64_t step);
  void PollStore();
  // Members join the round; a store out of reach (this node's link is down) is retried until the
  // rendezvous timeout; arriving after the round closed makes this worker a newcomer.
  std::optional<Membership> JoinAsMember(int64_t generation);
  // Newcomers — spares, and workers that arrived after their round closed (hung, or cut off and
  // back) — wait for a round that opens from `from` on and join it; nullopt: the job finished.
  std::optional<Membership> JoinAsNewcomer(int64_t from, bool ask_regroup);
  // The membership is known: who the failure being recovered from took away.
  void CountLost(const Membership& m);
  // After a recoverable failure of generation `m` that started at `since`: bounds re-forming
  // (DriverOptions::max_fruitless_regroups), sleeping the back-off or throwing.
  void BoundRegroups(const Membership& m, const Error& e, Clock::time_point since);
  // Train in `m`; the exit code, or nullopt after a recoverable failure.
  std::optional<int> TrainIn(const Membership& m);
  void Note(const std::string& line) const { o_.log.Write(LogLevel::kInfo, line); }

  Store& store_;
  const DriverOptions& o_;
  ElasticState& state_;
  const Connect& connect_;
  const std::string& job_;
  RendezvousOptions ro_;
  FaultInjector injector_;
  std::vector<int> previous_;  // the last generation's worker ids, by rank
  std::optional<Failure> failure_;
  int rank_ = 0, world_ = 0;
  bool regroup_requested_ = false;
  int64_t faults_seen_ = 0;  // of the queue `fault-inject` fills
  Clock::time_point store_quiet_until_ = Clock::now();
  bool store_warned_ = false;
  // Generations in a row that failed without a step past furthest_step_, how long they took, and
  // the worker ids their errors named.
  int64_t furthest_step_ = -1;
  int fruitless_ = 0;
  double fruitless_s_ = 0;
  std::map<int, int> named_;
};

Driver::Driver(Store& store, const DriverOptions& o, ElasticState& state, const Connect& connect)
    : store_(store),
      o_(o),
      state_(state),
      connect_(connect),
      job_(o.rendezvous.job_id),
      ro_(o.rendezvous),
      injector_(o.faults, o.where, o.fault_actions),
      previous_(static_cast<size_t>(o.world_size)),
      world_(o.world_size) {
  std::iota(previous_.begin(), previous_.end(), 0);
  ro_.pause_timeout = Ms(o.pause_timeout_s);
  ro_.on_pause = [this](const std::vector<int>& present) {
    const int me = ro_.worker_id;
    const bool writer = !present.empty() && me == *std::min_element(present.begin(), present.end());
    std::string file;
    if (writer) {
      try {
        file = state_.Checkpoint();
      } catch (const std::exception& e) {
        Note("cann-dist-train: worker " + std::to_string(me) +
             ": paused, but the checkpoint failed: " + e.what());
      }
    }
    char line[256];
    std::snprintf(line, sizeof line,
                  "cann-dist-train: worker %d: paused: %zu worker(s) present, --min-workers %d; "
                  "waiting up to %.0f s for more",
                  me, present.size(), ro_.min_workers, o_.pause_timeout_s);
    Note(line + (file.empty() ? "" : "; state checkpointed to " + file));
  };
}

bool Driver::BeforeStep(int64_t step) {
  if (injector_.Slow(step, Clock::now())) return regroup_requested_;
  // Every tenth step: faults queued by `fault-inject`, and on rank 0 whether workers wait to
  // (re)join. Training does not need the store: while it is out of reach (its host died, a link
  // is down), say so once and look again every 30 s instead of every tenth step.
  if (step % 10 == 0 && Clock::now() >= store_quiet_until_) PollStore();
  injector_.Fire(step);
  return regroup_requested_;
}

void Driver::PollStore() {
  const int me = ro_.worker_id;
  std::vector<std::string> specs;
  try {
    specs = QueuedFaults(store_, job_, &faults_seen_);
    if (rank_ == 0 && world_ < ro_.target_world)
      regroup_requested_ = RegroupRequests(store_, job_) > 0;
  } catch (const Error& e) {
    if (!store_warned_)
      Note("\ncann-dist-train: worker " + std::to_string(me) + ": the store is out of reach (" +
           e.what() + "); training on, looking again every 30 s");
    store_warned_ = true;
    store_quiet_until_ = Clock::now() + std::chrono::seconds(30);
  }
  for (const std::string& spec : specs) try {
      injector_.Add(spec);
    } catch (const Error& e) {
      Note("cann-dist-train: worker " + std::to_string(me) +
           ": a queued fault was not understood: " + e.what());
    }
}

std::optional<Membership> Driver::JoinAsNewcomer(int64_t from, bool ask_regroup) {
  AnnounceSpare(store_, job_, ro_.worker_id);
  if (ask_regroup) RequestRegroup(store_, job_, 1);
  for (int64_t g = from;; ++g) {
    g = WaitForRound(store_, ro_, g);
    if (g < 0) return std::nullopt;
    ro_.last_call = ro_.timeout;  // the members' last call decides
    const Membership m = JoinRound(store_, ro_, g, MembersOf(store_, job_, g - 1, ro_.timeout));
    if (m.rank < 0) continue;
    SpareJoined(store_, job_, ro_.worker_id);
    // What this worker held is older than the group's: it receives the group's state.
    state_.Forget();
    failure_.reset();
    if (ask_regroup) RequestRegroup(store_, job_, -1);
    Note(std::string("cann-dist-train: ") + (ask_regroup ? "joining" : "spare") + " worker " +
         std::to_string(ro_.worker_id) + " joins generation " + std::to_string(g) + " as rank " +
         std::to_string(m.rank) + " of " + std::to_string(m.world));
    return m;
  }
}

std::optional<Membership> Driver::JoinAsMember(int64_t g) {
  const auto deadline = Clock::now() + ro_.timeout;
  for (bool said = false;;) {
    try {
      const Membership m = JoinRound(store_, ro_, g, previous_);
      if (m.rank >= 0) return m;
      break;
    } catch (const Error& e) {
      const bool unreachable = e.code() == ErrorCode::kStore || e.code() == ErrorCode::kTimeout;
      if (!unreachable && e.code() != ErrorCode::kAborted) throw;
      if (!unreachable) break;
      if (Clock::now() >= deadline) throw;
      if (!said)
        Note("cann-dist-train: worker " + std::to_string(ro_.worker_id) +
             ": the store is out of reach (" + e.what() + "); retrying");
      said = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  Note("cann-dist-train: worker " + std::to_string(ro_.worker_id) + ": generation " +
       std::to_string(g) + " formed without it; asking to rejoin");
  return JoinAsNewcomer(g + 1, true);
}

void Driver::CountLost(const Membership& m) {
  if (!failure_ || !failure_->lost.empty()) return;
  for (int w : previous_)
    if (std::find(m.workers.begin(), m.workers.end(), w) == m.workers.end()) {  // lost
      failure_->lost.push_back(w);
      // Timed from the fault itself where one was injected (and reported), else from detection.
      const double at = FaultOf(store_, job_, w).second;
      if (at > 0) failure_->failure_unix = std::min(failure_->failure_unix, at);
    }
}

void Driver::BoundRegroups(const Membership& m, const Error& e, Clock::time_point since) {
  const int64_t reached = state_.current_step();
  if (reached > furthest_step_) {  // progress since the last failure: start counting afresh
    furthest_step_ = reached;
    fruitless_ = 0;
    fruitless_s_ = 0;
    named_.clear();
    return;
  }
  ++fruitless_;
  fruitless_s_ += std::chrono::duration<double>(Clock::now() - since).count();
  const int peer = e.context().peer_rank;
  if (peer >= 0 && peer < static_cast<int>(m.workers.size()))
    ++named_[m.workers[static_cast<size_t>(peer)]];
  if (fruitless_ >= o_.max_fruitless_regroups) {
    std::string named;
    for (const auto& [worker, times] : named_)
      named += (named.empty() ? "" : ", ") + ("worker " + std::to_string(worker)) + " (" +
               std::to_string(times) + (times == 1 ? " time)" : " times)");
    char rate[160];
    std::snprintf(rate, sizeof rate, "no step past step %lld in %.1f s over %d generations",
                  static_cast<long long>(furthest_step_), fruitless_s_, fruitless_);
    throw Error(ErrorCode::kTimeout,
                "worker " + std::to_string(ro_.worker_id) + ": the group re-formed " +
                    std::to_string(fruitless_) +
                    " times in a row without completing a step: " + rate + "; " +
                    (named.empty() ? "no failure named a peer" : "the failures named " + named) +
                    ". The last: " + e.what() +
                    ". A peer that rejoins but cannot train (a hung device, a data link cut while "
                    "the store answers, slower than --timeout) holds the job back: stop or fix it, "
                    "or raise --timeout",
                {m.rank, peer, e.context().peer_address, e.context().operation, e.context().seq});
  }
  if (fruitless_ >= 2) {
    const double wait_s =
        std::min(8.0, 0.5 * static_cast<double>(1 << std::min(fruitless_ - 2, 4)));
    Note("cann-dist-train: worker " + std::to_string(ro_.worker_id) + ": " +
         std::to_string(fruitless_) + " generations in a row ended without a step; waiting " +
         std::to_string(wait_s).substr(0, 3) + " s before re-forming");
    std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  }
}

std::optional<int> Driver::TrainIn(const Membership& m) {
  const auto since = Clock::now();
  Channels ch;
  try {
    ch = connect_(m);
    if (failure_) state_.Restore(*failure_);  // the state keeps it until its recovery is recorded
    failure_.reset();
    Generation g{m, ch.comm.get(), ch.priority.get(),
                 [this](int64_t step) { return BeforeStep(step); }};
    const int code = state_.Train(g);
    if (m.rank == 0) {
      try {
        ReportFinished(store_, job_, m.generation);
      } catch (const Error& e) {
        // The store went with node 0's agent: the training is done and reported all the same.
        Note("cann-dist-train: worker " + std::to_string(ro_.worker_id) +
             ": cannot tell the agents the job finished (" + e.what() +
             "); they will stop what is left when they notice");
      }
    }
    return code;
  } catch (const Error& e) {
    if (!Recoverable(e)) throw;
    if (ch.comm) ch.comm->Abort();
    if (ch.priority) ch.priority->Abort();
    const double now = UnixSeconds();
    if (!failure_) {
      failure_ = Failure{};
      failure_->cause = e.what();
      failure_->failure_unix = failure_->detected_unix = now;
      failure_->failed_step = state_.current_step();
      failure_->world_before = m.world;
    }
    Note("\ncann-dist-train: worker " + std::to_string(ro_.worker_id) + " (rank " +
         std::to_string(m.rank) + " of generation " + std::to_string(m.generation) +
         "): group broken at step " + std::to_string(state_.current_step()) + ": " + e.what() +
         "; re-forming");
    BoundRegroups(m, e, since);
    return std::nullopt;
  }
}

int Driver::Run() {
  std::optional<Membership> first;
  if (o_.spare || o_.joiner) {
    // Loaded and waiting: a spare joins the first round after a failure that needs it; a node
    // past MIN asks the running group to take it in.
    state_.Prepare();
    first = JoinAsNewcomer(1, o_.joiner);
    if (!first) return 0;  // the job finished without needing us
  }
  for (int64_t generation = 0;; ++generation) {
    // The first round waits for every worker to start; later ones only for the living.
    ro_.last_call =
        generation == 0 ? ro_.timeout : Ms(std::max(o_.last_call_s, 3 * state_.mean_step_s()));
    std::optional<Membership> joined = first ? first : JoinAsMember(generation);
    first.reset();
    if (!joined) return 0;  // came back after the job finished
    const Membership m = *joined;
    generation = m.generation;
    CountLost(m);
    previous_ = m.workers;
    rank_ = m.rank;
    world_ = m.world;
    regroup_requested_ = false;
    if (std::optional<int> code = TrainIn(m)) return *code;
  }
}

}  // namespace

DriverOptions WorkerDriverOptions(const WorkerLaunch& w, Store& store, const Log& log) {
  const auto ms = [](double s) {
    return std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  };
  DriverOptions d;
  d.rendezvous.job_id = w.job_id;
  d.rendezvous.worker_id = w.worker_id;
  d.rendezvous.min_workers = w.min_workers;
  d.rendezvous.target_world = std::max(w.target_world, w.world_size);
  d.rendezvous.timeout = ms(std::max(60.0, w.timeout_s));
  d.rendezvous.abandon_after = ms(w.timeout_s);
  d.world_size = w.world_size;
  d.last_call_s = w.last_call_s;
  d.pause_timeout_s = w.pause_timeout_s;
  d.spare = w.spare;
  d.joiner = w.joiner;
  d.where = {w.worker_id, w.node_rank, w.local_rank};
  d.faults = ParseFaults(w.inject);
  d.log = log;
  d.fault_actions =
      SystemFaultActions(log, [&store, job = w.job_id](int worker, const std::string& kind) {
        ReportFault(store, job, worker, kind, UnixSeconds());
      });
  return d;
}

int RunElastic(Store& store, const DriverOptions& options, ElasticState& state,
               const Connect& connect) {
  return Driver(store, options, state, connect).Run();
}

}  // namespace cdt::elastic
