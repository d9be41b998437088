// The mesh against someone on the network or at the store (issue 41, items 5 and 10): it listens
// on the address it advertises only; a process that read the token (all a store reader gets when
// the job has no secret) cannot take a rank's place; no secret beyond loopback is refused unless
// the risk is accepted; and with `encrypt` every byte is sealed — the results are the same, a
// changed byte is detected and named, and a mix of sealed and plain ranks is refused.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "cdt/tcp_communicator.h"
#include "comm/store/memory_store.h"
#include "comm/transport/peer_handshake.h"
#include "comm/transport/sealed_stream.h"
#include "comm/transport/socket.h"
#include "comm_test_util.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;

CommunicatorOptions Opts(int rank, int size, int timeout_ms = 5000) {
  CommunicatorOptions o;
  o.rank = rank;
  o.size = size;
  o.job_id = "sec";
  o.timeout = milliseconds(timeout_ms);
  o.shared_memory = false;  // everything over TCP, where these properties live
  return o;
}

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t nl; (nl = s.find('\n', at)) != std::string::npos; at = nl + 1)
    out.push_back(s.substr(at, nl - at));
  out.push_back(s.substr(at));
  return out;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// A process that read the generation's token from the store — everything a store reader has when
// the job has no secret — dials rank 0 as rank 1 before rank 1 starts. It can compute the
// generation key (there is no secret), but not rank 1's link key: the slot stays rank 1's.
TEST(MeshSecurity, AStoreReaderWithTheTokenCannotTakeARanksSlot) {
  MemoryStore store;
  std::atomic<bool> intruder_refused{false};
  std::thread rank1;
  std::thread intruder([&] {
    const std::string rec = store.Get("sec/gen0/addr/0", milliseconds(5000));
    const std::string token = store.Get("sec/gen0/token", milliseconds(5000));
    const std::vector<std::string> lines = Lines(rec);
    const auto hp = net::ParseHostPort(lines[0], "addr");
    const std::string pk0 = FromHex(lines[2]);
    const handshake::RankKeys own = handshake::RankKeys::Generate();
    const std::string key = *handshake::LinkKey(handshake::GenerationKey("", "sec/gen0", token),
                                                own.secret_key, pk0, own.public_key, pk0);
    std::vector<net::Socket> socks;
    std::vector<handshake::Hello> hellos;
    for (uint32_t ch = 0; ch < 2; ++ch) {  // both of rank 1's channels, queued before rank 1
      handshake::Hello h{handshake::kMagic, handshake::kVersion, 1, 0, ch, 0, {}};
      std::memset(h.nonce, 7, sizeof h.nonce);
      socks.push_back(net::ConnectUntil(hp, net::DeadlineAfter(milliseconds(2000))));
      net::SendAll(socks.back().fd(), &h, sizeof h, net::DeadlineAfter(milliseconds(2000)),
                   "rank 0");
      hellos.push_back(h);
    }
    rank1 = std::thread([&] {
      try {
        auto comm = ConnectTcpCommunicator(store, Opts(1, 2));
        int32_t x = 5;
        comm->Allreduce(&x, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
        EXPECT_EQ(x, 7);
      } catch (const Error& e) {
        ADD_FAILURE() << "the real rank 1 was kept out: " << e.what();
      }
    });
    int refused = 0;
    for (size_t i = 0; i < socks.size(); ++i) {
      try {
        handshake::Challenge ch{};
        net::RecvAll(socks[i].fd(), &ch, sizeof ch, net::DeadlineAfter(milliseconds(5000)),
                     "rank 0");
        std::string proof = handshake::DialerProof(key, hellos[i], ch.nonce);
        net::SendAll(socks[i].fd(), proof.data(), proof.size(),
                     net::DeadlineAfter(milliseconds(2000)), "rank 0");
        handshake::Ack ack{};
        net::RecvAll(socks[i].fd(), &ack, sizeof ack, net::DeadlineAfter(milliseconds(5000)),
                     "rank 0");
        refused += ack.status == handshake::kBadProof;
      } catch (const Error& e) {
        ++refused;  // closed on it (its mesh formed with the real rank 1 already)
      }
    }
    intruder_refused = refused == 2;
  });
  try {
    auto comm = ConnectTcpCommunicator(store, Opts(0, 2));
    int32_t v = 2;
    comm->Allreduce(&v, 1, DataType::kInt32, ReduceOp::kSum)->Wait();
    EXPECT_EQ(v, 7);  // rank 1's slot went to rank 1
  } catch (const Error& e) {
    ADD_FAILURE() << "rank 0: " << e.what();
  }
  intruder.join();
  rank1.join();
  EXPECT_TRUE(intruder_refused);
}

// A rank advertising 127.0.0.1 is not reachable on another address of this machine while it
// forms its group (its listener lives only as long as the formation).
TEST(MeshSecurity, TheMeshListensOnlyOnTheAdvertisedAddress) {
  MemoryStore store;
  bool other_address_answered = true, own_address_answered = false;
  std::thread probe([&] {
    const std::string rec = store.Get("sec/gen0/addr/0", milliseconds(5000));
    const auto hp = net::ParseHostPort(Lines(rec)[0], "addr");
    EXPECT_EQ(hp.host, "127.0.0.1");
    try {
      net::ConnectUntil({"127.0.0.2", hp.port}, net::DeadlineAfter(milliseconds(300)));
    } catch (const Error&) {
      other_address_answered = false;
    }
    try {
      net::ConnectUntil(hp, net::DeadlineAfter(milliseconds(300)));
      own_address_answered = true;
    } catch (const Error&) {
    }
    // Then rank 1 comes, and the group forms.
    auto comm = ConnectTcpCommunicator(store, Opts(1, 2));
  });
  auto comm = ConnectTcpCommunicator(store, Opts(0, 2));
  probe.join();
  EXPECT_FALSE(other_address_answered) << "rank 0's listener answered on 127.0.0.2";
  EXPECT_TRUE(own_address_answered);
}

TEST(MeshSecurity, NoSecretBeyondLoopbackIsRefusedUnlessTheRiskIsAccepted) {
  MemoryStore store;
  CommunicatorOptions o = Opts(0, 1, 500);
  o.advertise_host = "192.0.2.1";  // TEST-NET-1: never this machine's
  try {
    ConnectTcpCommunicator(store, o);
    FAIL() << "no secret on a non-loopback address was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("CDT_JOB_SECRET"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("CDT_ALLOW_INSECURE=1"), std::string::npos) << e.what();
  }
  o.allow_insecure = true;  // then it goes on (and fails to bind an address it does not have)
  try {
    ConnectTcpCommunicator(store, o);
  } catch (const Error& e) {
    EXPECT_NE(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
  o.allow_insecure = false;
  o.secret = "a secret of sixteen chars or more";
  try {
    ConnectTcpCommunicator(store, o);
  } catch (const Error& e) {
    EXPECT_NE(e.code(), ErrorCode::kInvalidArgument) << e.what();
  }
}

// Sealed groups compute what plain ones do: every algorithm, sizes around the frame size.
TEST(MeshSecurity, SealedGroupsComputeTheSameForEveryAlgorithmAndSize) {
  testing::RankSetup setup;
  setup.base = Opts(0, 0);
  setup.base.encrypt = true;
  setup.base.secret = "sealed-test-secret-0123456789";
  testing::RunRanks(
      3,
      [](Communicator& comm) {
        for (size_t count :
             {size_t{1}, size_t{1000}, size_t{16384}, size_t{16385}, size_t{300000}}) {
          for (AllreduceAlgorithm algo :
               {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRecursiveDoubling,
                AllreduceAlgorithm::kHalvingDoubling, AllreduceAlgorithm::kTree}) {
            std::vector<float> x(count);
            for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>((i % 97) + comm.rank());
            comm.Allreduce(x.data(), count, DataType::kFloat32, ReduceOp::kSum, {algo})->Wait();
            for (size_t i = 0; i < count; i += 997)
              ASSERT_EQ(x[i], static_cast<float>(3 * (i % 97) + 3)) << count << " " << i;
          }
        }
        std::vector<int32_t> all(3 * 70000);
        std::vector<int32_t> mine(70000, comm.rank());
        comm.Allgather(mine.data(), all.data(), mine.size(), DataType::kInt32)->Wait();
        EXPECT_EQ(all[0], 0);
        EXPECT_EQ(all[70000 * 2 + 5], 2);
      },
      setup);
}

TEST(MeshSecurity, ASealedAndAPlainRankRefuseEachOtherNamingTheSetting) {
  MemoryStore store;
  std::string errors[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      CommunicatorOptions o = Opts(r, 2, 3000);
      o.encrypt = r == 0;
      try {
        ConnectTcpCommunicator(store, o);
      } catch (const Error& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  EXPECT_TRUE(errors[0].find("--encrypt") != std::string::npos ||
              errors[1].find("--encrypt") != std::string::npos)
      << errors[0] << "\n"
      << errors[1];
}

// Forwards connections to `target`, flipping one byte at `offset` of the stream from the dialer
// on the connection whose Hello names channel 0 (the one small operations use). A fake of the
// network, not of our code.
class FlippingProxy {
 public:
  FlippingProxy(net::HostPort target, size_t offset) : target_(std::move(target)), offset_(offset) {
    listener_ = net::Listen("127.0.0.1", 0, &bound_);
    thread_ = std::thread([this] { Run(); });
  }
  ~FlippingProxy() {
    stop_ = true;
    ::shutdown(listener_.fd(), SHUT_RDWR);
    thread_.join();
    for (auto& t : pumps_) t.join();
  }
  std::string address() const { return bound_.ToString(); }

 private:
  void Run() {
    for (int i = 0; i < 2 && !stop_; ++i) {
      std::string from;
      net::Socket in;
      try {
        in = net::AcceptUntil(listener_, net::DeadlineAfter(milliseconds(5000)), &from);
      } catch (const Error&) {
        return;
      }
      net::Socket out = net::ConnectUntil(target_, net::DeadlineAfter(milliseconds(2000)));
      auto a = std::make_shared<net::Socket>(std::move(in));
      auto b = std::make_shared<net::Socket>(std::move(out));
      pumps_.emplace_back([this, a, b] { Pump(a->fd(), b->fd(), true); });
      pumps_.emplace_back([this, a, b] { Pump(b->fd(), a->fd(), false); });
    }
  }
  void Pump(int from, int to, bool dialer_side) {
    char buf[4096];
    size_t seen = 0;
    bool channel0 = false;
    for (;;) {
      const ssize_t n = ::recv(from, buf, sizeof buf, 0);
      if (n <= 0) break;
      if (dialer_side) {
        if (seen < 20 && seen + static_cast<size_t>(n) >= 20) {
          uint32_t channel = 1;
          std::memcpy(&channel, buf + (16 - seen), 4);  // Hello.channel at byte 16
          channel0 = channel == 0;
        }
        if (channel0 && offset_ >= seen && offset_ < seen + static_cast<size_t>(n))
          buf[offset_ - seen] ^= 0x20;
      }
      seen += static_cast<size_t>(n);
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  }
  net::HostPort target_;
  size_t offset_;
  net::HostPort bound_;
  net::Socket listener_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> pumps_;
};

// Rank 0 reaches rank 1 through the proxy (its store answer for rank 1's address is redirected).
class RedirectingStore : public Store {
 public:
  RedirectingStore(Store& inner, std::function<std::string(const std::string&)> redirect)
      : inner_(inner), redirect_(std::move(redirect)) {}
  void Set(const std::string& k, const std::string& v) override { inner_.Set(k, v); }
  std::string Get(const std::string& k, std::chrono::milliseconds t) override {
    std::string v = inner_.Get(k, t);
    return k.size() > 7 && k.compare(k.size() - 7, 7, "/addr/1") == 0 ? redirect_(v) : v;
  }
  void Wait(const std::vector<std::string>& k, std::chrono::milliseconds t) override {
    inner_.Wait(k, t);
  }
  int64_t Add(const std::string& k, int64_t d) override { return inner_.Add(k, d); }
  std::string CompareSet(const std::string& k, const std::string& e,
                         const std::string& d) override {
    return inner_.CompareSet(k, e, d);
  }
  bool Delete(const std::string& k) override { return inner_.Delete(k); }
  bool Check(const std::string& k) override { return inner_.Check(k); }

 private:
  Store& inner_;
  std::function<std::string(const std::string&)> redirect_;
};

// One byte flipped on the wire after the handshake (56-byte Hello + 32-byte proof, then the first
// frame's 4-byte length, then its ciphertext): the receiving rank refuses the frame, naming the
// sender and the frame; the group stops instead of reducing altered data.
TEST(MeshSecurity, AFlippedByteOnASealedLinkIsDetectedAndNamed) {
  MemoryStore inner;
  std::unique_ptr<FlippingProxy> proxy;
  std::mutex mu;
  RedirectingStore redirected(inner, [&](const std::string& rec) {
    std::lock_guard<std::mutex> lock(mu);
    if (!proxy)
      proxy =
          std::make_unique<FlippingProxy>(net::ParseHostPort(Lines(rec)[0], "a"), 56 + 32 + 4 + 3);
    return proxy->address() + rec.substr(rec.find('\n'));
  });
  std::string errors[2];
  ErrorCode codes[2] = {ErrorCode::kInvalidArgument, ErrorCode::kInvalidArgument};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      CommunicatorOptions o = Opts(r, 2, 3000);
      o.encrypt = true;
      o.secret = "flip-test-secret-0123456789";
      try {
        auto comm = ConnectTcpCommunicator(r == 0 ? static_cast<Store&>(redirected) : inner, o);
        std::vector<float> x(1000, 1.0f);
        comm->Allreduce(x.data(), x.size(), DataType::kFloat32, ReduceOp::kSum,
                        {AllreduceAlgorithm::kRing})
            ->Wait();
      } catch (const Error& e) {
        errors[r] = e.what();
        codes[r] = e.code();
      }
    });
  for (auto& t : ranks) t.join();
  EXPECT_EQ(codes[1], ErrorCode::kProtocol) << errors[1];
  EXPECT_NE(errors[1].find("rank 1 (this process) refused the data of rank 0"), std::string::npos)
      << errors[1];
  EXPECT_NE(errors[1].find("frame #0"), std::string::npos) << errors[1];
  EXPECT_NE(errors[1].find("failed authentication"), std::string::npos) << errors[1];
  EXPECT_FALSE(errors[0].empty()) << "rank 0 went on as if nothing happened";
  proxy.reset();
}

// The frames themselves, over a socketpair: sizes across the frame boundary, and corruption.
TEST(SealedStream, FramesCarryEveryByteAndRefuseAnyChange) {
  for (sealed::Cipher cipher : {sealed::Cipher::kChaCha20Poly1305, sealed::Cipher::kAes256Gcm}) {
    if (cipher == sealed::Cipher::kAes256Gcm && !sealed::Aes256GcmAvailable()) continue;
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    const std::string key(32, 'k');
    sealed::SealedSender tx(cipher, key);
    sealed::SealedReceiver rx(cipher, key);
    std::vector<char> sent(3 * sealed::kMaxFramePlain + 123), got(sent.size());
    for (size_t i = 0; i < sent.size(); ++i) sent[i] = static_cast<char>(i * 31 + 7);
    size_t out = 0, in = 0;
    while (in < got.size()) {
      if (out < sent.size()) {
        const ssize_t r = tx.Send(sv[0], sent.data() + out, sent.size() - out);
        if (r > 0) out += static_cast<size_t>(r);
      }
      // The receiver takes odd-sized pieces: frames are cut across its reads.
      const ssize_t r = rx.Recv(sv[1], got.data() + in, std::min<size_t>(1000, got.size() - in));
      ASSERT_NE(r, -2) << rx.failure();
      if (r > 0) in += static_cast<size_t>(r);
    }
    EXPECT_EQ(sent, got) << sealed::CipherName(cipher);
    // A frame with one changed byte is refused, naming the frame.
    const char msg[5] = {1, 2, 3, 4, 5};
    ASSERT_EQ(tx.Send(sv[0], msg, sizeof msg), 5);
    char raw[64];
    const ssize_t n = ::recv(sv[1], raw, sizeof raw, 0);
    ASSERT_EQ(n, static_cast<ssize_t>(4 + 5 + 16));
    raw[6] ^= 1;
    ASSERT_EQ(::send(sv[0], raw, static_cast<size_t>(n), 0), n);
    char five[5];
    ssize_t r;
    do r = rx.Recv(sv[1], five, sizeof five);
    while (r == -1 && errno == EAGAIN);
    EXPECT_EQ(r, -2);
    EXPECT_NE(rx.failure().find("frame #4 (5 bytes) failed authentication"), std::string::npos)
        << rx.failure();
    ::close(sv[0]);
    ::close(sv[1]);
  }
}

TEST(SealedStream, AnImpossibleLengthIsRefusedBeforeAnythingIsBuffered) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
  sealed::SealedReceiver rx(sealed::Cipher::kChaCha20Poly1305, std::string(32, 'k'));
  const unsigned char header[4] = {0xff, 0xff, 0xff, 0x7f};
  ASSERT_EQ(::send(sv[0], header, 4, 0), 4);
  char buf[8];
  EXPECT_EQ(rx.Recv(sv[1], buf, sizeof buf), -2);
  EXPECT_NE(rx.failure().find("announces 2147483647 bytes"), std::string::npos) << rx.failure();
  ::close(sv[0]);
  ::close(sv[1]);
}

}  // namespace
}  // namespace cdt
