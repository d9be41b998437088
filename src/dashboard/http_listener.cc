#include "dashboard/http_listener.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <system_error>
#include <vector>

#include "cdt/error.h"
#include "dashboard/tls_context.h"

namespace cdt::dashboard {

namespace {

using Clock = std::chrono::steady_clock;

// After an answer, the client may still be sending (a body refused unread): closing now would
// reset the connection and could destroy the answer before the client reads it. So the write
// side is closed and what arrives is thrown away — into a fixed buffer, at most 64 KiB and half
// a second — before the descriptor is.
void Linger(int fd) {
  ::shutdown(fd, SHUT_WR);
  const Deadline until = Clock::now() + std::chrono::milliseconds(500);
  char sink[4096];
  for (size_t drained = 0; drained < (64u << 10);) {
    const ssize_t n = ::recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    if (n > 0) {
      drained += static_cast<size_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ||
               !WaitForSocket(fd, POLLIN, until)) {
      return;
    }
  }
}

// A listening socket on `bind`:`port`, or -1 with `why` set.
int ListenOn(const std::string& bind, int port, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int gai = ::getaddrinfo(bind.empty() ? nullptr : bind.c_str(), std::to_string(port).c_str(),
                                &hints, &found);
  if (gai != 0) {
    *why = ::gai_strerror(gai);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 64) != 0) {
      *why = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage a{};
  socklen_t n = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) != 0) return -1;
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

}  // namespace

HttpListener::HttpListener(ListenerOptions options, const TlsContext* tls, HeadScreen screen,
                           Handler handle)
    : o_(std::move(options)), tls_(tls), screen_(std::move(screen)), handle_(std::move(handle)) {}

HttpListener::~HttpListener() { Stop(); }

void HttpListener::Start() {
  std::string why;
  listen_fd_ = ListenOn(o_.bind, o_.port, &why);
  if (listen_fd_ < 0)
    throw Error(ErrorCode::kIo,
                "dashboard: cannot listen on " + o_.bind + ":" + std::to_string(o_.port) + ": " +
                    why + (o_.port == 0 ? "" : " (in use? give --port, or 0 for any free one)"));
  port_ = BoundPort(listen_fd_);
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw Error(ErrorCode::kIo, std::string("dashboard: pipe: ") + std::strerror(errno));
  }
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

void HttpListener::AcceptLoop() {
  // A write to a client that went away must fail with EPIPE, not kill the process: OpenSSL writes
  // without MSG_NOSIGNAL. Connection threads inherit the mask.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  while (!stopping_.load()) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    const int r = ::poll(p, 2, 200);
    ReapFinished();
    if (r <= 0) continue;
    if (p[1].revents != 0) break;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(fd);
    } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      // Out of descriptors or memory: the pending connection stays queued; try again shortly.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

void HttpListener::Admit(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t open =
      static_cast<size_t>(std::count_if(connections_.begin(), connections_.end(),
                                        [](const Connection& c) { return !c.done && !c.evicted; }));
  if (open >= o_.max_connections) {
    Connection* oldest = nullptr;
    for (Connection& c : connections_)
      if (c.evictable && !c.evicted && c.fd >= 0 && (!oldest || c.accepted < oldest->accepted))
        oldest = &c;
    if (!oldest || connections_.size() >= 2 * o_.max_connections) {
      ::close(fd);
      return;
    }
    ::shutdown(oldest->fd, SHUT_RDWR);  // its thread sees the end and closes it
    oldest->evicted = true;
  }
  Connection& c = connections_.emplace_back();
  c.fd = fd;
  c.accepted = Clock::now();
  try {
    c.thread = std::thread([this, &c] { Serve(&c); });
  } catch (const std::system_error&) {  // no thread to be had (a thread or memory limit)
    ::close(fd);
    connections_.pop_back();
  }
}

void HttpListener::Serve(Connection* c) {
  std::unique_ptr<ByteChannel> channel;
  if (tls_)
    channel = tls_->Accept(c->fd, c->accepted + o_.request_deadline);
  else
    channel = std::make_unique<PlainChannel>(c->fd);
  if (channel) {
    Converse(c, *channel);
    channel.reset();  // TLS state freed before the descriptor is closed
    Linger(c->fd);
  }
  std::lock_guard<std::mutex> lock(mu_);
  ::close(c->fd);
  c->fd = -1;
  c->done = true;
}

void HttpListener::Converse(Connection* c, ByteChannel& channel) {
  const Deadline deadline = c->accepted + o_.request_deadline;
  HttpRequestReader reader(o_.limits, screen_);
  char buf[4096];
  while (reader.state() == HttpRequestReader::State::kNeedMore) {
    const size_t n = channel.Read(buf, sizeof buf, deadline);
    if (n == 0) break;
    reader.Feed(std::string_view(buf, n));
  }
  // From here on the connection is answered, not evicted; one evicted while its last bytes came
  // in gets no answer (and its request no action).
  if (!SetEvictable(c, false)) return;
  HttpResponse response;
  bool head_only = false;
  switch (reader.state()) {
    case HttpRequestReader::State::kNeedMore:
      // The client left, or its request did not arrive whole in time (a slow client).
      if (!reader.started() || Clock::now() < deadline) return;
      response = HttpJsonError(408, "the request did not arrive whole within " +
                                        std::to_string(o_.request_deadline.count()) + " ms");
      break;
    case HttpRequestReader::State::kRefused:
      response = reader.refusal();
      break;
    case HttpRequestReader::State::kComplete:
      head_only = reader.request().method == "HEAD";
      try {
        response = handle_(reader.request());
      } catch (const std::exception& e) {
        response = HttpJsonError(500, std::string("the dashboard failed: ") + e.what());
      }
      break;
  }
  const Deadline write_by = Clock::now() + o_.response_deadline;
  if (channel.Write(SerializeResponse(response, head_only), write_by))
    channel.Finish(std::min(write_by, Clock::now() + std::chrono::seconds(1)));
  SetEvictable(c, true);
}

bool HttpListener::SetEvictable(Connection* c, bool evictable) {
  std::lock_guard<std::mutex> lock(mu_);
  c->evictable = evictable;
  return !c->evicted;
}

void HttpListener::ReapFinished() {
  std::vector<std::thread> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = connections_.begin(); it != connections_.end();) {
      if (it->done) {
        finished.push_back(std::move(it->thread));
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (std::thread& t : finished) t.join();
}

void HttpListener::Stop() {
  if (!accept_thread_.joinable()) return;
  stopping_.store(true);
  const char wake = 1;
  if (::write(wake_[1], &wake, 1) < 0) {
    // The pipe is full or gone: the accept loop still sees stopping_ within its poll interval.
  }
  accept_thread_.join();
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Connection& c : connections_) {
      if (c.fd >= 0) ::shutdown(c.fd, SHUT_RDWR);
      threads.push_back(std::move(c.thread));
    }
  }
  for (std::thread& t : threads)
    if (t.joinable()) t.join();
  std::lock_guard<std::mutex> lock(mu_);
  connections_.clear();
  ::close(listen_fd_);
  ::close(wake_[0]);
  ::close(wake_[1]);
  listen_fd_ = wake_[0] = wake_[1] = -1;
}

}  // namespace cdt::dashboard
