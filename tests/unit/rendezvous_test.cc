// Elastic rendezvous rounds (src/elastic/rendezvous.h) over a real store shared by threads:
// who is a member, in which order, and when a round closes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "cdt/error.h"
#include "comm/store/memory_store.h"
#include "elastic/rendezvous.h"

namespace cdt::elastic {
namespace {

using std::chrono::milliseconds;

// Runs JoinRound for each worker id on its own thread; returns the memberships by worker id.
std::map<int, Membership> Join(Store& store, const std::vector<int>& workers, int64_t generation,
                               const std::vector<int>& previous, RendezvousOptions o) {
  std::map<int, Membership> out;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int w : workers)
    threads.emplace_back([&, w, o]() mutable {
      o.worker_id = w;
      Membership m = JoinRound(store, o, generation, previous);
      std::lock_guard<std::mutex> lock(mu);
      out[w] = m;
    });
  for (auto& t : threads) t.join();
  return out;
}

RendezvousOptions Options(milliseconds last_call) {
  RendezvousOptions o;
  o.job_id = "job";
  o.last_call = last_call;
  o.timeout = milliseconds(60000);
  return o;
}

TEST(Rendezvous, FirstRoundRanksWorkersByTheirIds) {
  MemoryStore store;
  auto m = Join(store, {3, 1, 0, 2}, 0, {0, 1, 2, 3}, Options(milliseconds(60000)));
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(m[w].rank, w);
    EXPECT_EQ(m[w].world, 4);
    EXPECT_EQ(m[w].workers, (std::vector<int>{0, 1, 2, 3}));
  }
}

TEST(Rendezvous, ARoundClosesAsSoonAsTheDeadAreReported) {
  // last_call is a minute: the round can only close this quickly because worker 2 is reported
  // gone and every other member of the previous generation arrived.
  MemoryStore store;
  ReportGone(store, "job", 2, "killed by signal 9");
  const auto start = std::chrono::steady_clock::now();
  auto m = Join(store, {3, 0, 1}, 1, {0, 1, 2, 3}, Options(milliseconds(60000)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(m[0].workers, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(m[3].rank, 2);
  EXPECT_EQ(m[1].world, 3);
}

TEST(Rendezvous, AHungWorkerIsLeftOutAfterTheLastCallAndTurnedAwayLate) {
  MemoryStore store;
  auto m = Join(store, {0, 1, 3}, 1, {0, 1, 2, 3}, Options(milliseconds(200)));
  EXPECT_EQ(m[1].workers, (std::vector<int>{0, 1, 3}));
  RendezvousOptions late = Options(milliseconds(200));
  late.worker_id = 2;
  try {
    JoinRound(store, late, 1, {0, 1, 2, 3});
    FAIL() << "a late worker became a member";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_NE(std::string(e.what()).find("arrived late"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, ArrivalsSpreadOverShardsAndALateWorkerOfAnyShardIsTurnedAway) {
  // 100 workers: 4 arrival counters (at most 32 writers each, so that etcd's compare-and-swap
  // adds get through), the round's counts fixed per shard. Worker 57 (shard 1) is reported gone,
  // so the round closes without it; arriving afterwards it is late although its shard's count is
  // not the one that closed last.
  ASSERT_EQ(ArrivalShards(100), 4);
  ASSERT_EQ(ArrivalShards(32), 1);
  ASSERT_EQ(ArrivalShards(1), 1);
  ASSERT_EQ(ArrivalShards(100000), static_cast<int>(kMaxArrivalShards));
  MemoryStore store;
  std::vector<int> everyone(100), present;
  std::iota(everyone.begin(), everyone.end(), 0);
  for (int w : everyone)
    if (w != 57) present.push_back(w);
  ReportGone(store, "job", 57, "killed by signal 9");
  auto m = Join(store, present, 1, everyone, Options(milliseconds(60000)));
  EXPECT_EQ(m[0].world, 99);
  EXPECT_EQ(m[99].rank, 98);
  EXPECT_EQ(store.Get("job/elastic/g1/closed", milliseconds(100)), "25,24,25,25");
  for (int s = 0; s < 4; ++s)
    EXPECT_LE(store.Add("job/elastic/g1/arrivals/" + std::to_string(s), 0), 25);
  RendezvousOptions late = Options(milliseconds(300));
  late.worker_id = 57;
  try {
    JoinRound(store, late, 1, everyone);
    FAIL() << "a late worker became a member";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAborted);
    EXPECT_NE(std::string(e.what()).find("arrived late"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, NewWorkersRankAfterTheSurvivors) {
  // Worker 0 died; spare 7 and survivors 2, 1 form the next generation: the survivors keep their
  // order, the spare comes last.
  MemoryStore store;
  ReportGone(store, "job", 0, "exited with status 1");
  RendezvousOptions o = Options(milliseconds(60000));
  o.target_world = 3;
  AnnounceSpare(store, "job", 7);  // so the round waits for it
  std::map<int, Membership> m;
  std::thread spare([&] {
    RendezvousOptions s = o;
    s.worker_id = 7;
    m[7] = JoinRound(store, s, 4, {2, 0, 1});
  });
  auto survivors = Join(store, {1, 2}, 4, {2, 0, 1}, o);
  spare.join();
  EXPECT_EQ(survivors[2].workers, (std::vector<int>{2, 1, 7}));
  EXPECT_EQ(survivors[2].rank, 0);
  EXPECT_EQ(m[7].rank, 2);
}

TEST(Rendezvous, WaitingSparesRestoreTheWorldSize) {
  // Generation 0: workers 0..2. Worker 1 dies; spares 8 and 9 are announced, 8 is watching. The
  // round waits for one spare (it would otherwise close at once) and does not take more.
  MemoryStore store;
  RendezvousOptions o = Options(milliseconds(60000));
  o.target_world = 3;
  Join(store, {0, 1, 2}, 0, {0, 1, 2}, o);
  EXPECT_EQ(MembersOf(store, "job", 0, milliseconds(1000)), (std::vector<int>{0, 1, 2}));
  AnnounceSpare(store, "job", 8);
  AnnounceSpare(store, "job", 9);
  ReportGone(store, "job", 1, "killed by signal 9");
  Membership spare;
  std::thread watching([&] {
    RendezvousOptions s = o;
    s.worker_id = 8;
    const int64_t g = WaitForRound(store, s, 1);
    ASSERT_EQ(g, 1);
    spare = JoinRound(store, s, g, MembersOf(store, "job", g - 1, milliseconds(5000)));
    SpareJoined(store, "job", 8);
  });
  std::this_thread::sleep_for(milliseconds(50));
  auto survivors = Join(store, {2, 0}, 1, {0, 1, 2}, o);
  watching.join();
  EXPECT_EQ(survivors[0].workers, (std::vector<int>{0, 2, 8}));
  EXPECT_EQ(spare.rank, 2);
  EXPECT_EQ(MembersOf(store, "job", 1, milliseconds(1000)), (std::vector<int>{0, 2, 8}));
  // Spare 9 arrives after the round closed: not a member, it goes on waiting, until the job ends.
  RendezvousOptions late = o;
  late.worker_id = 9;
  EXPECT_EQ(JoinRound(store, late, 1, {0, 1, 2}).rank, -1);
  ReportFinished(store, "job", 1);
  EXPECT_EQ(WaitForRound(store, late, 2), -1);
}

TEST(Rendezvous, TooFewWorkersTimeOutNamingTheMissing) {
  MemoryStore store;
  RendezvousOptions o = Options(milliseconds(50));
  o.min_workers = 2;
  o.timeout = milliseconds(300);
  try {
    JoinRound(store, o, 0, {0, 1});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("not heard from worker(s) 1"), std::string::npos)
        << e.what();
  }
}

// Counts the requests that reach a real store.
class CountingStore : public Store {
 public:
  void Set(const std::string& k, const std::string& v) override {
    ++n;
    inner.Set(k, v);
  }
  std::string Get(const std::string& k, milliseconds t) override {
    ++n;
    if (k.find("/arrival/") != std::string::npos) ++arrival_reads;
    return inner.Get(k, t);
  }
  void Wait(const std::vector<std::string>& k, milliseconds t) override {
    ++n;
    inner.Wait(k, t);
  }
  int64_t Add(const std::string& k, int64_t d) override {
    ++n;
    return inner.Add(k, d);
  }
  std::string CompareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    ++n;
    return inner.CompareSet(k, e, d);
  }
  bool Delete(const std::string& k) override {
    ++n;
    return inner.Delete(k);
  }
  bool Check(const std::string& k) override {
    ++n;
    return inner.Check(k);
  }
  std::atomic<int64_t> n{0};
  std::atomic<int64_t> arrival_reads{0};  // what closing the round costs
  MemoryStore inner;
};

TEST(Rendezvous, ARoundCostsStoreRequestsInProportionToItsMembers) {
  // Were every member to read every arrival, a round of 96 would cost over 96² = 9,216 requests
  // (and 1,024 members a million): only the coordinator does.
  CountingStore store;
  std::vector<int> ids(96);
  std::iota(ids.begin(), ids.end(), 0);
  auto m = Join(store, ids, 0, ids, Options(milliseconds(60000)));
  for (int w : ids) ASSERT_EQ(m[w].rank, w);
  EXPECT_LT(store.n.load(), 30 * 96) << "store requests for a round of 96";
}

TEST(Rendezvous, AMemberClosesTheRoundWhenTheCoordinatorFallsSilent) {
  // Worker 2 arrived first (it coordinates) and then hung: its heartbeat never comes, and after
  // coordinator_silence one of the others takes over and closes the round, with worker 2 in it
  // (it arrived).
  MemoryStore store;
  store.Add("job/elastic/g1/arrivals/0", 1);
  store.Set("job/elastic/g1/arrival/0/0", "2");
  store.Set("job/elastic/g1/open", "2");
  RendezvousOptions o = Options(milliseconds(60000));
  o.coordinator_silence = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto m = Join(store, {1, 0}, 1, {0, 1, 2}, o);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(m[0].workers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(m[1].rank, 1);
  EXPECT_EQ(MembersOf(store, "job", 1, milliseconds(1000)), (std::vector<int>{0, 1, 2}));
}

TEST(Rendezvous, OneMemberSucceedsASilentCoordinator) {
  // As above with 8 waiting: one of them takes over (a CompareSet of the heartbeat) and reads the 9
  // arrivals; the others go on waiting for its list. Were every one of them to close the round,
  // the arrivals would be read 8 x 9 times (512 members: 266,871 requests).
  CountingStore store;
  store.Add("job/elastic/g1/arrivals/0", 1);
  store.Set("job/elastic/g1/arrival/0/0", "2");
  store.Set("job/elastic/g1/open", "2");
  store.Set("job/elastic/g1/coordinator", "2.17:4");  // its last beat
  RendezvousOptions o = Options(milliseconds(60000));
  o.coordinator_silence = milliseconds(300);
  std::vector<int> everyone = {0, 1, 2, 3, 4, 5, 6, 7, 8}, waiting = {0, 1, 3, 4, 5, 6, 7, 8};
  auto m = Join(store, waiting, 1, everyone, o);
  for (int w : waiting) EXPECT_EQ(m[w].workers, everyone) << "worker " << w;
  EXPECT_LE(store.arrival_reads.load(), 9 + 2);
}

TEST(Rendezvous, EveryWorkerPresentPausesBelowMinWorkers) {
  // Worker 2 is gone and --min-workers is 3: the round pauses. Each worker present hears of it
  // once (on_pause: the elastic driver checkpoints from the lowest id), the coordinator's
  // companions through its heartbeat, and every one times out after pause_timeout.
  MemoryStore store;
  ReportGone(store, "job", 2, "killed by signal 9");
  std::mutex mu;
  std::map<int, std::vector<std::vector<int>>> pauses;
  std::map<int, std::string> errors;
  std::vector<std::thread> threads;
  for (int w : {0, 1})
    threads.emplace_back([&, w] {
      RendezvousOptions o = Options(milliseconds(60000));
      o.worker_id = w;
      o.min_workers = 3;
      o.pause_timeout = milliseconds(1500);
      o.coordinator_silence = milliseconds(1000);  // how often a waiting member looks (5 s)
      o.on_pause = [&, w](const std::vector<int>& present) {
        std::vector<int> sorted = present;
        std::sort(sorted.begin(), sorted.end());
        std::lock_guard<std::mutex> lock(mu);
        pauses[w].push_back(sorted);
      };
      try {
        JoinRound(store, o, 1, {0, 1, 2});
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(mu);
        errors[w] = e.what();
        EXPECT_EQ(e.code(), ErrorCode::kTimeout);
      }
    });
  for (auto& t : threads) t.join();
  for (int w : {0, 1}) {
    ASSERT_EQ(pauses[w].size(), 1u) << "worker " << w;
    EXPECT_EQ(pauses[w][0], (std::vector<int>{0, 1}));
    EXPECT_NE(errors[w].find("paused below --min-workers"), std::string::npos) << errors[w];
  }
}

TEST(Rendezvous, FaultTimesRoundTrip) {
  MemoryStore store;
  EXPECT_LT(FaultOf(store, "job", 1).second, 0);
  ReportFault(store, "job", 1, "kill", 1700000000.25);
  auto [cause, t] = FaultOf(store, "job", 1);
  EXPECT_EQ(cause, "kill");
  EXPECT_NEAR(t, 1700000000.25, 1e-3);
}

}  // namespace
}  // namespace cdt::elastic
