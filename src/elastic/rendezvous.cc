#include "elastic/rendezvous.h"

#include <algorithm>
#include <thread>

#include "cdt/error.h"

namespace cdt::elastic {
namespace {

using Clock = std::chrono::steady_clock;

std::string Round(const std::string& job, int64_t g) { return job + "/elastic/g" + std::to_string(g) + "/"; }
std::string GoneKey(const std::string& job, int w) { return job + "/elastic/gone/" + std::to_string(w); }
std::string FaultKey(const std::string& job, int w) { return job + "/elastic/fault/" + std::to_string(w); }

int ParseInt(const std::string& s, const std::string& key) {
  try {
    return std::stoi(s);
  } catch (...) {
    throw Error(ErrorCode::kProtocol, "elastic rendezvous: store key '" + key + "' holds '" + s +
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
      arrivals.push_back(ParseInt(store.Get(key, o.timeout), key));
    }
  };
  std::string closed;
  for (auto pause = std::chrono::microseconds(200);; pause = std::min(pause * 2, std::chrono::microseconds(5000))) {
    if (store.Check(round + "closed")) {
      closed = store.Get(round + "closed", o.timeout);
      break;
    }
    const int count = static_cast<int>(store.Add(round + "arrivals", 0));
    read_arrivals(count);
    std::vector<int> missing;
    for (int w : previous)
      if (std::find(arrivals.begin(), arrivals.end(), w) == arrivals.end() && !IsGone(store, o.job_id, w))
        missing.push_back(w);
    const bool last_call = Clock::now() - arrived_at >= o.last_call;
    if (count >= o.min_workers && (missing.empty() || last_call)) {
      closed = store.CompareSet(round + "closed", "", std::to_string(count));
      break;
    }
    if (Clock::now() - arrived_at >= o.timeout) {
      std::string who;
      for (int w : missing) who += (who.empty() ? "" : ", ") + std::to_string(w);
      throw Error(ErrorCode::kTimeout,
                  "elastic rendezvous: worker " + std::to_string(o.worker_id) + ": generation " +
                      std::to_string(generation) + " did not close within " +
                      std::to_string(o.timeout.count()) + " ms: " + std::to_string(count) +
                      " worker(s) arrived, fewer than --min-workers " + std::to_string(o.min_workers) +
                      (who.empty() ? "" : "; not heard from worker(s) " + who));
    }
    std::this_thread::sleep_for(pause);
  }
  const int members = ParseInt(closed, round + "closed");
  if (my_arrival >= members)
    throw Error(ErrorCode::kAborted, "elastic rendezvous: worker " + std::to_string(o.worker_id) +
                                         " arrived late: generation " + std::to_string(generation) +
                                         " closed with " + std::to_string(members) + " member(s)");
  read_arrivals(members);
  std::vector<int> ids(arrivals.begin(), arrivals.begin() + members);
  auto order = [&](int w) {
    auto it = std::find(previous.begin(), previous.end(), w);
    return std::make_pair(it == previous.end() ? 1 : 0, it == previous.end() ? w : static_cast<int>(it - previous.begin()));
  };
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return order(a) < order(b); });
  Membership m;
  m.generation = generation;
  m.world = members;
  m.workers = ids;
  m.rank = static_cast<int>(std::find(ids.begin(), ids.end(), o.worker_id) - ids.begin());
  return m;
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

bool IsFinished(Store& store, const std::string& job_id) { return store.Check(job_id + "/elastic/finished"); }

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
