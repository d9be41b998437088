#include "comm/store/tcp_store_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <list>
#include <unordered_map>
#include <vector>

#include "cdt/error.h"
#include "comm/store/store_protocol.h"
#include "common/bytes.h"
#include "common/thread_name.h"

namespace cdt {

using store::MsgType;

namespace {

constexpr auto kAuthWindow = std::chrono::seconds(10);
constexpr size_t kMaxClients = 4096;
constexpr uint32_t kMaxWaitKeys = 65536;

struct Client {
  net::Socket sock;
  std::string peer;
  bool authed = false;
  std::string nonce;
  net::Deadline auth_deadline;
  std::string in;   // bytes received, not yet parsed
  std::string out;  // bytes to send
  size_t out_pos = 0;
  bool closing = false;  // close once `out` is flushed
  // Parked Wait request.
  bool waiting = false;
  std::vector<std::string> wait_keys;
  net::Deadline wait_deadline;
};

void AppendFrame(std::string* out, MsgType type, const std::string& payload) {
  ByteWriter w(out);
  w.U32(static_cast<uint32_t>(payload.size() + 1));
  w.U8(static_cast<uint8_t>(type));
  w.Raw(payload.data(), payload.size());
}

}  // namespace

struct TcpStoreServer::State {
  std::string secret;
  net::Socket listener;
  std::list<Client> clients;
  std::unordered_map<std::string, std::string> data;
};

TcpStoreServer::TcpStoreServer(const std::string& host, uint16_t port, std::string secret)
    : state_(std::make_unique<State>()) {
  state_->secret = std::move(secret);
  state_->listener = net::Listen(host, port, &address_);
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

// Handles one complete request frame. Returns false when the client must be dropped.
bool HandleRequest(std::unordered_map<std::string, std::string>& data, Client& c, MsgType type,
                   std::string_view payload) {
  ByteReader r(payload, "store request");
  std::string reply;
  switch (type) {
    case MsgType::kSet: {
      std::string key = r.Bytes(store::kMaxKeyBytes);
      std::string value = r.Bytes(store::kMaxFrameBytes);
      r.ExpectEnd();
      data[key] = std::move(value);
      AppendFrame(&c.out, MsgType::kOk, "");
      return true;
    }
    case MsgType::kGet: {
      std::string key = r.Bytes(store::kMaxKeyBytes);
      r.ExpectEnd();
      auto it = data.find(key);
      if (it == data.end()) {
        AppendFrame(&c.out, MsgType::kNotFound, "");
      } else {
        ByteWriter(&reply).Bytes(it->second);
        AppendFrame(&c.out, MsgType::kValue, reply);
      }
      return true;
    }
    case MsgType::kWait: {
      uint32_t n = r.U32();
      if (n > kMaxWaitKeys) throw Error(ErrorCode::kProtocol, "too many keys in wait");
      std::vector<std::string> keys;
      for (uint32_t i = 0; i < n; ++i) keys.push_back(r.Bytes(store::kMaxKeyBytes));
      uint64_t ms = r.U64();
      r.ExpectEnd();
      c.waiting = true;
      c.wait_keys = std::move(keys);
      ms = std::min<uint64_t>(ms, 7ull * 24 * 3600 * 1000);
      c.wait_deadline = net::Clock::now() + std::chrono::milliseconds(ms);
      return true;  // answered by the wait sweep
    }
    case MsgType::kAdd: {
      std::string key = r.Bytes(store::kMaxKeyBytes);
      int64_t delta = r.I64();
      r.ExpectEnd();
      int64_t current = 0;
      auto it = data.find(key);
      if (it != data.end()) {
        try {
          current = std::stoll(it->second);
        } catch (...) {
          ByteWriter(&reply).Bytes("key '" + key + "' does not hold an integer");
          AppendFrame(&c.out, MsgType::kError, reply);
          return true;
        }
      }
      current += delta;
      data[key] = std::to_string(current);
      ByteWriter(&reply).I64(current);
      AppendFrame(&c.out, MsgType::kInt, reply);
      return true;
    }
    case MsgType::kCompareSet: {
      std::string key = r.Bytes(store::kMaxKeyBytes);
      std::string expected = r.Bytes(store::kMaxFrameBytes);
      std::string desired = r.Bytes(store::kMaxFrameBytes);
      r.ExpectEnd();
      auto it = data.find(key);
      std::string current = it == data.end() ? std::string() : it->second;
      if (current == expected) {
        data[key] = desired;
        current = desired;
      }
      ByteWriter(&reply).Bytes(current);
      AppendFrame(&c.out, MsgType::kValue, reply);
      return true;
    }
    case MsgType::kDelete:
    case MsgType::kCheck: {
      std::string key = r.Bytes(store::kMaxKeyBytes);
      r.ExpectEnd();
      bool existed = data.count(key) != 0;
      if (type == MsgType::kDelete) data.erase(key);
      ByteWriter(&reply).U8(existed ? 1 : 0);
      AppendFrame(&c.out, MsgType::kBool, reply);
      return true;
    }
    default:
      throw Error(ErrorCode::kProtocol,
                  "unknown store request type " + std::to_string(static_cast<int>(type)));
  }
}

}  // namespace

void TcpStoreServer::Serve() {
  NameThisThread("cdt-store");
  State& s = *state_;
  std::vector<pollfd> pfds;
  std::vector<Client*> order;
  auto reject = [&](Client& c, const std::string& why) {
    rejected_.fetch_add(1);
    std::fprintf(stderr, "cdt store %s: dropped connection from %s: %s\n",
                 address_.ToString().c_str(), c.peer.c_str(), why.c_str());
    c.closing = true;
  };

  while (!stopping_.load()) {
    // Answer parked waits whose keys all exist, or whose deadline passed.
    auto now = net::Clock::now();
    int poll_ms = 1000;
    for (Client& c : s.clients) {
      if (!c.authed && !c.closing && now >= c.auth_deadline) reject(c, "no authentication in time");
      if (!c.waiting) continue;
      bool all = true;
      for (const auto& k : c.wait_keys) all = all && s.data.count(k) != 0;
      if (all || now >= c.wait_deadline) {
        AppendFrame(&c.out, all ? MsgType::kOk : MsgType::kTimeout, "");
        c.waiting = false;
        c.wait_keys.clear();
      } else {
        poll_ms = std::min(poll_ms, net::MillisUntil(c.wait_deadline) + 1);
      }
    }

    pfds.clear();
    order.clear();
    pfds.push_back({s.listener.fd(), POLLIN, 0});
    pfds.push_back({wake_fd_, POLLIN, 0});
    for (Client& c : s.clients) {
      short ev = 0;
      if (!c.closing && !c.waiting) ev |= POLLIN;
      if (c.out_pos < c.out.size()) ev |= POLLOUT;
      pfds.push_back({c.sock.fd(), ev, 0});
      order.push_back(&c);
    }
    int rc = ::poll(pfds.data(), pfds.size(), poll_ms);
    if (rc < 0 && errno != EINTR) break;
    if (rc <= 0) continue;

    if (pfds[0].revents & POLLIN) {
      for (;;) {
        std::string peer;
        net::Socket sock = net::AcceptUntil(s.listener, net::Clock::now(), &peer);
        if (!sock.valid()) break;
        if (s.clients.size() >= kMaxClients) {
          rejected_.fetch_add(1);
          continue;  // closes sock
        }
        net::SetNonBlocking(sock.fd(), true);
        net::SetNoDelay(sock.fd());
        Client& c = s.clients.emplace_back();
        c.sock = std::move(sock);
        c.peer = peer;
        c.nonce = store::RandomBytes(store::kNonceBytes);
        c.auth_deadline = net::Clock::now() + kAuthWindow;
        ByteWriter w(&c.out);
        w.U32(store::kMagic);
        w.U32(store::kVersion);
        w.Raw(c.nonce.data(), c.nonce.size());
      }
    }

    for (size_t i = 0; i < order.size(); ++i) {
      Client& c = *order[i];
      short re = pfds[i + 2].revents;
      if (re & (POLLERR | POLLNVAL)) {
        c.closing = true;
        c.out.clear();
        c.out_pos = 0;
        continue;
      }
      if (re & POLLOUT) {
        ssize_t n =
            ::send(c.sock.fd(), c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
        if (n > 0) c.out_pos += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
          c.closing = true;
          c.out.clear();
          c.out_pos = 0;
        }
        if (c.out_pos == c.out.size()) {
          c.out.clear();
          c.out_pos = 0;
        }
      }
      if (re & (POLLIN | POLLHUP)) {
        char buf[65536];
        ssize_t n = ::recv(c.sock.fd(), buf, sizeof buf, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          c.closing = true;
          c.out.clear();
          c.out_pos = 0;
          continue;
        }
        if (n > 0) c.in.append(buf, static_cast<size_t>(n));
        // Parse every complete frame (clients send one request at a time, but be tolerant).
        try {
          while (!c.closing && !c.waiting && c.in.size() >= 4) {
            uint32_t len;
            std::memcpy(&len, c.in.data(), 4);
            if (len == 0 || len > store::kMaxFrameBytes)
              throw Error(ErrorCode::kProtocol, "frame length " + std::to_string(len) +
                                                    " outside 1.." +
                                                    std::to_string(store::kMaxFrameBytes));
            if (c.in.size() < 4 + static_cast<size_t>(len)) break;
            auto type = static_cast<MsgType>(static_cast<uint8_t>(c.in[4]));
            std::string_view payload(c.in.data() + 5, len - 1);
            if (!c.authed) {
              if (type != MsgType::kAuth ||
                  !store::MacEquals(payload, store::ComputeMac(s.secret, c.nonce))) {
                AppendFrame(&c.out, MsgType::kAuthFailed, "");
                reject(c, "wrong job secret");
              } else {
                c.authed = true;
                AppendFrame(&c.out, MsgType::kOk, "");
              }
            } else {
              HandleRequest(s.data, c, type, payload);
            }
            c.in.erase(0, 4 + static_cast<size_t>(len));
          }
        } catch (const Error& e) {
          std::string msg;
          ByteWriter(&msg).Bytes(e.what());
          AppendFrame(&c.out, MsgType::kError, msg);
          reject(c, e.what());
        }
      }
    }
    // Drop closed clients once their last reply is flushed.
    for (auto it = s.clients.begin(); it != s.clients.end();) {
      if (it->closing && it->out.empty())
        it = s.clients.erase(it);
      else
        ++it;
    }
  }
  s.clients.clear();
  s.listener.Close();
}

}  // namespace cdt
