#include "comm/store/tcp_store_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

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

struct TcpStoreServer::State {
  std::string secret;
  net::Socket listener;
  std::list<Client> clients;  // in accept order
  std::unordered_map<std::string, std::string> data;
  net::Deadline accept_paused_until{};
};

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, std::string secret)
    : state_(std::make_unique<State>()) {
  state_->secret = std::move(secret);
  state_->listener = net::Listen(host, port, &address_, 1024);
  net::SetNonBlocking(state_->listener.fd(), true);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + std::strerror(errno));
  thread_ = std::thread([this] { Serve(); });
}

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

void TcpStoreServer::Serve() {
  NameThisThread("cdt-store");
  State& s = *state_;
  RefusalLog log("cdt store " + address_.ToString());
  std::vector<pollfd> pfds;
  std::vector<Client*> order;
  auto close_client = [&](Client& c, bool flush) {
    if (c.closing) return;
    c.closing = true;
    c.close_deadline = net::Clock::now() + kCloseGrace;
    if (!flush) {
      c.out.clear();
      c.out_pos = 0;
    }
  };
  auto reject = [&](Client& c, const std::string& why) {
    rejected_.fetch_add(1);
    log.Say("dropped connection from " + c.peer + ": " + why);
    close_client(c, /*flush=*/true);
  };

  auto accept_new = [&] {
    for (;;) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = ::accept4(s.listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                         SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        const int err = errno;
        if (err == EAGAIN || err == EWOULDBLOCK) return;
        if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EPERM) continue;
        // Out of descriptors or memory: the pending connections stay queued in the kernel (and
        // keep the listener readable), so stop polling it for a moment instead of spinning.
        s.accept_paused_until = net::Clock::now() + kAcceptBackoff;
        rejected_.fetch_add(1);
        log.Say(std::string("refused connections: accept failed (") + std::strerror(err) + "); " +
                (err == EMFILE || err == ENFILE
                     ? "raise the open-files limit (ulimit -n) of the process hosting the store"
                     : "retrying shortly"));
        return;
      }
      net::Socket sock(fd);
      if (s.clients.size() >= kMaxClients) {
        rejected_.fetch_add(1);
        log.Say("refused a connection: " + std::to_string(kMaxClients) + " clients already");
        continue;  // closes sock
      }
      size_t waiting = 0;
      Client* oldest = nullptr;
      for (Client& c : s.clients)
        if (AwaitingAuthentication(c) && waiting++ == 0) oldest = &c;
      if (waiting >= kMaxUnauthenticated) {
        // Make room: the oldest has had the longest to prove itself.
        rejected_.fetch_add(1);
        log.Say("dropped the oldest of " + std::to_string(waiting) +
                " unauthenticated connections (from " + oldest->peer + ") to make room");
        close_client(*oldest, /*flush=*/false);
      }
      net::SetNoDelay(sock.fd());
      Client& c = s.clients.emplace_back();
      c.sock = std::move(sock);
      c.peer = net::PeerAddress(c.sock.fd());
      c.nonce = auth::RandomBytes(store::kNonceBytes);
      c.auth_deadline = net::Clock::now() + kAuthWindow;
      ByteWriter w(&c.out);
      w.U32(store::kMagic);
      w.U32(store::kVersion);
      w.Raw(c.nonce.data(), c.nonce.size());
    }
  };

  // Reads what the client sent and handles every complete frame.
  auto serve_input = [&](Client& c) {
    const size_t want = ReadAllowance(c);
    if (want > 0) {
      char buf[kReadChunk];
      ssize_t n = ::recv(c.sock.fd(), buf, std::min(want, sizeof buf), 0);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        close_client(c, /*flush=*/false);
        return;
      }
      if (n > 0) c.in.append(buf, static_cast<size_t>(n));
    }
    try {
      while (!c.closing && !c.waiting && c.in.size() >= 4) {
        uint32_t len;
        std::memcpy(&len, c.in.data(), 4);
        if (!c.authed && len != store::kMaxAuthFrameBytes) {
          AppendPlainFrame(&c.out, MsgType::kAuthFailed, "");
          return reject(c, "a " + std::to_string(len) +
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
          if (!Authenticate(s.secret, c, body)) return reject(c, "wrong job secret");
        } else {
          MsgType type;
          std::string_view payload = c.frames.Open(body, &type);
          HandleRequest(s.data, c, type, payload);
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
      reject(c, e.what());
    }
  };

  auto serve_output = [&](Client& c) {
    ssize_t n =
        ::send(c.sock.fd(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
    if (n > 0) c.out_pos += static_cast<size_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EINTR) close_client(c, /*flush=*/false);
    if (c.out_pos >= c.out.size()) {
      c.out.clear();
      c.out_pos = 0;
      if (c.out.capacity() > kReadChunk) c.out.shrink_to_fit();  // a large Get's reply
    }
  };

  while (!stopping_.load()) {
    // Deadlines: authentication, parked waits, closing clients.
    auto now = net::Clock::now();
    int poll_ms = 1000;
    for (Client& c : s.clients) {
      if (AwaitingAuthentication(c) && now >= c.auth_deadline)
        reject(c, "no authentication within " + std::to_string(kAuthWindow.count()) + " s");
      if (c.closing) {
        poll_ms = std::min(poll_ms, net::MillisUntil(c.close_deadline) + 1);
        continue;
      }
      if (!c.waiting) continue;
      bool all = true;
      for (const auto& k : c.wait_keys) all = all && s.data.count(k) != 0;
      if (all || now >= c.wait_deadline) {
        c.frames.Seal(&c.out, all ? MsgType::kOk : MsgType::kTimeout, "");
        c.waiting = false;
        c.wait_keys.clear();
      } else {
        poll_ms = std::min(poll_ms, net::MillisUntil(c.wait_deadline) + 1);
      }
    }
    const bool accepting = now >= s.accept_paused_until;
    if (!accepting) poll_ms = std::min(poll_ms, net::MillisUntil(s.accept_paused_until) + 1);

    pfds.clear();
    order.clear();
    pfds.push_back({accepting ? s.listener.fd() : -1, POLLIN, 0});
    pfds.push_back({wake_fd_, POLLIN, 0});
    for (Client& c : s.clients) {
      short ev = 0;
      if (!c.closing) ev |= POLLRDHUP | (ReadAllowance(c) > 0 ? POLLIN : 0);
      if (c.out_pos < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.sock.fd(), ev, 0});
      order.push_back(&c);
    }
    int rc = ::poll(pfds.data(), pfds.size(), poll_ms);
    if (rc < 0 && errno != EINTR) {
      log.Say(std::string("poll failed (") + std::strerror(errno) + "); retrying");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (rc > 0) {
      for (size_t i = 0; i < order.size(); ++i) {
        Client& c = *order[i];
        const short re = pfds[i + 2].revents;
        try {
          if (re & (POLLERR | POLLNVAL)) {
            close_client(c, /*flush=*/false);
            continue;
          }
          if (re & POLLOUT) serve_output(c);
          if (c.closing) continue;
          if (re & POLLIN)
            serve_input(c);
          else if (re & (POLLHUP | POLLRDHUP))
            close_client(c, /*flush=*/false);  // gone while we were not reading from it
        } catch (const std::bad_alloc&) {
          // Serving this client needed memory there is none of: drop it, keep everyone else.
          rejected_.fetch_add(1);
          close_client(c, /*flush=*/false);
          c.in = std::string();
          log.Say("dropped connection from " + c.peer + ": out of memory serving it");
        }
      }
      if (pfds[0].revents & POLLIN) {
        try {
          accept_new();
        } catch (const std::bad_alloc&) {
          s.accept_paused_until = net::Clock::now() + kAcceptBackoff;
          log.Say("refused connections: out of memory; retrying shortly");
        }
      }
    }
    // Drop closed clients once their last reply is flushed, or their grace has passed.
    now = net::Clock::now();
    for (auto it = s.clients.begin(); it != s.clients.end();) {
      if (it->closing && (it->out_pos >= it->out.size() || now >= it->close_deadline))
        it = s.clients.erase(it);
      else
        ++it;
    }
  }
  s.clients.clear();
  s.listener.Close();
}

}  // namespace cdt
