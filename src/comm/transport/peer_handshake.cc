#include "comm/transport/peer_handshake.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/refusal_log.h"

namespace cdt::handshake {

std::string GenerationKey(const std::string& secret, const std::string& key_prefix,
                          const std::string& token) {
  return auth::Hmac(auth::KeyFromSecret(secret), {"cdt-mesh-v3", key_prefix, token});
}

namespace {
std::string_view Bytes(const Hello& h) {
  return std::string_view(reinterpret_cast<const char*>(&h), sizeof h);
}
const char* StatusText(uint32_t status) {
  switch (status) {
    case kOk:
      return "ok";
    case kBadProof:
      return "bad proof";
    case kBadRank:
      return "bad rank, channel or a duplicate";
    case kBadVersion:
      return "bad magic or version";
  }
  return "unknown status";
}
}  // namespace

std::string ListenerProof(const std::string& key, const Hello& hello, const char* listener_nonce) {
  return auth::Hmac(key, {"listener", Bytes(hello), std::string_view(listener_nonce, kNonceBytes)});
}

std::string DialerProof(const std::string& key, const Hello& hello, const char* listener_nonce) {
  return auth::Hmac(key, {"dialer", Bytes(hello), std::string_view(listener_nonce, kNonceBytes)});
}

Status CheckHello(const Hello& h, int rank, int size, int channels) {
  if (h.magic != kMagic || h.version != kVersion) return kBadVersion;
  if (h.to_rank != static_cast<uint32_t>(rank) || h.from_rank == h.to_rank ||
      h.from_rank >= static_cast<uint32_t>(size) || h.channel >= static_cast<uint32_t>(channels) ||
      h.reserved != 0)
    return kBadRank;
  return kOk;
}

Status AnswerChallenge(const std::string& key, const Hello& hello, const Challenge& ch,
                       std::string* proof, uint32_t* refused) {
  if (ch.magic != kMagic) return kBadVersion;
  if (ch.status != kOk) {
    *refused = ch.status;
    return kBadRank;
  }
  if (!auth::ConstantTimeEquals(std::string_view(ch.proof, kProofBytes),
                                ListenerProof(key, hello, ch.nonce)))
    return kBadProof;
  *proof = DialerProof(key, hello, ch.nonce);
  return kOk;
}

Status CheckProof(const std::string& key, const Hello& hello, const char* listener_nonce,
                  const char* proof) {
  return auth::ConstantTimeEquals(std::string_view(proof, kProofBytes),
                                  DialerProof(key, hello, listener_nonce))
             ? kOk
             : kBadProof;
}

namespace {

// Non-blocking I/O on one handshake connection: a small output queue and a fixed-size input.
struct Conn {
  net::Socket* sock = nullptr;
  std::string out;
  size_t out_pos = 0;
  char in[sizeof(Challenge)] = {};
  size_t have = 0;

  // Sends what is queued. Returns false if the connection failed.
  bool Flush() {
    while (out_pos < out.size()) {
      ssize_t n = ::send(sock->fd(), out.data() + out_pos, out.size() - out_pos,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_pos += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
      return false;
    }
    return true;
  }
  // Reads toward `need` bytes. Returns 1 when they are all there, 0 for more later, -1 if the
  // peer closed or failed.
  int Fill(size_t need) {
    while (have < need) {
      ssize_t n = ::recv(sock->fd(), in + have, need - have, MSG_DONTWAIT);
      if (n > 0) {
        have += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
      return -1;
    }
    return 1;
  }
  void Queue(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  bool flushed() const { return out_pos >= out.size(); }
};

struct Outgoing {
  int slot = -1, peer = -1;
  Hello hello{};
  Conn io;
  enum { kAwaitChallenge, kAwaitAck, kDone } state = kAwaitChallenge;
};

struct Incoming {
  net::Socket sock;
  std::string from;
  Hello hello{};
  char nonce[kNonceBytes] = {};
  Conn io;
  enum { kAwaitHello, kAwaitProof, kClosing, kAccepted } state = kAwaitHello;
};

}  // namespace

std::vector<net::Socket> RunHandshakes(const MeshLinks& l, std::vector<net::Socket>& dialed,
                                       const net::Socket& listener, net::Deadline deadline) {
  const size_t slots = static_cast<size_t>(l.channels) * static_cast<size_t>(l.size);
  std::vector<net::Socket> accepted(slots);
  auto peer_at = [&](int peer) {
    return "rank " + std::to_string(peer) + " at " + l.addresses[static_cast<size_t>(peer)];
  };
  auto fail = [&](ErrorCode code, int peer, const std::string& what) {
    throw Error(code, l.who + ": " + peer_at(peer) + " " + what,
                {l.rank, peer, l.addresses[static_cast<size_t>(peer)], "connect", 0});
  };

  std::vector<Outgoing> out;
  for (size_t slot = 0; slot < slots; ++slot) {
    if (!dialed[slot].valid()) continue;
    Outgoing& o = out.emplace_back();
    o.slot = static_cast<int>(slot);
    o.peer = static_cast<int>(slot % static_cast<size_t>(l.size));
    o.hello = Hello{kMagic,
                    kVersion,
                    static_cast<uint32_t>(l.rank),
                    static_cast<uint32_t>(o.peer),
                    static_cast<uint32_t>(slot / static_cast<size_t>(l.size)),
                    0,
                    {}};
    const std::string nonce = auth::RandomBytes(kNonceBytes);
    std::memcpy(o.hello.nonce, nonce.data(), kNonceBytes);
    o.io.sock = &dialed[slot];
    net::SetNonBlocking(o.io.sock->fd(), true);
    o.io.Queue(&o.hello, sizeof o.hello);
  }

  net::SetNonBlocking(listener.fd(), true);  // accepted below until EAGAIN
  const int expected = l.channels * (l.size - 1);
  int done_in = 0;
  size_t done_out = 0;
  std::list<Incoming> in;
  std::vector<pollfd> pfds;
  net::Deadline accept_paused_until{};

  RefusalLog log("cdt " + l.who);
  auto refuse = [&](Incoming& c, const std::string& why) {
    log.Say("refused connection from " + c.from + ": " + why);
    c.state = Incoming::kClosing;
  };
  std::vector<char> claimed(slots, 0);  // a proven connection holds its slot from then on

  while (done_in < expected || done_out < out.size()) {
    const auto now = net::Clock::now();
    if (now >= deadline) {
      std::string missing_in, missing_out;
      std::vector<char> from(static_cast<size_t>(l.size), 0);
      for (size_t slot = 0; slot < slots; ++slot)
        if (!accepted[slot].valid() && static_cast<int>(slot % l.size) != l.rank)
          from[slot % static_cast<size_t>(l.size)] = 1;
      for (int r = 0; r < l.size; ++r)
        if (from[static_cast<size_t>(r)])
          missing_in += (missing_in.empty() ? "" : ", ") + std::to_string(r);
      for (const auto& o : out)
        if (o.state != Outgoing::kDone)
          missing_out += (missing_out.empty() ? "" : ", ") + std::to_string(o.peer);
      throw Error(
          ErrorCode::kTimeout,
          l.who + ": the mesh of " + l.label + " did not form within the timeout: " +
              (missing_in.empty() ? ""
                                  : "no proven connection yet from rank(s) [" + missing_in + "]") +
              (missing_in.empty() || missing_out.empty() ? "" : "; ") +
              (missing_out.empty() ? "" : "no answer yet from rank(s) [" + missing_out + "]") +
              "; those processes are stopped, slow, or unreachable",
          {l.rank, -1, "", "connect", 0});
    }
    pfds.clear();
    const bool accepting = now >= accept_paused_until;
    pfds.push_back({accepting ? listener.fd() : -1, POLLIN, 0});
    for (auto& o : out)
      pfds.push_back({o.state == Outgoing::kDone ? -1 : o.io.sock->fd(),
                      static_cast<short>(POLLIN | (o.io.flushed() ? 0 : POLLOUT)), 0});
    for (auto& c : in)
      pfds.push_back({c.sock.fd(), static_cast<short>(POLLIN | (c.io.flushed() ? 0 : POLLOUT)), 0});
    int wait_ms = std::min(net::MillisUntil(deadline), 100);
    if (::poll(pfds.data(), pfds.size(), wait_ms) < 0 && errno != EINTR)
      throw Error(ErrorCode::kIo, l.who + ": poll: " + std::strerror(errno));

    // Our connections to the peers.
    for (size_t i = 0; i < out.size(); ++i) {
      Outgoing& o = out[i];
      if (o.state == Outgoing::kDone || pfds[1 + i].revents == 0) continue;
      if (!o.io.Flush())
        fail(ErrorCode::kPeerLost, o.peer, "reset the connection during the handshake");
      const size_t need = o.state == Outgoing::kAwaitChallenge ? sizeof(Challenge) : sizeof(Ack);
      const int got = o.io.Fill(need);
      if (got < 0)
        fail(ErrorCode::kPeerLost, o.peer,
             "closed the connection during the handshake: it died, or it belongs to another "
             "generation or job and refused us");
      if (got == 0) continue;
      o.io.have = 0;
      if (o.state == Outgoing::kAwaitChallenge) {
        Challenge ch;
        std::memcpy(&ch, o.io.in, sizeof ch);
        std::string proof;
        uint32_t refused = kOk;
        const Status verdict = AnswerChallenge(l.key, o.hello, ch, &proof, &refused);
        if (verdict == kBadVersion)
          fail(ErrorCode::kProtocol, o.peer, "is not a cann-dist-train peer (bad magic)");
        if (verdict == kBadRank)
          fail(ErrorCode::kAuth, o.peer,
               std::string("refused our hello (") + StatusText(refused) +
                   "); it is not the process this rank expects there");
        if (verdict != kOk)
          fail(ErrorCode::kAuth, o.peer,
               "could not prove it belongs to " + l.label +
                   ": a process of another generation or job holds that address, or one that "
                   "does not know the job secret");
        o.io.Queue(proof.data(), proof.size());
        if (!o.io.Flush())
          fail(ErrorCode::kPeerLost, o.peer, "reset the connection during the handshake");
        o.state = Outgoing::kAwaitAck;
      } else {
        Ack ack;
        std::memcpy(&ack, o.io.in, sizeof ack);
        if (ack.magic != kMagic || ack.status != kOk)
          fail(ErrorCode::kAuth, o.peer,
               std::string("refused our proof (") + StatusText(ack.status) +
                   "); do all ranks have the same CDT_JOB_SECRET?");
        o.state = Outgoing::kDone;
        ++done_out;
      }
    }

    // The peers' connections to us.
    size_t k = 1 + out.size();
    for (auto it = in.begin(); it != in.end(); ++k) {
      Incoming& c = *it;
      const short re = pfds[k].revents;
      if (re != 0 && c.state != Incoming::kAccepted) {
        if (!c.io.Flush()) {
          c.state = Incoming::kClosing;
          c.io.out.clear();
        } else if (c.state == Incoming::kAwaitHello || c.state == Incoming::kAwaitProof) {
          const size_t need = c.state == Incoming::kAwaitHello ? sizeof(Hello) : kProofBytes;
          const int got = c.io.Fill(need);
          if (got < 0) {
            c.state = Incoming::kClosing;  // gone before proving anything: nothing to say
            c.io.out.clear();
          } else if (got > 0 && c.state == Incoming::kAwaitHello) {
            std::memcpy(&c.hello, c.io.in, sizeof c.hello);
            c.io.have = 0;
            Challenge ch{kMagic, CheckHello(c.hello, l.rank, l.size, l.channels), {}, {}};
            if (ch.status == kOk) {
              const std::string nonce = auth::RandomBytes(kNonceBytes);
              std::memcpy(c.nonce, nonce.data(), kNonceBytes);
              std::memcpy(ch.nonce, c.nonce, kNonceBytes);
              const std::string proof = ListenerProof(l.key, c.hello, c.nonce);
              std::memcpy(ch.proof, proof.data(), kProofBytes);
              c.state = Incoming::kAwaitProof;
            } else {
              refuse(c, StatusText(ch.status));
            }
            c.io.Queue(&ch, sizeof ch);
            c.io.Flush();
          } else if (got > 0) {
            c.io.have = 0;
            Ack ack{kMagic, kOk};
            const size_t slot = static_cast<size_t>(c.hello.channel) * l.size + c.hello.from_rank;
            if (CheckProof(l.key, c.hello, c.nonce, c.io.in) != kOk) {
              ack.status = kBadProof;
              refuse(c, "its proof does not match (another generation or job, or not ours)");
            } else if (claimed[slot]) {
              ack.status = kBadRank;
              refuse(c, "a second connection from rank " + std::to_string(c.hello.from_rank));
            } else {
              claimed[slot] = 1;
              c.state = Incoming::kAccepted;
            }
            c.io.Queue(&ack, sizeof ack);
            c.io.Flush();
          }
        }
      }
      // An accepted connection is handed over once its Ack is out; a refused one closes then.
      if (c.state == Incoming::kAccepted && c.io.flushed()) {
        const size_t slot = static_cast<size_t>(c.hello.channel) * l.size + c.hello.from_rank;
        accepted[slot] = std::move(c.sock);
        ++done_in;
        it = in.erase(it);
      } else if (c.state == Incoming::kClosing && c.io.flushed()) {
        it = in.erase(it);
      } else {
        ++it;
      }
    }

    // New connections.
    if (pfds[0].revents & POLLIN) {
      for (;;) {
        std::string from;
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&ss), &len,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          if (errno != EAGAIN && errno != EWOULDBLOCK) {
            // Out of descriptors or memory: try again shortly rather than spin or fail.
            log.Say(std::string("accept failed (") + std::strerror(errno) + "); retrying");
            accept_paused_until = net::Clock::now() + std::chrono::milliseconds(100);
          }
          break;
        }
        // Unproven connections are capped: the oldest makes room (a silent one has had longest).
        auto unproven = [](const Incoming& c) {
          return c.state == Incoming::kAwaitHello || c.state == Incoming::kAwaitProof;
        };
        const size_t waiting = static_cast<size_t>(std::count_if(in.begin(), in.end(), unproven));
        if (waiting >= kMaxPendingIncoming + static_cast<size_t>(expected - done_in))
          for (auto& c : in)
            if (unproven(c)) {
              refuse(c, "too many unproven connections; dropped the oldest");
              c.io.out.clear();
              break;
            }
        Incoming& c = in.emplace_back();
        c.sock = net::Socket(fd);
        c.from = net::PeerAddress(fd);
        c.io.sock = &c.sock;
      }
    }
  }
  return accepted;
}

}  // namespace cdt::handshake
