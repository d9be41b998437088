// A connection flood for tests of admission (comm/transport/admission.h): an attacker at another
// address of this machine (127.0.0.2) that opens connections at a fixed rate and never says a
// word. The outside world, played for real: real sockets, real rate.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <string>
#include <thread>

#include "comm/transport/socket.h"

namespace cdt::testing {

// Opens `per_second` connections a second to `to` from `source` until stopped, holding the last
// 500 open (a process's default limit of 1,024 descriptors is shared with the test).
class Flood {
 public:
  Flood(net::HostPort to, std::string source, int per_second)
      : thread_([this, to, source, per_second] {
          std::deque<net::Socket> held;
          const auto start = std::chrono::steady_clock::now();
          for (int n = 0; !stop_; ++n) {
            std::this_thread::sleep_until(start +
                                          std::chrono::microseconds(1000000 / per_second) * n);
            const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (fd < 0) continue;
            net::Socket s(fd);
            sockaddr_in src{};
            src.sin_family = AF_INET;
            inet_pton(AF_INET, source.c_str(), &src.sin_addr);
            sockaddr_in dst{};
            dst.sin_family = AF_INET;
            dst.sin_port = htons(to.port);
            inet_pton(AF_INET, to.host.c_str(), &dst.sin_addr);
            if (::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) continue;
            ::connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
            held.push_back(std::move(s));
            if (held.size() > 500) held.pop_front();
            ++opened_;
          }
        }) {}
  ~Flood() {
    stop_ = true;
    thread_.join();
  }
  int opened() const { return opened_.load(); }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int> opened_{0};
  std::thread thread_;
};

}  // namespace cdt::testing
