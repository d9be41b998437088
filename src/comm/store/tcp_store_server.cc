#include "comm/store/tcp_store_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>
#include <new>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/refusal_log.h"
#include "comm/store/store_protocol.h"
#include "comm/store/store_requests.h"
#include "comm/transport/admission.h"
#include "common/bytes.h"
#include "common/thread_name.h"

namespace cdt {

using store::MsgType;

namespace {

constexpr size_t kReadChunk = 64 << 10;
// A refused or failed client whose last reply cannot be flushed is closed after this.
constexpr auto kCloseGrace = std::chrono::seconds(1);
// accept() out of descriptors or memory: stop accepting for this long, then try again.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

struct Client {
  net::Socket sock;
  std::string peer;
  bool authed = false;
  std::string nonce;
  store::FrameAuthenticator frames;  // set at authentication
  net::Deadline auth_deadline;
  std::string in;   // bytes received, not yet parsed (at most one frame)
  std::string out;  // bytes to send
  size_t out_pos = 0;
  bool closing = false;  // close once `out` is flushed, or at close_deadline
  net::Deadline close_deadline;
  // Parked Wait request.
  bool waiting = false;
  std::vector<std::string> wait_keys;
  net::Deadline wait_deadline;
};

// An unsealed frame: only for the handshake's answers.
void AppendPlainFrame(std::string* out, MsgType type, std::string_view payload) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(payload.size() + 1));
  w.U8(static_cast<uint8_t>(type));
  w.Raw(payload.data(), payload.size());
}

}  // namespace

TcpStoreServer::~TcpStoreServer() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void TcpStoreServer::Stop() {
  if (stopping_.exchange(true)) {
    if (thread_.joinable()) thread_.join();
    return;
  }
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

namespace {

// Applies one authenticated request; its reply is sealed into c.out, or the client is parked on
// a wait. Throws cdt::Error for a malformed request (the caller drops the client).
void HandleRequest(std::unordered_map<std::string, std::string>& data, Client& c, MsgType type,
                   std::string_view payload) {
  store::StoreReply reply = store::ApplyStoreRequest(data, type, payload);
  if (!reply.parked) return c.frames.Seal(&c.out, reply.type, reply.payload);
  c.waiting = true;
  c.wait_keys = std::move(reply.wait_keys);
  c.wait_deadline = net::Clock::now() + std::chrono::milliseconds(reply.wait_ms);
}

// Checks a complete auth frame's body (type | client nonce | proof). On success the client is
// authenticated and the server's proof is queued; on failure kAuthFailed is.
bool Authenticate(const std::string& secret, Client& c, std::string_view body) {
  const bool shaped = body.size() == store::kMaxAuthFrameBytes &&
                      static_cast<MsgType>(static_cast<uint8_t>(body[0])) == MsgType::kAuth;
  if (shaped) {
    std::string_view client_nonce = body.substr(1, store::kNonceBytes);
    std::string_view proof = body.substr(1 + store::kNonceBytes, store::kProofBytes);
    store::Handshake h = store::DeriveHandshake(secret, c.nonce, client_nonce);
    if (auth::ConstantTimeEquals(proof, h.client_proof)) {
      c.authed = true;
      c.frames = store::FrameAuthenticator(std::move(h.session_key), /*server=*/true);
      AppendPlainFrame(&c.out, MsgType::kOk, h.server_proof);
      return true;
    }
  }
  AppendPlainFrame(&c.out, MsgType::kAuthFailed, "");
  return false;
}

}  // namespace

namespace {

bool AwaitingAuthentication(const Client& c) { return !c.authed && !c.closing; }

// Whether to read from the client now. Before authentication nothing past the auth frame; after
// it nothing new while a reply is being sent or a wait is parked (clients send one request at a
// time), so a connection's buffers stay bounded by one frame each way.
size_t ReadAllowance(const Client& c) {
  if (c.closing) return 0;
  if (!c.authed) return 4 + store::kMaxAuthFrameBytes - c.in.size();
  if (c.waiting || c.out_pos < c.out.size()) return 0;
  return kReadChunk;
}

}  // namespace

// The serving thread's whole world: the listener, the clients and the key-value map.
class TcpStoreServer::State {
 public:
  State(std::string secret, net::Socket listener, const std::string& where,
        std::atomic<uint64_t>* rejected, const Log& log, size_t max_unauthenticated)
      : secret_(std::move(secret)),
        listener_(std::move(listener)),
        rejected_(rejected),
        log_("cdt store " + where, log),
        max_unauthenticated_(std::max<size_t>(1, max_unauthenticated)) {}

  // Answers waits that are due, refuses clients past their authentication window; returns how
  // long poll may sleep.
  int SweepDeadlines() {
    const auto now = net::Clock::now();
    int poll_ms = 1000;
    for (Client& c : clients_) {
      if (AwaitingAuthentication(c) && now >= c.auth_deadline)
        Reject(c, "no authentication within " + std::to_string(kAuthWindow.count()) + " s");
      if (c.closing) {
        poll_ms = std::min(poll_ms, net::MillisUntil(c.close_deadline) + 1);
        continue;
      }
      if (!c.waiting) continue;
      bool all = true;
      for (const auto& k : c.wait_keys) all = all && data_.count(k) != 0;
      if (all || now >= c.wait_deadline) {
        c.frames.Seal(&c.out, all ? MsgType::kOk : MsgType::kTimeout, "");
        c.waiting = false;
        c.wait_keys.clear();
      } else {
        poll_ms = std::min(poll_ms, net::MillisUntil(c.wait_deadline) + 1);
      }
    }
    if (now < accept_paused_until_)
      poll_ms = std::min(poll_ms, net::MillisUntil(accept_paused_until_) + 1);
    return poll_ms;
  }

  // One pollfd for the listener (-1 while accepting is paused), one for `wake_fd`, then one per
  // client, in the order of `order`.
  void Prepare(int wake_fd, std::vector<pollfd>* pfds, std::vector<Client*>* order) {
    pfds->clear();
    order->clear();
    const bool accepting = net::Clock::now() >= accept_paused_until_;
    pfds->push_back({accepting ? listener_.fd() : -1, POLLIN, 0});
    pfds->push_back({wake_fd, POLLIN, 0});
    for (Client& c : clients_) {
      short ev = 0;
      if (!c.closing) ev |= POLLRDHUP | (ReadAllowance(c) > 0 ? POLLIN : 0);
      if (c.out_pos < c.out.size()) ev |= POLLOUT;
      pfds->push_back({c.sock.fd(), ev, 0});
      order->push_back(&c);
    }
  }

  // What poll reported for one client.
  void Serve(Client& c, short revents) {
    try {
      if (revents & (POLLERR | POLLNVAL)) return Close(c, /*flush=*/false);
      if (revents & POLLOUT) ServeOutput(c);
      if (c.closing) return;
      if (revents & POLLIN)
        ServeInput(c);
      else if (revents & (POLLHUP | POLLRDHUP))
        Close(c, /*flush=*/false);  // gone while we were not reading from it
    } catch (const std::bad_alloc&) {
      // Serving this client needed memory there is none of: drop it, keep everyone else.
      rejected_->fetch_add(1);
      Close(c, /*flush=*/false);
      c.in = std::string();
      log_.Say("dropped connection from " + c.peer + ": out of memory serving it");
    }
  }

  void AcceptNew() {
    try {
      AcceptPending();
    } catch (const std::bad_alloc&) {
      accept_paused_until_ = net::Clock::now() + kAcceptBackoff;
      log_.Say("refused connections: out of memory; retrying shortly");
    }
  }

  // Drops closed clients once their last reply is flushed, or their grace has passed.
  void DropClosed() {
    const auto now = net::Clock::now();
    for (auto it = clients_.begin(); it != clients_.end();) {
      if (it->closing && (it->out_pos >= it->out.size() || now >= it->close_deadline))
        it = clients_.erase(it);
      else
        ++it;
    }
  }

  void Log(const std::string& what) { log_.Say(what); }

  // When the server stops: every connection and the listener close at once.
  void Shutdown() {
    clients_.clear();
    listener_.Close();
  }

 private:
  void Close(Client& c, bool flush) {
    if (c.closing) return;
    c.closing = true;
    c.close_deadline = net::Clock::now() + kCloseGrace;
    if (!flush) {
      c.out.clear();
      c.out_pos = 0;
    }
  }

  void Reject(Client& c, const std::string& why) {
    rejected_->fetch_add(1);
    log_.Say("dropped connection from " + c.peer + ": " + why);
    Close(c, /*flush=*/true);
  }

  void AcceptPending() {
    for (;;) {
      int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return;
        if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EPERM) continue;
        // Out of descriptors or memory: the pending connections stay queued in the kernel (and
        // keep the listener readable), so stop polling it for a moment instead of spinning.
        accept_paused_until_ = net::Clock::now() + kAcceptBackoff;
        rejected_->fetch_add(1);
        log_.Say(std::string("refused connections: accept failed (") + std::strerror(err) + "); " +
                 (err == EMFILE || err == ENFILE
                      ? "raise the open-files limit (ulimit -n) of the process hosting the store"
                      : "retrying shortly"));
        return;
      }
      net::Socket sock(fd);
      if (clients_.size() >= kMaxClients) {
        rejected_->fetch_add(1);
        log_.Say("refused a connection: " + std::to_string(kMaxClients) + " clients already");
        continue;  // closes sock
      }
      const size_t waiting =
          static_cast<size_t>(std::count_if(clients_.begin(), clients_.end(), [](const Client& c) {
            return AwaitingAuthentication(c);
          }));
      if (waiting >= max_unauthenticated_) {
        // Make room: the oldest of the address holding the most unauthenticated connections (a
        // flooding host evicts its own first: comm/transport/admission.h).
        auto victim = net::ChooseEviction(
            clients_.begin(), clients_.end(),
            [](const Client& c) -> const std::string& { return c.peer; },
            [](const Client& c) { return AwaitingAuthentication(c); });
        rejected_->fetch_add(1);
        log_.Say("dropped the oldest of " + std::to_string(waiting) +
                 " unauthenticated connections from " + std::string(net::SourceHost(victim->peer)) +
                 ", the address holding the most, to make room");
        Close(*victim, /*flush=*/false);
      }
      net::SetNoDelay(sock.fd());
      Client& c = clients_.emplace_back();
      c.sock = std::move(sock);
      c.peer = net::PeerAddress(c.sock.fd());
      c.nonce = auth::RandomBytes(store::kNonceBytes);
      c.auth_deadline = net::Clock::now() + kAuthWindow;
      ByteWriter w(&c.out);
      w.U32(store::kMagic);
      w.U32(store::kVersion);
      w.Raw(c.nonce.data(), c.nonce.size());
    }
  }

  // Reads what the client sent and handles every complete frame.
  void ServeInput(Client& c) {
    const size_t want = ReadAllowance(c);
    if (want > 0) {
      char buf[kReadChunk];
      ssize_t n = ::recv(c.sock.fd(), buf, std::min(want, sizeof buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return Close(c, false);
      if (n > 0) c.in.append(buf, static_cast<size_t>(n));
    }
    try {
      while (!c.closing && !c.waiting && c.in.size() >= 4) {
        uint32_t len;
        std::memcpy(&len, c.in.data(), 4);
        if (!c.authed && len != store::kMaxAuthFrameBytes) {
          AppendPlainFrame(&c.out, MsgType::kAuthFailed, "");
          return Reject(c, "a " + std::to_string(len) +
                               "-byte frame before authentication (only the " +
                               std::to_string(store::kMaxAuthFrameBytes) + "-byte auth frame is)");
        }
        if (c.authed && (len < 1 + store::kFrameMacBytes ||
                         len > store::kMaxFrameBytes + 1 + store::kFrameMacBytes))
          throw Error(ErrorCode::kProtocol,
                      "frame length " + std::to_string(len) + " outside the protocol's bounds");
        if (c.in.size() < 4 + static_cast<size_t>(len)) {
          c.in.reserve(4 + static_cast<size_t>(len));  // one frame, bounded above
          return;
        }
        std::string_view body(c.in.data() + 4, len);
        if (!c.authed) {
          if (!Authenticate(secret_, c, body)) return Reject(c, "wrong job secret");
        } else {
          MsgType type;
          std::string_view payload = c.frames.Open(body, &type);
          HandleRequest(data_, c, type, payload);
        }
        c.in.erase(0, 4 + static_cast<size_t>(len));
      }
      if (c.in.empty()) c.in.shrink_to_fit();  // a large Set's frame is not kept per connection
    } catch (const Error& e) {
      if (c.frames.ready() && e.code() != ErrorCode::kAuth) {
        std::string msg;
        ByteWriter(&msg).Bytes(e.what());
        c.frames.Seal(&c.out, MsgType::kError, msg);
      }
      Reject(c, e.what());
    }
  }

  void ServeOutput(Client& c) {
    ssize_t n =
        ::send(c.sock.fd(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) c.out_pos += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EINTR) Close(c, /*flush=*/false);
    if (c.out_pos >= c.out.size()) {
      c.out.clear();
      c.out_pos = 0;
      if (c.out.capacity() > kReadChunk) c.out.shrink_to_fit();  // a large Get's reply
    }
  }

  const std::string secret_;
  net::Socket listener_;
  std::atomic<uint64_t>* rejected_;
  RefusalLog log_;
  const size_t max_unauthenticated_;
  std::list<Client> clients_;  // in accept order
  std::unordered_map<std::string, std::string> data_;
  net::Deadline accept_paused_until_{};
};

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, std::string secret, Log log,
                               size_t max_unauthenticated) {
  net::Socket listener = net::Listen(host, port, &address_, 1024);
  net::SetNonBlocking(listener.fd(), true);
  state_ = std::make_unique<State>(std::move(secret), std::move(listener), address_.ToString(),
                                   &rejected_, log, max_unauthenticated);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { Serve(); });
}

void TcpStoreServer::Serve() {
  NameThisThread("cdt-store");
  State& s = *state_;
  std::vector<pollfd> pfds;
  std::vector<Client*> order;
  while (!stopping_.load()) {
    const int poll_ms = s.SweepDeadlines();
    s.Prepare(wake_fd_, &pfds, &order);
    const int rc = ::poll(pfds.data(), pfds.size(), poll_ms);
    if (rc < 0 && errno != EINTR) {
      s.Log(std::string("poll failed (") + std::strerror(errno) + "); retrying");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (rc > 0) {
      for (size_t i = 0; i < order.size(); ++i) s.Serve(*order[i], pfds[i + 2].revents);
      if (pfds[0].revents & POLLIN) s.AcceptNew();
    }
    s.DropClosed();
  }
  s.Shutdown();
}

}  // namespace cdt
