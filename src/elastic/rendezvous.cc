#include "elastic/rendezvous.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "cdt/error.h"
#include "common/printable.h"

namespace cdt::elastic {
namespace {

using Clock = std::chrono::steady_clock;

std::string Round(const std::string& job, int64_t g) {
  return job + "/elastic/g" + std::to_string(g) + "/";
}
std::string GoneKey(const std::string& job, int w) {
  return job + "/elastic/gone/" + std::to_string(w);
}
std::string FaultKey(const std::string& job, int w) {
  return job + "/elastic/fault/" + std::to_string(w);
}
// Spares count themselves on kSpareShards counters (by worker id), so that 256 spares starting
// at once do not all contend for one key (etcd can only add by compare-and-swap).
constexpr int kSpareShards = 16;
std::string SparesKey(const std::string& job, int shard) {
  return job + "/elastic/spares_waiting/" + std::to_string(shard);
}

int SparesWaiting(Store& store, const std::string& job) {
  int64_t n = 0;
  for (int s = 0; s < kSpareShards; ++s) n += store.Add(SparesKey(job, s), 0);
  return static_cast<int>(n);
}

int ParseInt(const std::string& s, const std::string& key) {
  try {
    return std::stoi(s);
  } catch (...) {
    throw Error(ErrorCode::kProtocol, "elastic rendezvous: store key '" + key + "' holds '" +
                                          Printable(s) +
                                          "', not a number (another job with the same --job-id?)");
  }
}

// "3,1,7": worker ids as the members key holds them.
std::vector<int> ParseList(const std::string& csv, const std::string& key) {
  std::vector<int> out;
  size_t start = 0;
  while (start < csv.size()) {
    size_t end = csv.find(',', start);
    if (end == std::string::npos) end = csv.size();
    out.push_back(ParseInt(csv.substr(start, end - start), key));
    start = end + 1;
  }
  return out;
}

// "3,1,7" (what ParseList reads), or "3, 1, 7" for a message with `separator` ", ".
std::string Csv(const std::vector<int>& values, const char* separator = ",") {
  std::string csv;
  for (int v : values) csv += (csv.empty() ? "" : separator) + std::to_string(v);
  return csv;
}

int Sum(const std::vector<int>& values) { return std::accumulate(values.begin(), values.end(), 0); }

}  // namespace

int ArrivalShards(size_t expected) {
  return static_cast<int>(std::clamp<size_t>((expected + kMembersPerShard - 1) / kMembersPerShard,
                                             1, kMaxArrivalShards));
}

namespace {

// One round as a member sees it while it waits for the round to close.
class RoundWatch {
 public:
  RoundWatch(Store& store, const RendezvousOptions& o, int64_t generation,
             const std::vector<int>& previous, Clock::time_point arrived_at)
      : store_(store),
        o_(o),
        generation_(generation),
        round_(Round(o.job_id, generation)),
        previous_(previous),
        arrived_at_(arrived_at),
        arrivals_(static_cast<size_t>(ArrivalShards(previous.size()))) {}

  int shards() const { return static_cast<int>(arrivals_.size()); }
  std::string CounterKey(int shard) const { return round_ + "arrivals/" + std::to_string(shard); }
  std::string ArrivalKey(int shard, int n) const {
    return round_ + "arrival/" + std::to_string(shard) + "/" + std::to_string(n);
  }

  // The closing loop: returns the round's arrival counts by shard once it closed (this member's
  // CompareSet or another's). The coordinator beats its heartbeat while it runs.
  std::vector<int> Close(bool coordinator) {
    coordinator_ = coordinator;
    std::string closed;
    for (auto pause = std::chrono::microseconds(200);;
         pause = std::min(pause * 2, std::chrono::microseconds(5000))) {
      Beat();
      if (store_.Check(round_ + "closed")) {
        closed = store_.Get(round_ + "closed", o_.timeout);
        break;
      }
      const std::vector<int> counts = Counts();
      const int count = Sum(counts);
      ReadArrivals(counts);
      int alive = 0;  // members of the previous generation that arrived
      for (int w : previous_) alive += arrived_.count(w) != 0 ? 1 : 0;
      const bool missing = !Missing(/*all=*/false).empty();
      // Spares to wait for: enough to restore target_world, as many as are waiting.
      bool spares_here = true;
      if (o_.target_world > 0 && alive < o_.target_world) {
        const int waiting = SparesWaiting(store_, o_.job_id);
        spares_here = count - alive >= std::min(o_.target_world - alive, waiting);
      }
      const bool last_call = Clock::now() - arrived_at_ >= o_.last_call;
      if (count >= o_.min_workers && ((!missing && spares_here) || last_call)) {
        closed = store_.CompareSet(round_ + "closed", "", Csv(counts));
        break;
      }
      if (count < o_.min_workers && (!missing || last_call) && !paused_) {
        std::vector<int> present;
        for (const auto& shard : arrivals_)
          for (int w : shard)
            if (w >= 0) present.push_back(w);
        Pause(present);
        Beat(/*now=*/true);
      }
      if (Clock::now() - arrived_at_ >= Limit()) ThrowTimeout(count);
      std::this_thread::sleep_for(pause);
    }
    return ClosedCounts(closed);
  }

  // The arrival counts by shard that "closed" holds.
  std::vector<int> ClosedCounts(const std::string& closed) const {
    std::vector<int> counts = ParseList(closed, round_ + "closed");
    if (static_cast<int>(counts.size()) != shards())
      throw Error(ErrorCode::kProtocol,
                  "elastic rendezvous: store key '" + round_ + "closed' holds " +
                      std::to_string(counts.size()) + " arrival count(s), but this worker (" +
                      std::to_string(o_.worker_id) + ") expects " + std::to_string(shards()) +
                      ": workers of different versions, or another job with the same --job-id?");
    return counts;
  }

  // Everyone but the coordinator: waits (parked in the store, no polling) for the members list
  // the closer writes, and returns it. Returns false when this member must run the closing loop
  // itself: the coordinator's heartbeat stopped for `coordinator_silence` (it died or hangs) and
  // this member won the succession — a CompareSet of the heartbeat from the silent value to its
  // own first beat, so that winning is beating, and a successor that dies at once is succeeded
  // in turn (then took_over(): it coordinates; the others go on waiting, the successor's silence
  // timed afresh — were all of them to close the round, each would read every arrival: 512
  // members cost 266,871 requests) — or this member's own deadline passed (the loop then says
  // who is missing). A pause the coordinator announces is this member's pause too (on_pause runs
  // here).
  bool AwaitMembers(std::string* csv) {
    std::string beat;
    auto beat_seen = Clock::now();
    for (;;) {
      try {
        // Parked for a whole coordinator_silence before the heartbeat is looked at: each look
        // costs requests, and 1,024 members looking every 0.5 s were more than etcd could serve.
        store_.Wait({round_ + "members"}, std::clamp(LeftOf(Limit()), std::chrono::milliseconds(1),
                                                     std::max(o_.coordinator_silence, kSlice)));
        *csv = store_.Get(round_ + "members", o_.timeout);
        return true;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kTimeout) throw;
      }
      const auto now = Clock::now();
      if (store_.Check(round_ + "coordinator")) {
        const std::string b = store_.Get(round_ + "coordinator", o_.timeout);
        if (b != beat) beat_seen = now;
        beat = b;
        const auto at = beat.find(" paused ");
        if (at != std::string::npos && !paused_) Pause(ParseList(beat.substr(at + 8), round_));
      }
      if (now - beat_seen >= o_.coordinator_silence) {
        const std::string mine = NextBeat();
        if (store_.CompareSet(round_ + "coordinator", beat, mine) == mine) {
          took_over_ = true;
          next_beat_ = Clock::now() + kSlice;
          return false;
        }
        beat_seen = now;
      }
      if (now - arrived_at_ >= Limit()) return false;
    }
  }

  bool took_over() const { return took_over_; }

  // The members (worker ids by rank) of the round closed with `counts` arrivals by shard: the
  // previous generation's in their order, then newcomers by id (up to target_world).
  std::vector<int> Members(const std::vector<int>& counts) {
    ReadArrivals(counts);
    std::vector<int> ids;
    for (size_t s = 0; s < arrivals_.size(); ++s)
      for (int i = 0; i < counts[s]; ++i)
        if (arrivals_[s][static_cast<size_t>(i)] >= 0)
          ids.push_back(arrivals_[s][static_cast<size_t>(i)]);
    std::unordered_map<int, int> previous_rank;
    for (size_t r = 0; r < previous_.size(); ++r)
      previous_rank.emplace(previous_[r], static_cast<int>(r));
    auto order = [&](int w) {
      auto it = previous_rank.find(w);
      return it == previous_rank.end() ? std::make_pair(1, w) : std::make_pair(0, it->second);
    };
    std::sort(ids.begin(), ids.end(), [&](int a, int b) { return order(a) < order(b); });
    if (o_.target_world > 0) {
      // Previous members always stay; spares only up to the target.
      size_t keep = 0;
      while (keep < ids.size() &&
             (order(ids[keep]).first == 0 || keep < static_cast<size_t>(o_.target_world)))
        ++keep;
      ids.resize(keep);
    }
    return ids;
  }

  const std::string& round() const { return round_; }

 private:
  static constexpr auto kSlice = std::chrono::milliseconds(500);

  std::vector<int> Counts() {
    std::vector<int> counts;
    for (int s = 0; s < shards(); ++s)
      counts.push_back(static_cast<int>(store_.Add(CounterKey(s), 0)));
    return counts;
  }

  // Reads the worker ids of arrival numbers up to `counts` (by shard), as they appear.
  void ReadArrivals(const std::vector<int>& counts) {
    for (int s = 0; s < shards(); ++s) {
      std::vector<int>& shard = arrivals_[static_cast<size_t>(s)];
      while (static_cast<int>(shard.size()) < counts[static_cast<size_t>(s)]) {
        const std::string key = ArrivalKey(s, static_cast<int>(shard.size()));
        // A number taken by a request whose reply was lost (the worker's link went down; its
        // retry took another) never gets its key: after a short wait it counts as nobody (-1).
        int id = -1;
        try {
          id =
              ParseInt(store_.Get(key, std::min(o_.timeout, std::chrono::milliseconds(3000))), key);
        } catch (const Error& e) {
          if (e.code() != ErrorCode::kTimeout) throw;
        }
        shard.push_back(id);
        arrived_.insert(id);
        Beat();  // reading 1,024 arrivals from a busy etcd can outlast the silence
      }
    }
  }

  // Members of the previous generation that neither arrived nor were reported gone: every one
  // when `all`, else the first (whether the round must wait). Reports of the dead are
  // remembered: a worker reported gone stays gone.
  std::vector<int> Missing(bool all) {
    std::vector<int> out;
    for (int w : previous_) {
      if (arrived_.count(w) != 0 || gone_.count(w) != 0) continue;
      if (IsGone(store_, o_.job_id, w)) {
        gone_.insert(w);
        continue;
      }
      out.push_back(w);
      if (!all) break;
    }
    return out;
  }

  std::chrono::milliseconds Limit() const {
    return paused_ && o_.pause_timeout.count() > 0 ? o_.pause_timeout : o_.timeout;
  }

  void Pause(const std::vector<int>& present) {
    paused_ = true;
    present_ = present;
    if (o_.on_pause) o_.on_pause(present);
  }

  // The coordinator's heartbeat: "<worker id>.<nonce>:<count>" (a nonce per RoundWatch, so that
  // a worker joining the round again never repeats a value), then " paused <present>" once the
  // round paused. Written every kSlice (or at once with `now`) while this member coordinates.
  void Beat(bool now = false) {
    if (!coordinator_) return;
    const auto t = Clock::now();
    if (!now && t < next_beat_) return;
    next_beat_ = t + kSlice;
    store_.Set(round_ + "coordinator", NextBeat());
  }
  std::string NextBeat() {
    std::string value = std::to_string(o_.worker_id) + "." + std::to_string(nonce_) + ":" +
                        std::to_string(++beats_);
    if (paused_) value += " paused " + Csv(present_);
    return value;
  }
  // What is left of `limit` since this member arrived (0 when past).
  std::chrono::milliseconds LeftOf(std::chrono::milliseconds limit) const {
    const auto spent =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - arrived_at_);
    return spent >= limit ? std::chrono::milliseconds(0) : limit - spent;
  }

  [[noreturn]] void ThrowTimeout(int count) {
    const std::string who = Csv(Missing(/*all=*/true), ", ");
    throw Error(ErrorCode::kTimeout,
                "elastic rendezvous: worker " + std::to_string(o_.worker_id) + ": generation " +
                    std::to_string(generation_) + " did not close within " +
                    std::to_string(Limit().count()) + " ms" +
                    (paused_ ? " (paused below --min-workers)" : "") + ": " +
                    std::to_string(count) + " worker(s) arrived, fewer than --min-workers " +
                    std::to_string(o_.min_workers) +
                    (who.empty() ? "" : "; not heard from worker(s) " + who));
  }

  Store& store_;
  const RendezvousOptions& o_;
  const int64_t generation_;
  const std::string round_;
  const std::vector<int>& previous_;
  const Clock::time_point arrived_at_;
  std::vector<std::vector<int>> arrivals_;  // by shard: worker ids by arrival number (-1: nobody)
  std::unordered_set<int> arrived_;         // the same, as a set
  std::unordered_set<int> gone_;            // reported gone (for good)
  bool paused_ = false;
  std::vector<int> present_;  // at the pause
  bool coordinator_ = false;  // in Close, as the round's coordinator or its successor
  bool took_over_ = false;
  const uint32_t nonce_ = std::random_device{}();
  int64_t beats_ = 0;
  Clock::time_point next_beat_{};
};

}  // namespace

Membership JoinRound(Store& store, const RendezvousOptions& o, int64_t generation,
                     const std::vector<int>& previous) {
  const auto arrived_at = Clock::now();
  RoundWatch watch(store, o, generation, previous, arrived_at);
  const std::string& round = watch.round();
  // An arrival number on this worker's shard of the round's counters: about kMembersPerShard
  // workers contend for one counter (etcd adds by compare-and-swap, and 1,024 writers of one key
  // never all got through: docs/benchmarks.md).
  const int shard = o.worker_id % watch.shards();
  const int my_arrival = static_cast<int>(store.Add(watch.CounterKey(shard), 1)) - 1;
  store.Set(watch.ArrivalKey(shard, my_arrival), std::to_string(o.worker_id));
  // The first to open the round coordinates: it alone reads every arrival and closes the round,
  // and writes the members; the others wait for that list. Were everyone to poll every arrival, a
  // round of N would cost N² store requests (59 s to form 1,024 members, docs/benchmarks.md).
  const std::string me = std::to_string(o.worker_id);
  const bool coordinator = store.CompareSet(round + "open", "", me) == me;

  std::vector<int> ids;
  std::vector<int> arrived;
  std::string csv;
  if (!coordinator && watch.AwaitMembers(&csv)) {
    ids = ParseList(csv, round + "members");
    arrived = watch.ClosedCounts(store.Get(round + "closed", o.timeout));
  } else {
    arrived = watch.Close(coordinator || watch.took_over());
    ids = watch.Members(arrived);
    // The first list written stands: a slow coordinator and its successor may each close, and an
    // arrival key one of them gave up on (-1) could make their lists differ.
    csv = Csv(ids);
    const std::string written = store.CompareSet(round + "members", "", csv);
    if (written != csv) ids = ParseList(written, round + "members");
  }
  const bool spare =
      std::find(previous.begin(), previous.end(), o.worker_id) == previous.end() && generation > 0;
  if (my_arrival >= arrived[static_cast<size_t>(shard)] && !spare)
    throw Error(ErrorCode::kAborted, "elastic rendezvous: worker " + std::to_string(o.worker_id) +
                                         " arrived late: generation " + std::to_string(generation) +
                                         " closed with " + std::to_string(Sum(arrived)) +
                                         " arrival(s)");
  Membership m;
  m.generation = generation;
  m.world = static_cast<int>(ids.size());
  m.workers = ids;
  const auto at = std::find(ids.begin(), ids.end(), o.worker_id);
  m.rank = at == ids.end() ? -1 : static_cast<int>(at - ids.begin());
  return m;
}

void AnnounceSpare(Store& store, const std::string& job_id, int worker_id) {
  store.Add(SparesKey(job_id, worker_id % kSpareShards), 1);
}

std::vector<int> MembersOf(Store& store, const std::string& job_id, int64_t generation,
                           std::chrono::milliseconds timeout) {
  const std::string key = Round(job_id, generation) + "members";
  return ParseList(store.Get(key, timeout), key);
}

int64_t WaitForRound(Store& store, const RendezvousOptions& o, int64_t from) {
  bool all_gone = false;  // since all_gone_since
  Clock::time_point all_gone_since{}, next_look{};
  std::unordered_set<int> seen_gone;  // reported gone: for good
  std::minstd_rand random(static_cast<unsigned>(o.worker_id) + 1);
  for (int64_t g = std::max<int64_t>(1, from);;) {
    if (IsFinished(store, o.job_id)) return -1;
    const std::string round = Round(o.job_id, g);
    if (store.Check(round + "closed")) {
      ++g;  // over before we saw it: the next one
      all_gone = false;
      continue;
    }
    if (store.Check(round + "open")) return g;
    // Generation g - 1 runs. If every member is gone, nobody will open round g: a waiting spare
    // would wait forever (and its agent with it). Looked at every abandon_after / 4, at most
    // every 5 s (256 spares looking every 200 ms were a good part of a busy etcd's load), and
    // again when abandon_after has passed since all were seen gone; the first member still there
    // ends the look,
    // members taken in a random order and those seen gone not asked again (256 spares asking
    // after 1,024 members, the first 256 of them gone, made 69,376 requests of one round).
    const auto now = Clock::now();
    if (now >= next_look) {
      // Often enough to end within abandon_after of the last death, at most every 5 s.
      next_look =
          now + std::clamp<Clock::duration>(o.abandon_after / 4, std::chrono::milliseconds(200),
                                            std::chrono::milliseconds(5000));
      const std::string members_key = Round(o.job_id, g - 1) + "members";
      std::vector<int> members;
      bool gone = store.Check(members_key);
      if (gone) members = MembersOf(store, o.job_id, g - 1, o.timeout);
      std::vector<int> order = members;
      std::shuffle(order.begin(), order.end(), random);
      for (size_t i = 0; gone && i < order.size(); ++i) {
        if (seen_gone.count(order[i]) != 0) continue;
        gone = IsGone(store, o.job_id, order[i]);
        if (gone) seen_gone.insert(order[i]);
      }
      if (!gone) {
        all_gone = false;
      } else if (!all_gone) {
        all_gone = true;
        all_gone_since = now;
      } else if (now - all_gone_since >= o.abandon_after) {
        const std::string ids = Csv(members, ", ");
        throw Error(ErrorCode::kPeerLost,
                    "worker " + std::to_string(o.worker_id) + ": every worker of generation " +
                        std::to_string(g - 1) + " (" + ids +
                        ") is gone, so no group is left to join and nobody holds the training "
                        "state; the job cannot go on. Start it again with --resume to continue "
                        "from its last checkpoint");
      }
      // ... and once more the moment abandon_after has passed (an abandon_after too large to
      // add to the clock never passes).
      if (all_gone && o.abandon_after < std::chrono::hours(24 * 365 * 100))
        next_look = std::min(next_look, all_gone_since + o.abandon_after);
    }
    // Parked in the store until the round opens, not polled every 5 ms: every waiting spare's
    // polls were load on the one store thread all members share.
    try {
      const auto until_look =
          std::chrono::duration_cast<std::chrono::milliseconds>(next_look - Clock::now());
      store.Wait({round + "open"}, std::clamp(until_look, std::chrono::milliseconds(1),
                                              std::chrono::milliseconds(2000)));
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kTimeout) throw;
    }
  }
}

void SpareJoined(Store& store, const std::string& job_id, int worker_id) {
  store.Add(SparesKey(job_id, worker_id % kSpareShards), -1);
}

void NoteWatcher(Store& store, const std::string& job_id, double unix_now) {
  store.Set(job_id + "/live/watcher", std::to_string(unix_now));
}

void NoteFinalSeen(Store& store, const std::string& job_id) {
  store.Set(job_id + "/live/final_seen", "1");
}

void LingerForWatcher(Store& store, const std::string& job_id, double unix_now,
                      std::chrono::milliseconds limit) {
  const std::string watcher = job_id + "/live/watcher";
  if (!store.Check(watcher)) return;
  double heard = 0;
  try {
    heard = std::stod(store.Get(watcher, std::chrono::milliseconds(1000)));
  } catch (const std::exception&) {
    return;  // not a time: no watcher of ours
  }
  if (unix_now - heard > 10) return;
  try {
    store.Wait({job_id + "/live/final_seen"}, limit);
  } catch (const Error&) {
    // The dashboard did not get there in time: the job ends anyway.
  }
}

void QueueFault(Store& store, const std::string& job_id, const std::string& spec) {
  const int64_t n = store.Add(job_id + "/elastic/injections", 1);
  store.Set(job_id + "/elastic/injection/" + std::to_string(n - 1), spec);
}

std::vector<std::string> QueuedFaults(Store& store, const std::string& job_id, int64_t* seen) {
  std::vector<std::string> out;
  const int64_t n = store.Add(job_id + "/elastic/injections", 0);
  for (; *seen < n; ++*seen)
    out.push_back(store.Get(job_id + "/elastic/injection/" + std::to_string(*seen),
                            std::chrono::milliseconds(2000)));
  return out;
}

void RequestRegroup(Store& store, const std::string& job_id, int64_t delta) {
  store.Add(job_id + "/elastic/joiners", delta);
}

int64_t RegroupRequests(Store& store, const std::string& job_id) {
  return store.Add(job_id + "/elastic/joiners", 0);
}

void ReportGone(Store& store, const std::string& job_id, int worker_id, const std::string& how) {
  store.Set(GoneKey(job_id, worker_id), how);
}

bool IsGone(Store& store, const std::string& job_id, int worker_id) {
  return store.Check(GoneKey(job_id, worker_id));
}

void ReportFinished(Store& store, const std::string& job_id, int64_t generation) {
  store.Set(job_id + "/elastic/finished", std::to_string(generation));
}

bool IsFinished(Store& store, const std::string& job_id) {
  return store.Check(job_id + "/elastic/finished");
}

int64_t FinishedGeneration(Store& store, const std::string& job_id) {
  const std::string key = job_id + "/elastic/finished";
  if (!store.Check(key)) return -1;
  return ParseInt(store.Get(key, std::chrono::milliseconds(1000)), key);
}

void ReportFault(Store& store, const std::string& job_id, int worker_id, const std::string& cause,
                 double unix_time) {
  store.Set(FaultKey(job_id, worker_id), cause + " " + std::to_string(unix_time));
}

std::pair<std::string, double> FaultOf(Store& store, const std::string& job_id, int worker_id) {
  if (!store.Check(FaultKey(job_id, worker_id))) return {"", -1};
  const std::string v = store.Get(FaultKey(job_id, worker_id), std::chrono::milliseconds(1000));
  const auto space = v.rfind(' ');
  if (space == std::string::npos) return {v, -1};
  try {
    return {v.substr(0, space), std::stod(v.substr(space + 1))};
  } catch (...) {
    return {v.substr(0, space), -1};
  }
}

}  // namespace cdt::elastic
