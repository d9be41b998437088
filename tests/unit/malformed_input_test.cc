// Garbage on the store port and on peer ports yields a clear error for that connection and never a
// crash; the services keep working for well-behaved clients.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "cdt/allreduce_rules.h"
#include "cdt/error.h"
#include "comm/store/store_protocol.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "comm_test_util.h"
#include "common/bytes.h"
#include "common/printable.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;

void SendRaw(const net::HostPort& to, const std::string& bytes) try {
  net::Socket s = net::ConnectUntil(to, net::DeadlineAfter(milliseconds(2000)));
  try {
    net::SendAll(s.fd(), bytes.data(), bytes.size(), net::DeadlineAfter(milliseconds(500)), "x");
    char sink[256];
    net::RecvAll(s.fd(), sink, sizeof sink, net::DeadlineAfter(milliseconds(50)), "x");
  } catch (const Error&) {
    // The server may close on us or stay silent: both are fine, crashing is not.
  }
} catch (const Error&) {
  // Nothing listens any more (the mesh formed before we got there): nothing to test here.
}

std::string Frame(uint8_t type, const std::string& payload) {
  std::string f;
  ByteWriter w(&f);
  w.U32(static_cast<uint32_t>(payload.size() + 1));
  w.U8(type);
  w.Raw(payload.data(), payload.size());
  return f;
}

// A raw connection that authenticates as a client would and then sends whatever it likes.
struct RawSession {
  net::Socket sock;
  store::FrameAuthenticator frames;
};

RawSession Authenticate(const net::HostPort& server, const std::string& secret) {
  RawSession r;
  r.sock = net::ConnectUntil(server, net::DeadlineAfter(milliseconds(2000)));
  char hello[store::kChallengeBytes];
  net::RecvAll(r.sock.fd(), hello, sizeof hello, net::DeadlineAfter(milliseconds(2000)), "store");
  const std::string client_nonce(store::kNonceBytes, 'n');
  store::Handshake h =
      store::DeriveHandshake(secret, std::string_view(hello + 8, store::kNonceBytes), client_nonce);
  std::string auth = Frame(1, client_nonce + h.client_proof);
  net::SendAll(r.sock.fd(), auth.data(), auth.size(), net::DeadlineAfter(milliseconds(500)),
               "store");
  char ok[4 + 1 + store::kProofBytes];
  net::RecvAll(r.sock.fd(), ok, sizeof ok, net::DeadlineAfter(milliseconds(2000)), "store");
  r.frames = store::FrameAuthenticator(h.session_key, /*server=*/false);
  return r;
}

TEST(MalformedInput, StoreSurvivesGarbageBeforeAndAfterAuthentication) {
  TcpStoreServer server("127.0.0.1", 0, "secret");
  std::mt19937 rng(42);
  for (int i = 0; i < 60; ++i) {
    std::string junk(static_cast<size_t>(rng() % 200), '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    SendRaw(server.address(), junk);
  }
  SendRaw(server.address(), std::string("\xff\xff\xff\xff\x02", 5));  // 4 GiB frame length
  SendRaw(server.address(), Frame(2, "not authenticated"));

  // Authenticated client sending malformed requests: it gets an error, the server lives on.
  {
    RawSession r = Authenticate(server.address(), "secret");
    std::string bad;
    r.frames.Seal(&bad, store::MsgType::kSet, std::string("\xff\xff\xff\x7f", 4));  // past the end
    r.frames.Seal(&bad, static_cast<store::MsgType>(99), "");
    net::SendAll(r.sock.fd(), bad.data(), bad.size(), net::DeadlineAfter(milliseconds(500)),
                 "store");
  }
  {
    // A well-formed request whose MAC is wrong (forged, or altered on the way).
    RawSession r = Authenticate(server.address(), "secret");
    std::string forged;
    store::FrameAuthenticator("some other key", false).Seal(&forged, store::MsgType::kCheck, "k");
    net::SendAll(r.sock.fd(), forged.data(), forged.size(), net::DeadlineAfter(milliseconds(500)),
                 "store");
  }
  for (int i = 0; i < 200; ++i) {  // random well-framed, authenticated requests
    RawSession r = Authenticate(server.address(), "secret");
    std::string payload(static_cast<size_t>(rng() % 64), '\0');
    for (char& c : payload) c = static_cast<char>(rng() % 4 == 0 ? 0 : rng());
    std::string msg;
    r.frames.Seal(&msg, static_cast<store::MsgType>(2 + rng() % 8), payload);
    try {
      net::SendAll(r.sock.fd(), msg.data(), msg.size(), net::DeadlineAfter(milliseconds(500)),
                   "store");
    } catch (const Error&) {
    }
  }
  EXPECT_GT(server.rejected_connections(), 10u);
  TcpStoreClient good(server.address(), "secret", milliseconds(2000));
  good.Set("still", "alive");
  EXPECT_EQ(good.Get("still", milliseconds(1000)), "alive");
}

TEST(MalformedInput, ClientRejectsSomethingThatIsNotAStore) {
  net::HostPort bound;
  net::Socket listener = net::Listen("127.0.0.1", 0, &bound);
  std::thread fake([&] {
    net::Socket c = net::AcceptUntil(listener, net::DeadlineAfter(milliseconds(3000)), nullptr);
    std::string http = "HTTP/1.1 400 Bad Request\r\n\r\n..............................";
    net::SendAll(c.fd(), http.data(), http.size(), net::DeadlineAfter(milliseconds(1000)), "c");
    std::this_thread::sleep_for(milliseconds(200));
  });
  try {
    TcpStoreClient c(bound, "s", milliseconds(2000));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
  }
  fake.join();
}

TEST(MalformedInput, GarbageOnPeerPortIsRefusedAndMeshStillForms) {
  MemoryStore store;
  std::thread garbage([&] {
    std::string v = store.Get("g/gen0/addr/0", milliseconds(5000));
    auto hp = net::ParseHostPort(v.substr(0, v.find('\n')), "addr");
    SendRaw(hp, std::string(40, 'Z'));  // full-size garbage hello
    SendRaw(hp, std::string(3, 'Z'));   // short and silent (times out on the server side)
  });
  testing::RankSetup setup;
  setup.base.job_id = "g";
  setup.base.timeout = milliseconds(15000);
  testing::RunRanks(
      2,
      [](Communicator& comm) {
        int64_t v = 1;
        comm.Allreduce(&v, 1, DataType::kInt64, ReduceOp::kSum)->Wait();
        EXPECT_EQ(v, 2);
      },
      setup, &store);
  garbage.join();
}

TEST(MalformedInput, ByteReaderNeverReadsPastItsInput) {
  std::string s;
  ByteWriter(&s).Bytes("hello");
  for (size_t cut = 0; cut < s.size(); ++cut) {
    ByteReader r(std::string_view(s).substr(0, cut), "test record");
    EXPECT_THROW(r.Bytes(100), Error);
  }
  EXPECT_THROW(net::ParseHostPort("nocolon", "--rdzv-endpoint"), Error);
  EXPECT_THROW(net::ParseHostPort("h:99999", "--rdzv-endpoint"), Error);
  EXPECT_THROW(net::ParseHostPort("h:12a", "--rdzv-endpoint"), Error);
}

// Text from a file quoted in an error stays one short, printable line: control bytes and bytes
// that are not UTF-8 become \xNN, UTF-8 is kept, and a long text is cut at a character boundary.
TEST(MalformedInput, QuotedFileTextIsPrintable) {
  EXPECT_EQ(Printable("timestamp,gco2_per_kwh"), "timestamp,gco2_per_kwh");
  EXPECT_EQ(Printable("g CO\xE2\x82\x82\t\n"), "g CO\xE2\x82\x82\\x09\\x0A");  // CO₂ kept
  EXPECT_EQ(Printable(std::string("a\0\xFF\xC3", 4)), "a\\x00\\xFF\\xC3");     // cut UTF-8
  EXPECT_EQ(Printable(std::string(200, 'x')), std::string(80, 'x') + "...");
  EXPECT_EQ(Printable("\xE2\x82\x82\xE2\x82\x82", 4),
            "\xE2\x82\x82\xE2\x82\x82");  // not cut inside ₂
  std::mt19937 rng(7);
  std::string garbage(3000, '\0');
  for (char& c : garbage) c = static_cast<char>(rng());
  try {
    AllreduceRules::Parse(garbage + " 1 2 3\n", "rules.txt");
    ADD_FAILURE() << "garbage parsed as rules";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 300u) << what;
    EXPECT_EQ(Printable(what, what.size()), what);  // no control byte, nothing that is not UTF-8
  }
}

}  // namespace
}  // namespace cdt
