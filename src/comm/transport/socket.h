// Thin RAII layer over POSIX TCP sockets. Every blocking step takes a deadline; nothing here waits
// forever. All failures throw cdt::Error with the address involved.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cdt::net {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// now + timeout, saturating: a timeout of centuries (or a negative one) is a deadline that
// never comes (or has passed), never a time point that wrapped.
inline Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  const Deadline now = Clock::now();
  if (timeout.count() <= 0) return now;
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(Deadline::max() - now);
  return timeout >= room ? Deadline::max() : now + timeout;
}
// Milliseconds left until deadline, clamped to [0, INT_MAX] for poll().
int MillisUntil(Deadline deadline);

// An owned file descriptor.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.release()) {}
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Close();
  // shutdown(SHUT_RDWR): wakes any poll() on this socket in this or another process.
  void Shutdown();

 private:
  int fd_ = -1;
};

struct HostPort {
  std::string host;
  uint16_t port = 0;
  std::string ToString() const;
};

// Parses "host:port" (host may be a name, an IPv4 address or [IPv6]). `what` names the flag or
// variable in the error message.
HostPort ParseHostPort(const std::string& text, const std::string& what);

// This machine's address on the route toward `peer` (a UDP connect: no packet leaves), the
// interface the kernel would send through, as Gloo and NCCL pick theirs. Throws kIo naming the
// peer when there is no route.
std::string LocalAddressToward(const HostPort& peer);

// Listens on host:port (port 0 = any free port). Returns the socket; *bound receives the real port.
Socket Listen(const std::string& host, uint16_t port, HostPort* bound, int backlog = 128);

// Accepts one connection, waiting until deadline. Returns an invalid Socket on timeout.
Socket AcceptUntil(const Socket& listener, Deadline deadline, std::string* peer_address);

// Connects to host:port, retrying refused connections until deadline (the listener may not be up
// yet). Throws kTimeout naming the address when the deadline passes.
Socket ConnectUntil(const HostPort& address, Deadline deadline);

void SetNonBlocking(int fd, bool on);
void SetNoDelay(int fd);

// Blocking-with-deadline helpers for small control messages (handshakes, store requests).
// They work on blocking or non-blocking sockets alike by polling before each syscall.
void SendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& peer);
void RecvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& peer);

// The address string ("ip:port") of the connected peer of fd.
std::string PeerAddress(int fd);

}  // namespace cdt::net
