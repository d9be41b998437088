// Elastic rendezvous: how the workers of a job agree on who is in each generation of the group.
//
// A communicator never changes membership (cdt/communicator.h); after a failure the survivors
// build generation g + 1. Rendezvous round g, under "<job>/elastic/g<g>/" in the job's store:
//   * each worker takes an arrival number on its shard s = worker id mod S (Add on
//     "arrivals/<s>") and writes its worker id under "arrival/<s>/<n>"; S = ArrivalShards(the
//     previous generation's size), one counter per 32 workers of it, so that a counter has few
//     writers at once (etcd adds by compare-and-swap: 1,024 writers of one key never all got
//     through, docs/benchmarks.md; a group growing past its previous size puts more on each);
//   * the round closes — the first CompareSet on "closed" wins and fixes the arrival count of
//     every shard ("c0,c1,..") — as soon as every member of the previous generation has either
//     arrived or been reported gone (ReportGone, by its agent, under
//     "<job>/elastic/gone/<worker>"), or when `last_call` has passed since this worker arrived (a
//     hung worker neither arrives nor is reported), with at least `min_workers` there;
//   * members are the arrivals the closing counts cover, ranked by their rank in the previous
//     generation, then by worker id (so rank 0 stays rank 0 while it lives, and new workers come
//     last).
// A worker arriving after its round closed is not a member (kAborted, "arrived late").
//
// The first worker to open the round (CompareSet on "open" after taking its number) coordinates:
// it alone reads the arrivals and the reports of the dead, closes the round and writes its members
// under "members"; everyone else waits for that key, parked in the store, so a round of N costs
// O(N) store requests, not N² (docs/benchmarks.md, "Rendezvous at 1,024 members"). The
// coordinator writes a heartbeat ("coordinator": "<worker id>.<nonce>:<count>", then
// " paused <present>" once the round paused, so that every present worker's on_pause runs), which
// the others look at once every `coordinator_silence` (each look costs store requests; 1,024
// members looking every 0.5 s were more than etcd could serve). If it did not change between two
// looks, the first member to win CompareSet of "coordinator" from that value to its own first
// beat takes over as coordinator (one successor, not everyone: 512 members closing the round
// themselves cost 266,871 requests; a successor that dies is succeeded in turn); a worker whose
// own deadline passes runs the closing loop itself. "members" is written by CompareSet: the first
// list stands, and every closer adopts it.
//
// Hot spares: workers started beside the job (`--spares`), loaded and waiting (WaitAsSpare). When
// a round opens they arrive too; with `target_world` set, the round also waits until enough
// spares arrived to bring the group back to that size (as many as are waiting), and members are
// the previous generation's, then spares by worker id, up to `target_world`. A spare not chosen
// gets rank -1 and goes on waiting.
// Unlike torchrun's rendezvous there is no fixed 30 s last call on the failure path: the agents'
// reports of dead workers close the round as soon as everyone is accounted for.
//
// Framework-free (a Store only); the trainer's elastic loop and the agents use it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cdt/store.h"

namespace cdt::elastic {

struct RendezvousOptions {
  std::string job_id = "cdt";
  int worker_id = 0;  // stable across generations (the rank a worker started with)
  int min_workers = 1;
  int target_world = 0;  // >0: bring the group back to this size with waiting spares
  // After arriving, close without the missing once this long has passed (hung workers).
  std::chrono::milliseconds last_call{1000};
  // Give up (kTimeout naming who is missing) when the round has not closed after this long.
  std::chrono::milliseconds timeout{60000};
  // Below min_workers with everyone accounted for (or after the last call), the round pauses:
  // on_pause(the workers present) is called once and the wait lasts pause_timeout instead (when
  // > 0), for workers to come back or join.
  std::chrono::milliseconds pause_timeout{0};
  std::function<void(const std::vector<int>& present)> on_pause;
  // A newcomer waiting for a round (WaitForRound) gives up once every member of the running
  // generation has been reported gone for this long: nobody is left to open a round, nor holds the
  // training state to hand over.
  std::chrono::milliseconds abandon_after{30000};
  // The round's coordinator writes a heartbeat; when it stops for this long (the coordinator died
  // or hangs), one of the others takes over. Also how often a waiting member looks at it.
  std::chrono::milliseconds coordinator_silence{5000};
};

// Arrival counters of a round whose previous generation had `expected` workers: one per
// kMembersPerShard, at most kMaxArrivalShards, at least 1.
constexpr size_t kMembersPerShard = 32;
constexpr size_t kMaxArrivalShards = 64;
int ArrivalShards(size_t expected);

struct Membership {
  int64_t generation = 0;
  int rank = 0;
  int world = 0;
  std::vector<int> workers;  // worker ids, by rank
};

// Joins round `generation`; `previous` are the worker ids of the generation before (ordered by
// rank; for the first round every worker expected). Blocks until the round closes.
Membership JoinRound(Store& store, const RendezvousOptions& options, int64_t generation,
                     const std::vector<int>& previous);

// A spare announces itself once (AnnounceSpare), then WaitForRound returns the first round >=
// `from` that opens (a generation after a failure), or -1 when the job finished first. It joins
// that round with JoinRound, `previous` = MembersOf(generation - 1); chosen as a member, it
// calls SpareJoined. WaitForRound throws cdt::Error(kPeerLost) naming them when every member of
// the running generation has been reported gone for `abandon_after`.
void AnnounceSpare(Store& store, const std::string& job_id, int worker_id);
int64_t WaitForRound(Store& store, const RendezvousOptions& options, int64_t from);
void SpareJoined(Store& store, const std::string& job_id, int worker_id);
// Scale-up: a worker outside the group (it arrived late: it was hung, or its link was down)
// announces itself like a spare and asks the group to regroup (+1; -1 once it is a member). The
// group's rank 0 polls RegroupRequests at step boundaries; the group then ends its generation
// after the step and re-forms with the newcomers, up to target_world.
void RequestRegroup(Store& store, const std::string& job_id, int64_t delta);
int64_t RegroupRequests(Store& store, const std::string& job_id);

// `fault-inject`: fault specs (cli/elastic_train.h's format) queued for a running job; every
// worker reads the queue every few steps, from its position `*seen` (advanced).
void QueueFault(Store& store, const std::string& job_id, const std::string& spec);

// A dashboard watching the job (docs/dashboard.md) says so every poll (NoteWatcher: the time) and
// when it holds rank 0's final document (NoteFinalSeen). The agent hosting the store calls
// LingerForWatcher before taking it down: with a watcher heard from in the last 10 s it waits up
// to `limit` for that note, so the job's last numbers reach the page; without one, not at all.
void NoteWatcher(Store& store, const std::string& job_id, double unix_now);
void NoteFinalSeen(Store& store, const std::string& job_id);
void LingerForWatcher(Store& store, const std::string& job_id, double unix_now,
                      std::chrono::milliseconds limit);
std::vector<std::string> QueuedFaults(Store& store, const std::string& job_id, int64_t* seen);

// The members (worker ids by rank) of a closed round, written by whoever closed it.
std::vector<int> MembersOf(Store& store, const std::string& job_id, int64_t generation,
                           std::chrono::milliseconds timeout);

// Agents: worker `worker_id` is gone (exited, killed); `how` says how, for the logs.
void ReportGone(Store& store, const std::string& job_id, int worker_id, const std::string& how);
bool IsGone(Store& store, const std::string& job_id, int worker_id);

// The job's last generation finished training: agents stop what is left (excluded, hung workers).
void ReportFinished(Store& store, const std::string& job_id, int64_t generation);
bool IsFinished(Store& store, const std::string& job_id);
// The generation that finished the job (its members: MembersOf), -1 while none has.
int64_t FinishedGeneration(Store& store, const std::string& job_id);

// Fault bookkeeping: when a fault was injected (seconds since the epoch, system clock), so that
// survivors can time detection and recovery from the fault itself.
void ReportFault(Store& store, const std::string& job_id, int worker_id, const std::string& cause,
                 double unix_time);
// (cause, unix_time) of the fault injected into `worker_id`; unix_time < 0 if none was reported.
std::pair<std::string, double> FaultOf(Store& store, const std::string& job_id, int worker_id);

}  // namespace cdt::elastic
