// The store against peers that are not friendly (issue 29, docs/security.md): before
// authentication a peer controls no allocation; a flood of idle connections cannot lock the job
// out; a "store" that cannot prove the secret is refused; a frame replayed, reflected or altered
// after authentication is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/store/store_protocol.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "common/bytes.h"
#include "elastic/health_monitor.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;

// Resident memory of this process in bytes.
size_t ResidentBytes() {
  return static_cast<size_t>(elastic::ReadResidentBytes(::getpid()).value_or(0));
}

// What every rank of a job does at set-up, four ranks at once: publish, wait for all, read all.
void Rendezvous(const net::HostPort& store, const std::string& secret, const std::string& job) {
  std::vector<std::thread> ranks;
  std::atomic<int> done{0};
  for (int r = 0; r < 4; ++r)
    ranks.emplace_back([&, r] {
      TcpStoreClient c(store, secret, milliseconds(5000));
      c.Set(job + "/addr/" + std::to_string(r), "rank " + std::to_string(r));
      std::vector<std::string> keys;
      for (int k = 0; k < 4; ++k) keys.push_back(job + "/addr/" + std::to_string(k));
      c.Wait(keys, milliseconds(10000));
      for (int k = 0; k < 4; ++k)
        if (c.Get(keys[k], milliseconds(1000)) == "rank " + std::to_string(k)) ++done;
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(done.load(), 16);
}

TEST(HostileStore, AHugeFrameBeforeAuthenticationAllocatesNothing) {
  TcpStoreServer server("127.0.0.1", 0, "job-secret");
  const size_t before = ResidentBytes();
  std::atomic<size_t> peak{before};
  std::atomic<bool> attacking{true};
  std::thread watch([&] {
    while (attacking.load()) {
      peak = std::max(peak.load(), ResidentBytes());
      std::this_thread::sleep_for(milliseconds(5));
    }
  });
  size_t streamed = 0;
  std::thread attacker([&] {
    net::Socket s = net::ConnectUntil(server.address(), net::DeadlineAfter(milliseconds(2000)));
    std::string header;
    ByteWriter w(&header);
    w.U32(256u << 20);  // a 256 MiB frame ...
    w.U8(static_cast<uint8_t>(store::MsgType::kSet));
    std::string chunk(1 << 20, 'A');
    try {
      net::SendAll(s.fd(), header.data(), header.size(), net::DeadlineAfter(milliseconds(1000)),
                   "store");
      for (int i = 0; i < 256; ++i) {  // ... and its bytes, as fast as the server takes them
        net::SendAll(s.fd(), chunk.data(), chunk.size(), net::DeadlineAfter(milliseconds(1000)),
                     "store");
        streamed += chunk.size();
      }
    } catch (const Error&) {
      // Dropped by the server: what we want.
    }
  });
  Rendezvous(server.address(), "job-secret", "huge");  // the job goes on meanwhile
  attacker.join();
  attacking = false;
  watch.join();
  std::printf("streamed %zu MiB before the store dropped us; resident memory grew %.1f MiB\n",
              streamed >> 20, (static_cast<double>(peak.load()) - before) / (1 << 20));
  EXPECT_LT(streamed, size_t{16} << 20);
  EXPECT_LT(peak.load(), before + (size_t{16} << 20));
  EXPECT_GE(server.rejected_connections(), 1u);
}

TEST(HostileStore, IdleConnectionsCannotLockTheJobOut) {
  TcpStoreServer server("127.0.0.1", 0, "job-secret");
  std::vector<net::Socket> idle;
  for (size_t i = 0; i < 3 * TcpStoreServer::kMaxUnauthenticated; ++i)
    idle.push_back(net::ConnectUntil(server.address(), net::DeadlineAfter(milliseconds(2000))));
  Rendezvous(server.address(), "job-secret", "idle");
  EXPECT_GE(server.rejected_connections(), 2 * TcpStoreServer::kMaxUnauthenticated - 1);
}

TEST(HostileStore, AJobsOwnBurstOfConnectionsIsNotEvicted) {
  // A launcher sizes the cap for its job (UnauthenticatedFor): 200 connections still waiting to
  // authenticate (a job's workers all connecting at once, slower than the store) all stay, and
  // the job goes on. Under the default cap of 64, 136 of them would be dropped to make room.
  TcpStoreServer server("127.0.0.1", 0, "job-secret", Log(),
                        TcpStoreServer::UnauthenticatedFor(300));
  std::vector<net::Socket> waiting;
  for (int i = 0; i < 200; ++i)
    waiting.push_back(net::ConnectUntil(server.address(), net::DeadlineAfter(milliseconds(2000))));
  Rendezvous(server.address(), "job-secret", "burst");
  EXPECT_EQ(server.rejected_connections(), 0u);
  EXPECT_EQ(TcpStoreServer::UnauthenticatedFor(10), TcpStoreServer::kMaxUnauthenticated);
  EXPECT_EQ(TcpStoreServer::UnauthenticatedFor(300), 600u);
}

// Accepts one connection and plays a store that takes any answer.
class FakeStore {
 public:
  explicit FakeStore(std::string server_proof) : proof_(std::move(server_proof)) {
    listener_ = net::Listen("127.0.0.1", 0, &address_);
    thread_ = std::thread([this] {
      net::Socket c = net::AcceptUntil(listener_, net::DeadlineAfter(milliseconds(5000)), nullptr);
      if (!c.valid()) return;
      std::string hello;
      ByteWriter w(&hello);
      w.U32(store::kMagic);
      w.U32(store::kVersion);
      w.Raw(std::string(store::kNonceBytes, 'x').data(), store::kNonceBytes);
      try {
        auto deadline = net::DeadlineAfter(milliseconds(3000));
        net::SendAll(c.fd(), hello.data(), hello.size(), deadline, "client");
        char auth[4 + store::kMaxAuthFrameBytes];
        net::RecvAll(c.fd(), auth, sizeof auth, deadline, "client");
        std::string ok;
        ByteWriter o(&ok);
        o.U32(static_cast<uint32_t>(1 + proof_.size()));
        o.U8(static_cast<uint8_t>(store::MsgType::kOk));
        o.Raw(proof_.data(), proof_.size());
        net::SendAll(c.fd(), ok.data(), ok.size(), deadline, "client");
        char sink[64];
        net::RecvAll(c.fd(), sink, sizeof sink, deadline, "client");
      } catch (const Error&) {
      }
    });
  }
  ~FakeStore() { thread_.join(); }
  const net::HostPort& address() const { return address_; }

 private:
  std::string proof_;
  net::HostPort address_;
  net::Socket listener_;
  std::thread thread_;
};

TEST(HostileStore, AStoreThatAcceptsAnyAnswerIsRefusedByName) {
  for (const std::string& proof : {std::string(), std::string(store::kProofBytes, '\0'),
                                   auth::RandomBytes(store::kProofBytes)}) {
    FakeStore fake(proof);
    try {
      TcpStoreClient c(fake.address(), "job-secret", milliseconds(2000));
      FAIL() << "the client trusted a store that does not know the secret";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kAuth) << e.what();
      EXPECT_NE(std::string(e.what()).find(fake.address().ToString()), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("could not prove"), std::string::npos) << e.what();
    }
  }
}

TEST(HostileStore, ReplayedReflectedOrAlteredFramesAreRefused) {
  const std::string key = auth::RandomBytes(32);
  store::FrameAuthenticator client(key, false), server(key, true);
  std::string first, second;
  client.Seal(&first, store::MsgType::kSet, "payload one");
  client.Seal(&second, store::MsgType::kGet, "payload two");
  auto body = [](const std::string& frame) { return std::string_view(frame).substr(4); };
  store::MsgType type;
  EXPECT_EQ(server.Open(body(first), &type), "payload one");
  EXPECT_EQ(type, store::MsgType::kSet);
  EXPECT_THROW(server.Open(body(first), &type), Error);  // replayed
  std::string altered = second;
  altered[6] ^= 1;
  EXPECT_THROW(server.Open(body(altered), &type), Error);  // one bit changed
  EXPECT_EQ(server.Open(body(second), &type), "payload two");
  std::string reply;
  server.Seal(&reply, store::MsgType::kOk, "");
  store::FrameAuthenticator other_server(key, true);
  EXPECT_THROW(other_server.Open(body(reply), &type), Error);  // reflected back at a server
  EXPECT_NO_THROW(client.Open(body(reply), &type));
  store::FrameAuthenticator other_session(auth::RandomBytes(32), false);
  std::string moved;
  client.Seal(&moved, store::MsgType::kCheck, "k");
  EXPECT_THROW(other_session.Open(body(moved), &type), Error);  // moved to another connection
}

}  // namespace
}  // namespace cdt
