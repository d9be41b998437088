#include "comm/transport/peer_handshake.h"

#include <poll.h>
#include <sodium.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <list>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/refusal_log.h"
#include "comm/transport/admission.h"

namespace cdt::handshake {

RankKeys RankKeys::Generate() {
  RankKeys k;
  k.secret_key = auth::RandomBytes(kSecretKeyBytes);
  k.public_key.resize(kPublicKeyBytes);
  crypto_scalarmult_base(reinterpret_cast<unsigned char*>(k.public_key.data()),
                         reinterpret_cast<const unsigned char*>(k.secret_key.data()));
  return k;
}

std::string GenerationKey(const std::string& secret, const std::string& key_prefix,
                          const std::string& token) {
  return auth::Hmac(auth::KeyFromSecret(secret), {"cdt-mesh-v4", key_prefix, token});
}

std::optional<std::string> LinkKey(const std::string& generation_key, const std::string& my_secret,
                                   const std::string& peer_public, const std::string& dialer_public,
                                   const std::string& listener_public) {
  if (my_secret.size() != kSecretKeyBytes || peer_public.size() != kPublicKeyBytes)
    return std::nullopt;
  unsigned char shared[crypto_scalarmult_BYTES];
  // Fails (-1) for a point of small order: the agreement would be all zeros, known to anyone.
  if (crypto_scalarmult(shared, reinterpret_cast<const unsigned char*>(my_secret.data()),
                        reinterpret_cast<const unsigned char*>(peer_public.data())) != 0)
    return std::nullopt;
  std::string key =
      auth::Hmac(generation_key,
                 {"cdt-link-v4", std::string_view(reinterpret_cast<char*>(shared), sizeof shared),
                  dialer_public, listener_public});
  sodium_memzero(shared, sizeof shared);
  return key;
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
    case kBadMode:
      return "one side runs with --encrypt, the other without";
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

std::string DataKey(const std::string& link_key, const Hello& hello, const char* listener_nonce) {
  return auth::Hmac(link_key,
                    {"cdt-data-v1", Bytes(hello), std::string_view(listener_nonce, kNonceBytes)});
}

Status CheckHello(const Hello& h, int rank, int size, int channels, bool sealed) {
  if (h.magic != kMagic || h.version != kVersion) return kBadVersion;
  if (h.to_rank != static_cast<uint32_t>(rank) || h.from_rank == h.to_rank ||
      h.from_rank >= static_cast<uint32_t>(size) || h.channel >= static_cast<uint32_t>(channels) ||
      (h.flags & ~kKnownFlags) != 0)
    return kBadRank;
  if (((h.flags & kSealed) != 0) != sealed) return kBadMode;
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

// Every handshake of one rank, in and out, driven by one poll loop (RunHandshakes).
class HandshakeLoop {
 public:
  HandshakeLoop(const MeshLinks& links, std::vector<net::Socket>& dialed,
                const net::Socket& listener)
      : l_(links),
        listener_(listener),
        slots_(static_cast<size_t>(links.channels) * static_cast<size_t>(links.size)),
        expected_(links.channels * (links.size - 1)),
        claimed_(slots_, 0),
        log_("cdt " + links.who, links.log) {
    done_.accepted.resize(slots_);
    done_.send_keys.resize(slots_);
    done_.recv_keys.resize(slots_);
    for (size_t slot = 0; slot < slots_; ++slot)
      if (dialed[slot].valid()) Dial(slot, &dialed[slot]);
    net::SetNonBlocking(listener_.fd(), true);  // accepted until EAGAIN
  }

  Handshaken Run(net::Deadline deadline) {
    while (done_in_ < expected_ || done_out_ < out_.size()) {
      const auto now = net::Clock::now();
      if (now >= deadline) ThrowTimeout();
      const bool accepting = now >= accept_paused_until_;
      pfds_.clear();
      pfds_.push_back({accepting ? listener_.fd() : -1, POLLIN, 0});
      for (auto& o : out_)
        pfds_.push_back({o.state == Outgoing::kDone ? -1 : o.io.sock->fd(), Events(o.io), 0});
      for (auto& c : in_) pfds_.push_back({c.sock.fd(), Events(c.io), 0});
      if (::poll(pfds_.data(), pfds_.size(), std::min(net::MillisUntil(deadline), 100)) < 0 &&
          errno != EINTR)
        throw Error(ErrorCode::kIo, l_.who + ": poll: " + std::strerror(errno));
      for (size_t i = 0; i < out_.size(); ++i)
        if (out_[i].state != Outgoing::kDone && pfds_[1 + i].revents != 0) ServeOutgoing(out_[i]);
      size_t k = 1 + out_.size();
      for (auto it = in_.begin(); it != in_.end(); ++k) {
        if (pfds_[k].revents != 0) ServeIncoming(*it);
        it = Settle(it);
      }
      if (pfds_[0].revents & POLLIN) AcceptNew();
    }
    return std::move(done_);
  }

 private:
  struct Outgoing {
    int peer = -1;
    size_t slot = 0;
    Hello hello{};
    std::string link_key;
    Conn io;
    enum { kAwaitChallenge, kAwaitAck, kDone } state = kAwaitChallenge;
  };
  struct Incoming {
    net::Socket sock;
    std::string from;
    Hello hello{};
    std::string link_key;
    char nonce[kNonceBytes] = {};
    Conn io;
    enum { kAwaitHello, kAwaitProof, kClosing, kAccepted } state = kAwaitHello;
  };

  static short Events(const Conn& io) {
    return static_cast<short>(POLLIN | (io.flushed() ? 0 : POLLOUT));
  }
  size_t SlotOf(const Hello& h) const {
    return static_cast<size_t>(h.channel) * static_cast<size_t>(l_.size) + h.from_rank;
  }

  // Our connection to a peer: its Hello goes out first.
  void Dial(size_t slot, net::Socket* sock) {
    Outgoing& o = out_.emplace_back();
    o.peer = static_cast<int>(slot % static_cast<size_t>(l_.size));
    o.slot = slot;
    const std::string& theirs = l_.public_keys[static_cast<size_t>(o.peer)];
    std::optional<std::string> link =
        LinkKey(l_.key, l_.mine.secret_key, theirs, l_.mine.public_key, theirs);
    if (!link)
      Fail(ErrorCode::kProtocol, o.peer,
           "published a public key no connection can be keyed with (" +
               std::to_string(theirs.size()) + " bytes, or a point of small order)");
    o.link_key = std::move(*link);
    o.hello = Hello{kMagic,
                    kVersion,
                    static_cast<uint32_t>(l_.rank),
                    static_cast<uint32_t>(o.peer),
                    static_cast<uint32_t>(slot / static_cast<size_t>(l_.size)),
                    l_.sealed ? kSealed : 0u,
                    {}};
    const std::string nonce = auth::RandomBytes(kNonceBytes);
    std::memcpy(o.hello.nonce, nonce.data(), kNonceBytes);
    o.io.sock = sock;
    net::SetNonBlocking(sock->fd(), true);
    o.io.Queue(&o.hello, sizeof o.hello);
  }

  [[noreturn]] void Fail(ErrorCode code, int peer, const std::string& what) const {
    const std::string& address = l_.addresses[static_cast<size_t>(peer)];
    throw Error(code, l_.who + ": rank " + std::to_string(peer) + " at " + address + " " + what,
                {l_.rank, peer, address, "connect", 0});
  }

  // Our side of a connection we dialled: the listener's challenge, then its acknowledgement.
  void ServeOutgoing(Outgoing& o) {
    if (!o.io.Flush())
      Fail(ErrorCode::kPeerLost, o.peer, "reset the connection during the handshake");
    const int got =
        o.io.Fill(o.state == Outgoing::kAwaitChallenge ? sizeof(Challenge) : sizeof(Ack));
    if (got < 0)
      Fail(ErrorCode::kPeerLost, o.peer,
           "closed the connection during the handshake: it died, or it belongs to another "
           "generation or job and refused us");
    if (got == 0) return;
    o.io.have = 0;
    if (o.state == Outgoing::kAwaitAck) {
      Ack ack;
      std::memcpy(&ack, o.io.in, sizeof ack);
      if (ack.magic != kMagic || ack.status != kOk)
        Fail(ErrorCode::kAuth, o.peer,
             std::string("refused our proof (") + StatusText(ack.status) +
                 "); do all ranks have the same CDT_JOB_SECRET?");
      o.state = Outgoing::kDone;
      ++done_out_;
      return;
    }
    Challenge ch;
    std::memcpy(&ch, o.io.in, sizeof ch);
    std::string proof;
    uint32_t refused = kOk;
    const Status verdict = AnswerChallenge(o.link_key, o.hello, ch, &proof, &refused);
    if (verdict == kBadVersion)
      Fail(ErrorCode::kProtocol, o.peer, "is not a cann-dist-train peer (bad magic)");
    if (verdict == kBadRank && refused == kBadMode)
      Fail(ErrorCode::kProtocol, o.peer,
           std::string("refused our hello: this rank runs ") + (l_.sealed ? "with" : "without") +
               " --encrypt (CDT_ENCRYPT) and that rank " + (l_.sealed ? "without" : "with") +
               " it; give every rank the same setting");
    if (verdict == kBadRank)
      Fail(ErrorCode::kAuth, o.peer,
           std::string("refused our hello (") + StatusText(refused) +
               "); it is not the process this rank expects there");
    if (verdict != kOk)
      Fail(ErrorCode::kAuth, o.peer,
           "could not prove it belongs to " + l_.label +
               ": a process of another generation or job holds that address, or one that does "
               "not know the job secret");
    o.io.Queue(proof.data(), proof.size());
    if (!o.io.Flush())
      Fail(ErrorCode::kPeerLost, o.peer, "reset the connection during the handshake");
    if (l_.sealed) done_.send_keys[o.slot] = DataKey(o.link_key, o.hello, ch.nonce);
    o.state = Outgoing::kAwaitAck;
  }

  void Refuse(Incoming& c, const std::string& why) {
    log_.Say("refused connection from " + c.from + ": " + why);
    c.state = Incoming::kClosing;
  }

  // A connection a peer dialled: its hello (answered with our challenge), then its proof
  // (answered with our acknowledgement).
  void ServeIncoming(Incoming& c) {
    if (c.state == Incoming::kAccepted) return;
    if (!c.io.Flush()) {
      c.state = Incoming::kClosing;
      c.io.out.clear();
      return;
    }
    if (c.state != Incoming::kAwaitHello && c.state != Incoming::kAwaitProof) return;
    const int got = c.io.Fill(c.state == Incoming::kAwaitHello ? sizeof(Hello) : kProofBytes);
    if (got < 0) {
      c.state = Incoming::kClosing;  // gone before proving anything: nothing to say
      c.io.out.clear();
      return;
    }
    if (got == 0) return;
    c.io.have = 0;
    if (c.state == Incoming::kAwaitHello) {
      std::memcpy(&c.hello, c.io.in, sizeof c.hello);
      Challenge ch{kMagic, CheckHello(c.hello, l_.rank, l_.size, l_.channels, l_.sealed), {}, {}};
      std::optional<std::string> link;
      if (ch.status == kOk) {
        // Keyed by the public key the claimed rank published: only that rank can prove it.
        const std::string& theirs = l_.public_keys[c.hello.from_rank];
        link = LinkKey(l_.key, l_.mine.secret_key, theirs, theirs, l_.mine.public_key);
        if (!link) ch.status = kBadRank;
      }
      if (ch.status == kOk) {
        c.link_key = std::move(*link);
        const std::string nonce = auth::RandomBytes(kNonceBytes);
        std::memcpy(c.nonce, nonce.data(), kNonceBytes);
        std::memcpy(ch.nonce, c.nonce, kNonceBytes);
        const std::string proof = ListenerProof(c.link_key, c.hello, c.nonce);
        std::memcpy(ch.proof, proof.data(), kProofBytes);
        c.state = Incoming::kAwaitProof;
      } else {
        Refuse(c, StatusText(ch.status));
      }
      c.io.Queue(&ch, sizeof ch);
      c.io.Flush();
      return;
    }
    Ack ack{kMagic, kOk};
    const size_t slot = SlotOf(c.hello);
    if (CheckProof(c.link_key, c.hello, c.nonce, c.io.in) != kOk) {
      ack.status = kBadProof;
      Refuse(c,
             "its proof does not match (another generation or job, not ours, or not the "
             "holder of rank " +
                 std::to_string(c.hello.from_rank) + "'s key)");
    } else if (claimed_[slot]) {  // a proven connection holds its slot from then on
      ack.status = kBadRank;
      Refuse(c, "a second connection from rank " + std::to_string(c.hello.from_rank));
    } else {
      claimed_[slot] = 1;
      if (l_.sealed) done_.recv_keys[slot] = DataKey(c.link_key, c.hello, c.nonce);
      c.state = Incoming::kAccepted;
    }
    c.io.Queue(&ack, sizeof ack);
    c.io.Flush();
  }

  // An accepted connection is handed over once its Ack is out; a refused one closes then.
  std::list<Incoming>::iterator Settle(std::list<Incoming>::iterator it) {
    Incoming& c = *it;
    if (!c.io.flushed() || (c.state != Incoming::kAccepted && c.state != Incoming::kClosing))
      return std::next(it);
    if (c.state == Incoming::kAccepted) {
      done_.accepted[SlotOf(c.hello)] = std::move(c.sock);
      ++done_in_;
    }
    return in_.erase(it);
  }

  void AcceptNew() {
    for (;;) {
      const int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
          // Out of descriptors or memory: try again shortly rather than spin or fail.
          log_.Say(std::string("accept failed (") + std::strerror(errno) + "); retrying");
          accept_paused_until_ = net::Clock::now() + std::chrono::milliseconds(100);
        }
        return;
      }
      // Unproven connections are capped: the oldest of the source holding the most makes room
      // (comm/transport/admission.h), so a flooding host pushes out its own connections first.
      auto unproven = [](const Incoming& c) {
        return c.state == Incoming::kAwaitHello || c.state == Incoming::kAwaitProof;
      };
      const size_t waiting = static_cast<size_t>(std::count_if(in_.begin(), in_.end(), unproven));
      if (waiting >= kMaxPendingIncoming + static_cast<size_t>(expected_ - done_in_)) {
        auto victim = net::ChooseEviction(
            in_.begin(), in_.end(), [](const Incoming& c) -> const std::string& { return c.from; },
            unproven);
        if (victim != in_.end()) {
          Refuse(*victim, "too many unproven connections; dropped the oldest from " +
                              std::string(net::SourceHost(victim->from)) +
                              ", the address holding the most");
          victim->io.out.clear();
        }
      }
      Incoming& c = in_.emplace_back();
      c.sock = net::Socket(fd);
      c.from = net::PeerAddress(fd);
      c.io.sock = &c.sock;
    }
  }

  [[noreturn]] void ThrowTimeout() const {
    std::vector<char> silent(static_cast<size_t>(l_.size), 0);
    for (size_t slot = 0; slot < slots_; ++slot)
      if (!claimed_[slot] && static_cast<int>(slot % static_cast<size_t>(l_.size)) != l_.rank)
        silent[slot % static_cast<size_t>(l_.size)] = 1;
    std::string missing_in, missing_out;
    for (int r = 0; r < l_.size; ++r)
      if (silent[static_cast<size_t>(r)])
        missing_in += (missing_in.empty() ? "" : ", ") + std::to_string(r);
    for (const auto& o : out_)
      if (o.state != Outgoing::kDone)
        missing_out += (missing_out.empty() ? "" : ", ") + std::to_string(o.peer);
    std::string what;
    if (!missing_in.empty()) what = "no proven connection yet from rank(s) [" + missing_in + "]";
    if (!missing_out.empty())
      what += (what.empty() ? "" : "; ") + std::string("no answer yet from rank(s) [") +
              missing_out + "]";
    throw Error(ErrorCode::kTimeout,
                l_.who + ": the mesh of " + l_.label + " did not form within the timeout: " + what +
                    "; those processes are stopped, slow, or unreachable",
                {l_.rank, -1, "", "connect", 0});
  }

  const MeshLinks& l_;
  const net::Socket& listener_;
  const size_t slots_;
  const int expected_;         // connections from the peers
  Handshaken done_;            // what Run returns
  std::vector<char> claimed_;  // per slot: a proven connection took it
  std::vector<Outgoing> out_;
  std::list<Incoming> in_;  // stable addresses: each Conn points at its own socket
  std::vector<pollfd> pfds_;
  RefusalLog log_;
  net::Deadline accept_paused_until_{};
  int done_in_ = 0;
  size_t done_out_ = 0;
};

}  // namespace

Handshaken RunHandshakes(const MeshLinks& links, std::vector<net::Socket>& dialed,
                         const net::Socket& listener, net::Deadline deadline) {
  return HandshakeLoop(links, dialed, listener).Run(deadline);
}

}  // namespace cdt::handshake
