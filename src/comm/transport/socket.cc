#include "comm/transport/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include "cdt/error.h"

namespace cdt::net {

int MillisUntil(Deadline deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    Close();
    fd_ = other.release();
  }
  return *this;
}

Socket::~Socket() { Close(); }

void Socket::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

std::string HostPort::ToString() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

HostPort ParseHostPort(const std::string& text, const std::string& what) {
  auto bad = [&](const std::string& why) {
    return Error(ErrorCode::kInvalidArgument,
                 what + ": '" + text + "' is not HOST:PORT (" + why + ")");
  };
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) throw bad("missing ':'");
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  std::string port_text = text.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos)
    throw bad("port must be a number 0-65535");
  unsigned long port = std::stoul(port_text);
  if (port > 65535) throw bad("port must be a number 0-65535");
  return HostPort{host, static_cast<uint16_t>(port)};
}

namespace {

Error SysError(const std::string& what) {
  return Error(ErrorCode::kIo, what + ": " + std::strerror(errno));
}

// Resolves host to a list of addresses (getaddrinfo), throwing a clear error on failure.
struct AddrList {
  addrinfo* head = nullptr;
  ~AddrList() {
    if (head) freeaddrinfo(head);
  }
};

void Resolve(const std::string& host, uint16_t port, bool passive, AddrList* out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  std::string port_text = std::to_string(port);
  const char* node = host.empty() ? nullptr : host.c_str();
  int rc = getaddrinfo(node, port_text.c_str(), &hints, &out->head);
  if (rc != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "cannot resolve host '" + host + "': " + gai_strerror(rc));
}

std::string SockaddrToString(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {0};
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
    port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
    port = ntohs(in6->sin6_port);
  }
  return HostPort{buf, port}.ToString();
}

}  // namespace

std::string LocalAddressToward(const HostPort& peer) {
  AddrList addrs;
  Resolve(peer.host, peer.port == 0 ? 9 : peer.port, false, &addrs);
  std::string last_error = "no address";
  for (addrinfo* ai = addrs.head; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s.valid() || ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    return ParseHostPort(SockaddrToString(ss), "local address").host;
  }
  throw Error(ErrorCode::kIo, "no route from this machine toward " + peer.ToString() + ": " +
                                  last_error + "; give this node's address with --node-addr");
}

Socket Listen(const std::string& host, uint16_t port, HostPort* bound, int backlog) {
  AddrList addrs;
  Resolve(host, port, true, &addrs);
  std::string last_error = "no address";
  for (addrinfo* ai = addrs.head; ai != nullptr; ai = ai->ai_next) {
    Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!s.valid()) {
      last_error = std::strerror(errno);
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(s.fd(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s.fd(), backlog) != 0) {
      last_error = std::strerror(errno);
      continue;
    }
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&ss), &len);
    if (bound) {
      *bound = ParseHostPort(SockaddrToString(ss), "bound address");
      if (!host.empty()) bound->host = host;
    }
    return s;
  }
  throw Error(ErrorCode::kIo, "cannot listen on " + HostPort{host, port}.ToString() + ": " +
                                  last_error + " (is the port in use or the address not local?)");
}

Socket AcceptUntil(const Socket& listener, Deadline deadline, std::string* peer_address) {
  for (;;) {
    pollfd pfd{listener.fd(), POLLIN, 0};
    int rc = ::poll(&pfd, 1, MillisUntil(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) throw SysError("poll on listening socket");
    if (rc == 0) return Socket();
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      throw SysError("accept");
    }
    if (peer_address) *peer_address = SockaddrToString(ss);
    return Socket(fd);
  }
}

Socket ConnectUntil(const HostPort& address, Deadline deadline) {
  std::string last_error;
  for (;;) {
    AddrList addrs;
    Resolve(address.host, address.port, false, &addrs);
    for (addrinfo* ai = addrs.head; ai != nullptr; ai = ai->ai_next) {
      Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
      if (!s.valid()) throw SysError("socket");
      SetNonBlocking(s.fd(), true);
      int rc = ::connect(s.fd(), ai->ai_addr, ai->ai_addrlen);
      if (rc != 0 && errno == EINPROGRESS) {
        pollfd pfd{s.fd(), POLLOUT, 0};
        int prc;
        do {
          prc = ::poll(&pfd, 1, MillisUntil(deadline));
        } while (prc < 0 && errno == EINTR);
        if (prc <= 0) {
          last_error = "connect timed out";
          continue;
        }
        int err = 0;
        socklen_t len = sizeof err;
        ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
        rc = err == 0 ? 0 : -1;
        errno = err;
      }
      if (rc == 0) {
        SetNonBlocking(s.fd(), false);
        return s;
      }
      last_error = std::strerror(errno);
    }
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw Error(ErrorCode::kTimeout, "cannot connect to " + address.ToString() + ": " + last_error +
                                       " (is the process at that address running and reachable?)");
}

void SetNonBlocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0) throw SysError("fcntl(F_GETFL)");
  flags = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, flags) < 0) throw SysError("fcntl(F_SETFL)");
}

void SetNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void SendAll(int fd, const void* data, size_t len, Deadline deadline, const std::string& peer) {
  auto* p = static_cast<const char*>(data);
  while (len > 0) {
    pollfd pfd{fd, POLLOUT, 0};
    int rc = ::poll(&pfd, 1, MillisUntil(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) throw Error(ErrorCode::kTimeout, "timed out sending to " + peer);
    ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      throw Error(ErrorCode::kPeerLost, "send to " + peer + " failed: " + std::strerror(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

void RecvAll(int fd, void* data, size_t len, Deadline deadline, const std::string& peer) {
  auto* p = static_cast<char*>(data);
  while (len > 0) {
    pollfd pfd{fd, POLLIN, 0};
    int rc = ::poll(&pfd, 1, MillisUntil(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc == 0) throw Error(ErrorCode::kTimeout, "timed out receiving from " + peer);
    ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n == 0) throw Error(ErrorCode::kPeerLost, peer + " closed the connection");
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      throw Error(ErrorCode::kPeerLost,
                  "receive from " + peer + " failed: " + std::strerror(errno));
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
}

std::string PeerAddress(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  return SockaddrToString(ss);
}

}  // namespace cdt::net
