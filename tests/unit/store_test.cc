#include <gtest/gtest.h>

#include <thread>

#include "cdt/error.h"
#include "comm/store/memory_store.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;

// `other` is a second handle on the same store (a TCP client serialises its own requests, so a
// waiter and a setter need two connections, as two processes would have).
void ExerciseStore(Store& s, Store& other) {
  s.Set("a", "1");
  EXPECT_EQ(s.Get("a", milliseconds(100)), "1");
  EXPECT_TRUE(s.Check("a"));
  EXPECT_FALSE(s.Check("b"));
  EXPECT_EQ(s.Add("n", 5), 5);
  EXPECT_EQ(s.Add("n", -2), 3);
  EXPECT_EQ(s.CompareSet("c", "", "x"), "x");   // missing key equals ""
  EXPECT_EQ(s.CompareSet("c", "y", "z"), "x");  // mismatch: unchanged
  EXPECT_EQ(s.CompareSet("c", "x", "z"), "z");
  EXPECT_TRUE(s.Delete("c"));
  EXPECT_FALSE(s.Delete("c"));
  std::string binary("\0\1\2\xff", 4);
  s.Set("bin", binary);
  EXPECT_EQ(s.Get("bin", milliseconds(100)), binary);
  try {
    s.Wait({"never"}, milliseconds(50));
    FAIL() << "wait on a missing key returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("never"), std::string::npos) << e.what();
  }
  // A waiter is woken by a later set.
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(50));
    other.Set("late", "v");
  });
  EXPECT_EQ(s.Get("late", milliseconds(5000)), "v");
  setter.join();
}

TEST(MemoryStore, Semantics) {
  MemoryStore s;
  ExerciseStore(s, s);
}

TEST(TcpStore, Semantics) {
  TcpStoreServer server("127.0.0.1", 0, "secret");
  TcpStoreClient client(server.address(), "secret", milliseconds(2000));
  TcpStoreClient other(server.address(), "secret", milliseconds(2000));
  ExerciseStore(client, other);
}

TEST(TcpStore, ManyClientsAddConcurrently) {
  TcpStoreServer server("127.0.0.1", 0, "s");
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      TcpStoreClient c(server.address(), "s", milliseconds(2000));
      for (int i = 0; i < 50; ++i) c.Add("counter", 1);
    });
  for (auto& t : threads) t.join();
  TcpStoreClient c(server.address(), "s", milliseconds(2000));
  EXPECT_EQ(c.Add("counter", 0), 400);
}

TEST(TcpStore, WrongSecretCannotJoinOrRead) {
  TcpStoreServer server("127.0.0.1", 0, "right");
  {
    TcpStoreClient ok(server.address(), "right", milliseconds(2000));
    ok.Set("private", "x");
  }
  try {
    TcpStoreClient bad(server.address(), "wrong", milliseconds(2000));
    FAIL() << "a client with the wrong secret connected";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAuth) << e.what();
  }
  EXPECT_GE(server.rejected_connections(), 1u);
}

TEST(TcpStore, UnreachableServerTimesOutNamingTheAddress) {
  net::HostPort nowhere{"127.0.0.1", 1};  // port 1: nothing listens
  auto start = std::chrono::steady_clock::now();
  try {
    TcpStoreClient c(nowhere, "s", milliseconds(300));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kTimeout);
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

}  // namespace
}  // namespace cdt
