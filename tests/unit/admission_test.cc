// Admission under a connection flood (comm/transport/admission.h; issue 41, item 8): a listener
// full of unproven connections drops the oldest of the source address holding the most, so a
// flood from one address evicts its own connections, not a legitimate client elsewhere that is
// slow to answer — here one whose bytes take 300 ms to arrive (a loaded or distant machine).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <deque>
#include <list>
#include <string>
#include <thread>
#include <vector>

#include "cdt/error.h"
#include "comm/store/tcp_store_client.h"
#include "comm/store/tcp_store_server.h"
#include "comm/transport/admission.h"
#include "comm/transport/socket.h"
#include "flood.h"

namespace cdt {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Conn {
  std::string from;
  bool unproven;
};

TEST(Admission, DropsTheOldestOfTheAddressHoldingTheMost) {
  std::list<Conn> conns = {{"10.0.0.5:1000", true},  {"10.0.0.9:2000", true},
                           {"10.0.0.9:2001", false}, {"10.0.0.9:2002", true},
                           {"10.0.0.5:1001", false}, {"[::1]:7", true}};
  auto from = [](const Conn& c) -> const std::string& { return c.from; };
  auto unproven = [](const Conn& c) { return c.unproven; };
  auto victim = net::ChooseEviction(conns.begin(), conns.end(), from, unproven);
  ASSERT_NE(victim, conns.end());
  EXPECT_EQ(victim->from, "10.0.0.9:2000");  // two unproven from .9, one from .5
  for (auto& c : conns) c.unproven = false;
  EXPECT_EQ(net::ChooseEviction(conns.begin(), conns.end(), from, unproven), conns.end());
  EXPECT_EQ(net::SourceHost("[::1]:7"), "[::1]");
  EXPECT_EQ(net::SourceHost("[::1]"), "[::1]");
  EXPECT_EQ(net::SourceHost("10.0.0.9:2000"), "10.0.0.9");
}

// Forwards one connection to `to`, holding every byte from the client for `delay` (a fake of a
// slow network: tc netem is not available here).
class DelayProxy {
 public:
  DelayProxy(net::HostPort to, milliseconds delay) {
    listener_ = net::Listen("127.0.0.1", 0, &bound_);
    thread_ = std::thread([this, to, delay] {
      net::Socket client;
      try {
        client = net::AcceptUntil(listener_, net::DeadlineAfter(milliseconds(10000)), nullptr);
      } catch (const Error&) {
        return;
      }
      net::Socket server = net::ConnectUntil(to, net::DeadlineAfter(milliseconds(2000)));
      const int c = client.fd(), s = server.fd();
      std::thread back([c, s] {
        char buf[4096];
        for (ssize_t n; (n = ::recv(s, buf, sizeof buf, 0)) > 0;)
          if (::send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
        ::shutdown(c, SHUT_WR);
      });
      char buf[4096];
      for (ssize_t n; (n = ::recv(c, buf, sizeof buf, 0)) > 0;) {
        std::this_thread::sleep_for(delay);
        if (::send(s, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
      }
      ::shutdown(s, SHUT_WR);
      back.join();
    });
  }
  ~DelayProxy() {
    ::shutdown(listener_.fd(), SHUT_RDWR);
    thread_.join();
  }
  net::HostPort address() const { return bound_; }

 private:
  net::HostPort bound_;
  net::Socket listener_;
  std::thread thread_;
};

TEST(HostileStore, AFloodFromOneAddressDoesNotEvictASlowClientFromAnother) {
  TcpStoreServer server("127.0.0.1", 0, "flood-test-secret-0123456789");
  testing::Flood flood(server.address(), "127.0.0.2", 1000);
  std::this_thread::sleep_for(milliseconds(200));  // the flood is on
  DelayProxy slow(server.address(), milliseconds(300));
  try {
    TcpStoreClient client(slow.address(), "flood-test-secret-0123456789", milliseconds(10000));
    client.Set("k", "v");
    EXPECT_EQ(client.Get("k", milliseconds(5000)), "v");
  } catch (const Error& e) {
    ADD_FAILURE() << "the slow client was pushed out by the flood: " << e.what();
  }
  EXPECT_GT(flood.opened(), 300);  // the flood really ran through the client's handshake
  EXPECT_GT(server.rejected_connections(), 200u);
}

}  // namespace
}  // namespace cdt
