#include "elastic/rendezvous.h"

#include <algorithm>
#include <thread>

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
std::string SparesKey(const std::string& job) { return job + "/elastic/spares_waiting"; }

int ParseInt(const std::string& s, const std::string& key) {
  try {
    return std::stoi(s);
  } catch (...) {
    throw Error(ErrorCode::kProtocol, "elastic rendezvous: store key '" + key + "' holds '" +
                                          Printable(s) +
                                          "', not a number (another job with the same --job-id?)");
  }
}

}  // namespace

Membership JoinRound(Store& store, const RendezvousOptions& o, int64_t generation,
                     const std::vector<int>& previous) {
  const std::string round = Round(o.job_id, generation);
  const auto arrived_at = Clock::now();
  const int my_arrival = static_cast<int>(store.Add(round + "arrivals", 1)) - 1;
  store.Set(round + "arrival/" + std::to_string(my_arrival), std::to_string(o.worker_id));

  std::vector<int> arrivals;  // worker ids by arrival number, read as they appear
  auto read_arrivals = [&](int count) {
    while (static_cast<int>(arrivals.size()) < count) {
      const std::string key = round + "arrival/" + std::to_string(arrivals.size());
      // A number taken by a request whose reply was lost (the worker's link went down; its
      // retry took another) never gets its key: after a short wait it counts as nobody (-1).
      int id = -1;
      try {
        id = ParseInt(store.Get(key, std::min(o.timeout, std::chrono::milliseconds(3000))), key);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kTimeout) throw;
      }
      arrivals.push_back(id);
    }
  };
  std::string closed;
  bool paused = false;
  for (auto pause = std::chrono::microseconds(200);;
       pause = std::min(pause * 2, std::chrono::microseconds(5000))) {
    if (store.Check(round + "closed")) {
      closed = store.Get(round + "closed", o.timeout);
      break;
    }
    const int count = static_cast<int>(store.Add(round + "arrivals", 0));
    read_arrivals(count);
    std::vector<int> missing;
    int alive = 0;  // members of the previous generation that arrived
    for (int w : previous) {
      if (std::find(arrivals.begin(), arrivals.end(), w) != arrivals.end())
        ++alive;
      else if (!IsGone(store, o.job_id, w))
        missing.push_back(w);
    }
    // Spares to wait for: enough to restore target_world, as many as are waiting.
    bool spares_here = true;
    if (o.target_world > 0 && alive < o.target_world) {
      const int waiting = static_cast<int>(store.Add(SparesKey(o.job_id), 0));
      spares_here = count - alive >= std::min(o.target_world - alive, waiting);
    }
    const bool last_call = Clock::now() - arrived_at >= o.last_call;
    if (count >= o.min_workers && ((missing.empty() && spares_here) || last_call)) {
      closed = store.CompareSet(round + "closed", "", std::to_string(count));
      break;
    }
    if (count < o.min_workers && (missing.empty() || last_call) && !paused) {
      paused = true;
      if (o.on_pause) {
        std::vector<int> present;
        for (int w : arrivals)
          if (w >= 0) present.push_back(w);
        o.on_pause(present);
      }
    }
    if (Clock::now() - arrived_at >=
        (paused && o.pause_timeout.count() > 0 ? o.pause_timeout : o.timeout)) {
      std::string who;
      for (int w : missing) who += (who.empty() ? "" : ", ") + std::to_string(w);
      throw Error(
          ErrorCode::kTimeout,
          "elastic rendezvous: worker " + std::to_string(o.worker_id) + ": generation " +
              std::to_string(generation) + " did not close within " +
              std::to_string(
                  (paused && o.pause_timeout.count() > 0 ? o.pause_timeout : o.timeout).count()) +
              " ms" + (paused ? " (paused below --min-workers)" : "") + ": " +
              std::to_string(count) + " worker(s) arrived, fewer than --min-workers " +
              std::to_string(o.min_workers) +
              (who.empty() ? "" : "; not heard from worker(s) " + who));
    }
    std::this_thread::sleep_for(pause);
  }
  const int arrived = ParseInt(closed, round + "closed");
  const bool spare =
      std::find(previous.begin(), previous.end(), o.worker_id) == previous.end() && generation > 0;
  if (my_arrival >= arrived && !spare)
    throw Error(ErrorCode::kAborted, "elastic rendezvous: worker " + std::to_string(o.worker_id) +
                                         " arrived late: generation " + std::to_string(generation) +
                                         " closed with " + std::to_string(arrived) + " arrival(s)");
  read_arrivals(arrived);
  std::vector<int> ids;
  for (int i = 0; i < arrived; ++i)
    if (arrivals[static_cast<size_t>(i)] >= 0) ids.push_back(arrivals[static_cast<size_t>(i)]);
  auto order = [&](int w) {
    auto it = std::find(previous.begin(), previous.end(), w);
    return std::make_pair(it == previous.end() ? 1 : 0,
                          it == previous.end() ? w : static_cast<int>(it - previous.begin()));
  };
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return order(a) < order(b); });
  if (o.target_world > 0) {
    // Previous members always stay; spares only up to the target.
    int keep = 0;
    while (keep < static_cast<int>(ids.size()) &&
           (order(ids[static_cast<size_t>(keep)]).first == 0 || keep < o.target_world))
      ++keep;
    ids.resize(static_cast<size_t>(keep));
  }
  Membership m;
  m.generation = generation;
  m.world = static_cast<int>(ids.size());
  m.workers = ids;
  const auto me = std::find(ids.begin(), ids.end(), o.worker_id);
  m.rank = me == ids.end() ? -1 : static_cast<int>(me - ids.begin());
  if (m.rank == 0) {  // for spares joining the next round
    std::string csv;
    for (int w : ids) csv += (csv.empty() ? "" : ",") + std::to_string(w);
    store.Set(round + "members", csv);
  }
  return m;
}

void AnnounceSpare(Store& store, const std::string& job_id) { store.Add(SparesKey(job_id), 1); }

std::vector<int> MembersOf(Store& store, const std::string& job_id, int64_t generation,
                           std::chrono::milliseconds timeout) {
  const std::string key = Round(job_id, generation) + "members";
  const std::string csv = store.Get(key, timeout);
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

int64_t WaitForRound(Store& store, const RendezvousOptions& o, int64_t from) {
  bool all_gone = false;  // since all_gone_since
  Clock::time_point all_gone_since{}, next_look{};
  for (int64_t g = std::max<int64_t>(1, from);;) {
    if (IsFinished(store, o.job_id)) return -1;
    const std::string round = Round(o.job_id, g);
    if (store.Check(round + "closed")) {
      ++g;  // over before we saw it: the next one
      all_gone = false;
      continue;
    }
    if (store.Check(round + "arrivals")) return g;
    // Generation g - 1 runs. If every member is gone, nobody will open round g: a waiting spare
    // would wait forever (and its agent with it). Looked at every 200 ms; the first member still
    // there ends the look.
    const auto now = Clock::now();
    if (now >= next_look) {
      next_look = now + std::chrono::milliseconds(200);
      const std::string members_key = Round(o.job_id, g - 1) + "members";
      std::vector<int> members;
      bool gone = store.Check(members_key);
      if (gone) members = MembersOf(store, o.job_id, g - 1, o.timeout);
      for (size_t i = 0; gone && i < members.size(); ++i)
        gone = IsGone(store, o.job_id, members[i]);
      if (!gone) {
        all_gone = false;
      } else if (!all_gone) {
        all_gone = true;
        all_gone_since = now;
      } else if (now - all_gone_since >= o.abandon_after) {
        std::string ids;
        for (int w : members) ids += (ids.empty() ? "" : ", ") + std::to_string(w);
        throw Error(ErrorCode::kPeerLost,
                    "worker " + std::to_string(o.worker_id) + ": every worker of generation " +
                        std::to_string(g - 1) + " (" + ids +
                        ") is gone, so no group is left to join and nobody holds the training "
                        "state; the job cannot go on. Start it again with --resume to continue "
                        "from its last checkpoint");
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void SpareJoined(Store& store, const std::string& job_id) { store.Add(SparesKey(job_id), -1); }

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
