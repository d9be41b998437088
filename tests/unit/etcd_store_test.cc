// EtcdStore (src/comm/store/etcd_store.h) against a real etcd (Debian etcd-server), started by
// the test on free ports in a temporary directory and stopped after; skipped when etcd is not
// installed. The Store contract, concurrent Add and CompareSet, and an elastic rendezvous round.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "cdt/error.h"
#include "comm/store/etcd_store.h"
#include "elastic/rendezvous.h"
#include "etcd_server.h"

namespace cdt {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class Etcd : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::EtcdServer::available())
      GTEST_SKIP() << "etcd is not installed (Debian etcd-server)";
    server_ = std::make_unique<testing::EtcdServer>();
    store_ = Connect(milliseconds(20000));
  }
  std::unique_ptr<EtcdStore> Connect(milliseconds timeout = milliseconds(5000)) {
    return std::make_unique<EtcdStore>(net::HostPort{"127.0.0.1", server_->port()}, timeout);
  }
  std::unique_ptr<testing::EtcdServer> server_;
  std::unique_ptr<EtcdStore> store_;
};

TEST_F(Etcd, KeepsTheStoreContract) {
  Store& s = *store_;
  EXPECT_FALSE(s.Check("a"));
  s.Set("a", std::string("bytes\0with nul", 14));
  EXPECT_EQ(s.Get("a", milliseconds(100)), std::string("bytes\0with nul", 14));
  EXPECT_TRUE(s.Check("a"));
  EXPECT_EQ(s.Add("n", 5), 5);
  EXPECT_EQ(s.Add("n", -2), 3);
  EXPECT_EQ(s.CompareSet("c", "", "first"), "first");
  EXPECT_EQ(s.CompareSet("c", "", "second"), "first");
  EXPECT_EQ(s.CompareSet("c", "first", "third"), "third");
  EXPECT_EQ(s.CompareSet("c", "nope", "fourth"), "third");
  EXPECT_TRUE(s.Delete("c"));
  EXPECT_FALSE(s.Delete("c"));
  try {
    s.Get("missing", milliseconds(100));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
  }
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    Connect()->Set("late", "here");
  });
  EXPECT_EQ(s.Get("late", milliseconds(5000)), "here");
  later.join();
}

TEST_F(Etcd, ConcurrentAddsAndCompareSetsAreAtomic) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<std::string> winners;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto s = Connect();
      for (int i = 0; i < 25; ++i) s->Add("count", 1);
      const std::string got = s->CompareSet("leader", "", std::to_string(t));
      std::lock_guard<std::mutex> lock(mu);
      winners.push_back(got);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(store_->Add("count", 0), 100);
  for (const auto& w : winners) EXPECT_EQ(w, winners[0]);  // one leader, seen by all
}

TEST_F(Etcd, CarriesAnElasticRendezvousRound) {
  elastic::ReportGone(*store_, "job", 1, "killed by signal 9");
  std::map<int, elastic::Membership> m;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int w : {0, 2, 3})
    threads.emplace_back([&, w] {
      auto s = Connect();
      elastic::RendezvousOptions o;
      o.job_id = "job";
      o.worker_id = w;
      o.last_call = milliseconds(30000);
      auto got = elastic::JoinRound(*s, o, 1, {0, 1, 2, 3});
      std::lock_guard<std::mutex> lock(mu);
      m[w] = got;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(m[3].workers, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(m[3].rank, 2);
}

TEST(EtcdUnreachable, FailsWithATimeoutNamingTheEndpoint) {
  try {
    EtcdStore s(net::HostPort{"127.0.0.1", 1}, milliseconds(300));  // port 1: nobody there
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("is etcd running"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cdt
