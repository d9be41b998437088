// The elastic driver (src/elastic/driver.h) and fault injection (src/elastic/fault_injector.h).
//
// The injector's actions on the outside world (signals, ip link, sleep) are recorded instead of
// done, and its clock is given: that is the seam FaultActions exists for. The driver runs real
// workers — threads, each with its own TCP communicators over a shared store — whose state is a
// small real training: every step allreduces each rank's contribution and commits the running sum.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "comm/store/memory_store.h"
#include "elastic/driver.h"
#include "elastic/fault_injector.h"

namespace cdt::elastic {
namespace {

using Clock = FaultInjector::Clock;
using std::chrono::milliseconds;

struct Recorded {
  std::vector<std::string> events;
  FaultActions Actions() {
    FaultActions a;
    a.signal_self = [this](int s) { events.push_back(s == SIGKILL ? "SIGKILL" : "SIGSTOP"); };
    a.cut_links = [this](double s) { events.push_back("cut " + std::to_string(int(s))); };
    a.sleep = [this](double s) { events.push_back("sleep " + std::to_string(int(s * 1000))); };
    a.report = [this](int w, const std::string& k) {
      events.push_back("report " + k + " " + std::to_string(w));
    };
    a.log = Log(LogLevel::kError, [](LogLevel, std::string_view) {});
    return a;
  }
};

TEST(FaultInjector, KillAndHangFireOnceOnTheirWorkerAtTheirStep) {
  Recorded rec;
  FaultInjector inj(ParseFaults("kill:1@3,hang:2@1"), {1, 0, 1}, rec.Actions());
  for (int64_t step = 0; step < 6; ++step) inj.Fire(step);
  inj.Fire(3);  // a step run again after a recovery does not repeat the fault
  EXPECT_EQ(rec.events, (std::vector<std::string>{"report kill 1", "SIGKILL"}));
}

TEST(FaultInjector, ACutIsDoneByTheNodesFirstLocalRankOnly) {
  Recorded first, second;
  FaultInjector a(ParseFaults("cut:1@2+4"), {2, 1, 0}, first.Actions());
  FaultInjector b(ParseFaults("cut:1@2+4"), {3, 1, 1}, second.Actions());
  for (int64_t step = 0; step < 4; ++step) a.Fire(step), b.Fire(step);
  EXPECT_EQ(first.events, (std::vector<std::string>{"report cut 2", "cut 4"}));
  EXPECT_TRUE(second.events.empty());
}

TEST(FaultInjector, SlowSleepsItsFactorOfTheStepsMeasuredBeforeIt) {
  Recorded rec;
  FaultInjector inj(ParseFaults("slow:0=3@4"), {0, 0, 0}, rec.Actions(), Clock::time_point{});
  Clock::time_point t{};
  for (int64_t step = 0; step < 4; ++step) {
    EXPECT_FALSE(inj.Slow(step, t)) << step;
    t += milliseconds(100);  // each step takes 100 ms
  }
  EXPECT_TRUE(inj.Slow(4, t));  // 3x: 200 ms more
  EXPECT_TRUE(inj.Slow(5, t + milliseconds(300)));
  EXPECT_EQ(rec.events, (std::vector<std::string>{"sleep 200", "sleep 200"}));
}

TEST(FaultInjector, AQueuedSpecWithABadItemAddsNothing) {
  Recorded rec;
  FaultInjector inj({}, {0, 0, 0}, rec.Actions());
  EXPECT_THROW(inj.Add("kill:0@1,explode:0@2"), Error);
  EXPECT_TRUE(inj.faults().empty());
  inj.Add("hang:0@1");
  inj.Fire(1);
  EXPECT_EQ(rec.events, (std::vector<std::string>{"report hang 0", "SIGSTOP"}));
}

// A real training in miniature: every step each rank contributes (worker id + 1) by allreduce and
// commits the running sum; a new group syncs the newest commit from its rank 0. Worker `dies_at`
// stops at that step as a killed process would: it leaves its group without a word.
class CountingState : public ElasticState {
 public:
  CountingState(int worker, int64_t steps, int64_t dies_at)
      : worker_(worker), steps_(steps), dies_at_(dies_at) {}

  void Prepare() override {}
  int Train(const Generation& g) override {
    Communicator& comm = *g.comm;
    double sync[2] = {static_cast<double>(committed_step_), committed_sum_};
    comm.Broadcast(sync, 2, DataType::kFloat64, 0)->Wait();  // rank 0's commit to everyone
    step_ = static_cast<int64_t>(sync[0]);
    sum_ = sync[1];
    generations.push_back(g.membership.generation);
    for (; step_ < steps_; ++step_) {
      if (step_ == dies_at_) {
        comm.Abort();
        throw Error(ErrorCode::kInvalidArgument, "worker died");  // not recoverable: it ends
      }
      g.before_step(step_);
      double x = worker_ + 1;
      comm.Allreduce(&x, 1, DataType::kFloat64, ReduceOp::kSum)->Wait();
      sum_ += x;
      committed_step_ = step_ + 1;
      committed_sum_ = sum_;
    }
    return 0;
  }
  void Restore(const Failure& f) override { failures.push_back(f); }
  void Forget() override { committed_step_ = 0, committed_sum_ = 0; }
  std::string Checkpoint() override { return ""; }
  int64_t current_step() const override { return step_; }
  double mean_step_s() const override { return 0.001; }

  std::vector<int64_t> generations;
  std::vector<Failure> failures;
  double sum() const { return committed_sum_; }

 private:
  int worker_;
  int64_t steps_, dies_at_;
  int64_t step_ = 0, committed_step_ = 0;
  double sum_ = 0, committed_sum_ = 0;
};

TEST(ElasticDriver, TheSurvivorsReFormWithoutALostWorkerAndFinishFromTheirCommit) {
  MemoryStore store;
  constexpr int kWorkers = 3;
  constexpr int64_t kSteps = 40, kDiesAt = 15;
  std::vector<std::unique_ptr<CountingState>> states;
  for (int w = 0; w < kWorkers; ++w)
    states.push_back(std::make_unique<CountingState>(w, kSteps, w == 2 ? kDiesAt : -1));
  std::vector<int> codes(kWorkers, -1);
  std::vector<std::string> errors(kWorkers);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w)
    threads.emplace_back([&, w] {
      DriverOptions o;
      o.rendezvous.job_id = "job";
      o.rendezvous.worker_id = w;
      o.rendezvous.timeout = milliseconds(20000);
      o.world_size = kWorkers;
      o.last_call_s = 0.2;
      o.where = {w, 0, w};
      Recorded rec;
      o.fault_actions = rec.Actions();
      try {
        codes[w] = RunElastic(store, o, *states[w], [&](const Membership& m) {
          CommunicatorOptions co;
          co.rank = m.rank;
          co.size = m.world;
          co.generation = static_cast<uint64_t>(m.generation);
          co.job_id = "job";
          co.timeout = milliseconds(2000);
          Channels ch;
          ch.comm = ConnectTcpCommunicator(store, co);
          return ch;
        });
      } catch (const Error& e) {
        errors[w] = e.what();
        ReportGone(store, "job", w, "exited");  // what its agent would tell the store
      }
    });
  for (auto& t : threads) t.join();

  EXPECT_EQ(errors[2], "worker died");
  for (int w = 0; w < 2; ++w) {
    EXPECT_EQ(codes[w], 0) << errors[w];
    const CountingState& s = *states[w];
    EXPECT_EQ(s.generations, (std::vector<int64_t>{0, 1})) << w;
    ASSERT_EQ(s.failures.size(), 1u) << w;
    EXPECT_EQ(s.failures[0].lost, std::vector<int>{2});
    EXPECT_EQ(s.failures[0].world_before, kWorkers);
    EXPECT_EQ(s.failures[0].failed_step, kDiesAt);
    // Steps 0..14 with all three (1 + 2 + 3), the rest with two (1 + 2), each once.
    EXPECT_EQ(s.sum(), kDiesAt * 6.0 + (kSteps - kDiesAt) * 3.0) << w;
  }
}

// A worker that rejoins every round but never gets past step `stall_at`: there it stops moving
// for longer than the timeout (alive, as a hung device is), so each generation ends in a timeout
// without a step. Re-forming is bounded: after max_fruitless_regroups such generations every
// worker ends with kTimeout naming the stalling worker and the progress measured (issue 41,
// item 1) instead of re-forming forever.
class StallingState : public CountingState {
 public:
  StallingState(int worker, int64_t stall_at, std::chrono::milliseconds stall)
      : CountingState(worker, 1000, -1), worker_(worker), stall_at_(stall_at), stall_(stall) {}
  int Train(const Generation& g) override {
    Generation wrapped = g;
    wrapped.before_step = [this, g](int64_t step) {
      if (worker_ == 1 && step == stall_at_) std::this_thread::sleep_for(stall_);
      return g.before_step(step);
    };
    return CountingState::Train(wrapped);
  }

 private:
  int worker_;
  int64_t stall_at_;
  std::chrono::milliseconds stall_;
};

TEST(ElasticDriver, RegroupsThatNeverGetPastAStepAreBoundedAndNameThePeer) {
  MemoryStore store;
  constexpr int kWorkers = 2;
  std::vector<std::unique_ptr<StallingState>> states;
  for (int w = 0; w < kWorkers; ++w)
    states.push_back(std::make_unique<StallingState>(w, 5, milliseconds(1500)));
  std::vector<std::string> errors(kWorkers);
  std::vector<ErrorCode> codes(kWorkers, ErrorCode::kInvalidArgument);
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int w = 0; w < kWorkers; ++w)
    threads.emplace_back([&, w] {
      DriverOptions o;
      o.rendezvous.job_id = "stall";
      o.rendezvous.worker_id = w;
      o.rendezvous.timeout = milliseconds(20000);
      o.world_size = kWorkers;
      o.last_call_s = 3.0;  // the stalled worker rejoins every round: it is alive
      o.where = {w, 0, w};
      o.max_fruitless_regroups = 3;
      Recorded rec;
      o.fault_actions = rec.Actions();
      try {
        RunElastic(store, o, *states[w], [&](const Membership& m) {
          CommunicatorOptions co;
          co.rank = m.rank;
          co.size = m.world;
          co.generation = static_cast<uint64_t>(m.generation);
          co.job_id = "stall";
          co.timeout = milliseconds(1000);
          Channels ch;
          ch.comm = ConnectTcpCommunicator(store, co);
          return ch;
        });
        errors[w] = "finished";
      } catch (const Error& e) {
        errors[w] = e.what();
        codes[w] = e.code();
      }
    });
  for (auto& t : threads) t.join();
  // Worker 0 timed out on worker 1 each time; worker 1 (which was stalled) saw its peer go.
  EXPECT_EQ(codes[0], ErrorCode::kTimeout) << errors[0];
  EXPECT_NE(errors[0].find("re-formed 3 times in a row without completing a step"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("no step past step 5"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("named worker 1 (3 times)"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("re-formed 3 times in a row"), std::string::npos) << errors[1];
  EXPECT_EQ(states[0]->generations.size(), 4u);  // the first, then three fruitless re-formings
  // Three timeouts, the back-off (0.5 s + 1 s) and the re-formings: bounded, not forever.
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
}  // namespace cdt::elastic
