// The elastic driver (docs/elastic.md): the generation loop of one elastic worker, over a small
// state interface that the training implements (Horovod's `hvd.elastic.run` over its `State`,
// torchft's Manager). Each worker keeps its process and memory across failures: when its group
// breaks it joins the next rendezvous round (elastic/rendezvous.h), gets the next generation's
// channels, and trains on from the group's committed state.
//
//   for each generation:
//     join the round (or, as a spare or a late worker, wait for one and join it)
//     channels = connect(membership)
//     state.Restore(failure)          after a failure: roll back to the last commit, record it
//     state.Train(generation)         sync (newest commit every member holds, from rank 0), then
//                                     train, committing after every step
//     a recoverable failure (peer lost, timeout, regroup): abort the channels, go round again
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "cdt/store.h"
#include "elastic/fault_injector.h"
#include "elastic/rendezvous.h"

namespace cdt::elastic {

// A failure the group re-formed after, as a survivor saw it.
struct Failure {
  std::string cause;         // the first error, as this worker saw it
  std::vector<int> lost;     // worker ids missing from the new group
  double failure_unix = 0;   // the fault itself where one was injected and reported, else detection
  double detected_unix = 0;  // this worker's collective failed
  int64_t failed_step = 0;   // the step this worker was running
  int world_before = 0;
};

// One generation's group, as the state trains in it.
struct Generation {
  Membership membership;
  Communicator* comm = nullptr;
  Communicator* priority = nullptr;  // may be null
  // Call at the start of every step: fault injection, and on rank 0 a look at the store for
  // workers waiting to join. True: end the generation after this step (commit it, then throw
  // cdt::Error(kAborted, "regroup ...")) and re-form with them.
  std::function<bool(int64_t step)> before_step;
};

// What the driver asks of the training it drives.
class ElasticState {
 public:
  virtual ~ElasticState() = default;
  // Loads what training needs before waiting as a spare (hot spares wait loaded).
  virtual void Prepare() = 0;
  // Sync, then train in `g` until the job is done; commits the state after every step (in
  // memory). Returns the exit code. A failure throws cdt::Error; the driver re-forms the group on
  // kPeerLost, kTimeout and kAborted, and ends the job on anything else.
  virtual int Train(const Generation& g) = 0;
  // After a failure, before the next Train: roll back to the newest commit (what every survivor
  // holds); `f` is recorded as a recovery when the new group completes its first step (a failure
  // before that keeps the first one's record).
  virtual void Restore(const Failure& f) = 0;
  // A newcomer's state is older than the group's: drop it, to receive the group's at the next
  // Train.
  virtual void Forget() = 0;
  // The last commit on disk (a group paused below --min-workers keeps it there too); the file, or
  // "" without a commit or a directory.
  virtual std::string Checkpoint() = 0;
  virtual int64_t current_step() const = 0;  // the step being run
  virtual double mean_step_s() const = 0;    // over the run so far; 0 before the first step
};

struct DriverOptions {
  RendezvousOptions rendezvous;  // job_id, worker_id, min_workers, target_world, timeouts
  int world_size = 1;            // the first generation's (every worker launched at the start)
  // Close a re-forming round without missing (hung) workers this long after arriving; at least
  // three mean step times.
  double last_call_s = 0.5;
  double pause_timeout_s = 3600;  // below min_workers: how long to wait for workers
  // This worker is a spare, or a node past MIN of --nnodes MIN:MAX that asks to join.
  bool spare = false, joiner = false;
  FaultTarget where;           // for fault injection
  std::vector<Fault> faults;   // scripted (--inject)
  FaultActions fault_actions;  // what faults do (the CLI: signals, ip link, sleep)
  Log log;                     // what happens to the worker (info)
  // Re-forming is bounded: a group whose generations end, one after another, without a step
  // beyond the furthest reached (a peer alive enough to rejoin but not to train: a hung device,
  // a data link cut while the store answers) backs off — 0.5 s, 1 s, 2 s ... before each
  // rejoin from the second — and after this many such generations ends the job with
  // cdt::Error(kTimeout) naming the peer the failures named and the progress measured.
  int max_fruitless_regroups = 3;
};

// What a worker started by an elastic agent knows about itself (the launcher's environment, read
// by the CLI or by cann_dist.elastic), for WorkerDriverOptions.
struct WorkerLaunch {
  std::string job_id = "cdt";
  int worker_id = 0;  // its rank at launch: stable across generations
  int node_rank = 0, local_rank = 0;
  int world_size = 1;    // the first generation's
  int target_world = 0;  // what spares and joiners bring the group back to (0 = world_size)
  int min_workers = 1;
  bool spare = false, joiner = false;
  double timeout_s = 30;  // collectives and the store; the first rendezvous waits at least 60 s
  double last_call_s = 0.5, pause_timeout_s = 3600;
  std::string inject;  // scripted faults (elastic/fault_spec.h)
};

// The driver's options for such a worker: rendezvous timeouts from timeout_s, the faults parsed
// (cdt::Error(kInvalidArgument) for a bad spec), the real fault actions reporting to `store`
// (which must outlive the options), `log` for its lines.
DriverOptions WorkerDriverOptions(const WorkerLaunch& w, Store& store, const Log& log);

// The generation's channels: the bulk communicator and, optionally, the priority one.
struct Channels {
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Communicator> priority;
};
using Connect = std::function<Channels(const Membership& m)>;

// Runs this worker until the job finishes (returns Train's exit code, or 0 when a spare was never
// needed); throws cdt::Error for failures the group cannot survive.
int RunElastic(Store& store, const DriverOptions& options, ElasticState& state,
               const Connect& connect);

}  // namespace cdt::elastic
