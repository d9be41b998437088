#include "comm/transport/tcp_mesh.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sodium.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cdt/error.h"
#include "comm/auth.h"
#include "comm/transport/peer_handshake.h"
#include "comm/transport/sealed_stream.h"
#include "comm/transport/send_pacing.h"
#include "common/check.h"

namespace cdt {

namespace {

// The urgent mesh's hold on its TrafficGate, released when the exchange ends however it ends.
class GateHold {
 public:
  explicit GateHold(TrafficGate* gate) : gate_(gate) {}
  ~GateHold() { Set(false); }
  GateHold(const GateHold&) = delete;
  GateHold& operator=(const GateHold&) = delete;
  void Set(bool held) {
    if (!gate_ || held == held_) return;
    held_ = held;
    held ? gate_->Enter() : gate_->Leave();
  }

 private:
  TrafficGate* gate_;
  bool held_ = false;
};

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// What each rank publishes under addr/<rank> (tcp_mesh.h): its listener, its node, its public key
// for the generation and whether it can run AES-256-GCM.
struct PeerRecord {
  std::string address, host_id, public_key;
  bool aes = false;
};

std::string EncodeRecord(const PeerRecord& r) {
  std::string hex(2 * r.public_key.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(),
                 reinterpret_cast<const unsigned char*>(r.public_key.data()), r.public_key.size());
  hex.pop_back();
  return r.address + "\n" + r.host_id + "\n" + hex + "\n" + (r.aes ? "aes" : "chacha");
}

PeerRecord ParseRecord(const std::string& v, int rank, const std::string& who) {
  std::vector<std::string> lines;
  for (size_t at = 0;;) {
    const size_t nl = v.find('\n', at);
    lines.push_back(v.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  PeerRecord r;
  std::string key(handshake::kPublicKeyBytes, '\0');
  size_t decoded = 0;
  if (lines.size() != 4 ||
      sodium_hex2bin(reinterpret_cast<unsigned char*>(key.data()), key.size(), lines[2].data(),
                     lines[2].size(), nullptr, &decoded, nullptr) != 0 ||
      decoded != key.size() || (lines[3] != "aes" && lines[3] != "chacha"))
    throw Error(ErrorCode::kProtocol,
                who + ": the store's record of rank " + std::to_string(rank) +
                    " is not \"host:port, host id, public key, cipher\" (" +
                    std::to_string(v.size()) +
                    " bytes): a process of another version, or someone else wrote it",
                {-1, rank, "", "connect", 0});
  r.address = lines[0];
  r.host_id = lines[1];
  r.public_key = std::move(key);
  r.aes = lines[3] == "aes";
  return r;
}

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

}  // namespace

std::string LocalHostId() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  char ns[128] = {0};
  ssize_t n = ::readlink("/proc/self/ns/net", ns, sizeof ns - 1);
  if (n < 0) ns[0] = '\0';
  return std::string(host) + "|" + ns + "|" + ReadFirstLine("/proc/sys/kernel/random/boot_id");
}

TcpMesh::~TcpMesh() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::unique_ptr<TcpMesh> TcpMesh::Connect(Store& store, const MeshOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    throw Error(
        ErrorCode::kInvalidArgument,
        "rank " + std::to_string(o.rank) + " is outside world size " + std::to_string(o.size));
  std::unique_ptr<TcpMesh> mesh(new TcpMesh());
  mesh->rank_ = o.rank;
  mesh->size_ = o.size;
  mesh->timeout_ = o.timeout;
  mesh->spin_ = o.spin;
  mesh->remote_spin_ = o.remote_spin;
  mesh->remote_receive_batch_ = std::max(0, o.remote_receive_batch_bytes);
  mesh->gate_ = o.traffic_gate;
  mesh->urgent_ = o.urgent;
  mesh->progress_ = o.progress;
  if (!o.rank_names.empty() && o.rank_names.size() != static_cast<size_t>(o.size))
    throw Error(ErrorCode::kInvalidArgument, "rank_names must name every rank of the mesh");
  mesh->rank_names_ = o.rank_names;
  mesh->send_socks_.resize(static_cast<size_t>(kChannels) * o.size);
  mesh->recv_socks_.resize(static_cast<size_t>(kChannels) * o.size);
  mesh->addresses_.resize(o.size);
  mesh->host_ids_.resize(o.size);
  mesh->pollfds_.resize(2 * static_cast<size_t>(o.size) + 1);
  mesh->poll_owner_.resize(mesh->pollfds_.size());
  mesh->prev_.resize(mesh->pollfds_.size());
  mesh->last_of_.resize(2 * static_cast<size_t>(o.size));
  mesh->sent_.reset(new std::atomic<uint64_t>[static_cast<size_t>(o.size)]());
  mesh->received_.reset(new std::atomic<uint64_t>[static_cast<size_t>(o.size)]());
  mesh->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (mesh->wake_fd_ < 0) throw Error(ErrorCode::kIo, std::string("eventfd: ") + strerror(errno));

  const std::string& prefix = o.key_prefix;
  const std::string who = "rank " + std::to_string(o.rank);
  net::Deadline deadline = net::DeadlineAfter(o.timeout);
  if (o.secret.empty() && !IsLoopback(o.advertise_host)) {
    if (!o.allow_insecure)
      throw Error(ErrorCode::kInvalidArgument,
                  who + ": no job secret, and this rank would take connections on " +
                      o.advertise_host +
                      " beyond loopback: whoever can write the rendezvous store could then stand "
                      "in for a rank. Give every rank the same CDT_JOB_SECRET (`cann-dist-train "
                      "secret`), or accept the risk with CDT_ALLOW_INSECURE=1",
                  {o.rank, -1, "", "connect", 0});
    o.log.Warning(
        "cann-dist-train: {}: WARNING: no job secret and CDT_ALLOW_INSECURE=1: this "
        "group's connections on {} are only as private as its rendezvous store",
        who, o.advertise_host);
  }

  // Listen where we are reached, nowhere else (a 0.0.0.0 listener answers on every interface).
  // Every peer dials every channel before anyone accepts (below): the backlog must hold them all,
  // or from 65 ranks (2 x 64 dials against a backlog of 128) dialers wait on SYN retries while
  // the ranks they wait for are still dialling, and the mesh did not form in minutes. The kernel
  // caps it at net.core.somaxconn (4,096 here and by default since Linux 5.4).
  net::HostPort bound;
  net::Socket listener = net::Listen(o.bind_host.empty() ? o.advertise_host : o.bind_host, 0,
                                     &bound, std::max(128, kChannels * o.size));
  const handshake::RankKeys mine = handshake::RankKeys::Generate();
  const bool my_aes = o.encrypt && sealed::Aes256GcmAvailable();
  PeerRecord me{net::HostPort{o.advertise_host, bound.port}.ToString(),
                o.host_id.empty() ? LocalHostId() : o.host_id, mine.public_key, my_aes};

  if (o.rank == 0) store.Set(prefix + "/token", auth::RandomBytes(handshake::kTokenBytes));
  store.Set(prefix + "/addr/" + std::to_string(o.rank), EncodeRecord(me));
  std::string token = store.Get(prefix + "/token", o.timeout);
  std::vector<std::string> public_keys;
  std::vector<char> aes;
  mesh->ReadPeers(store, o, &public_keys, &aes);

  // Dial every other rank once per channel (our sending connections to it), then run every
  // handshake, ours and theirs, at once (peer_handshake.h): the accepted connections are our
  // receiving ones.
  for (int ch = 0; ch < kChannels; ++ch) {
    for (int peer = 0; peer < o.size; ++peer) {
      if (peer == o.rank) continue;
      net::HostPort hp =
          net::ParseHostPort(mesh->addresses_[peer], "address of rank " + std::to_string(peer));
      mesh->send_socks_[mesh->Slot(ch, peer)] = net::ConnectUntil(hp, deadline);
    }
  }
  handshake::MeshLinks links;
  links.rank = o.rank;
  links.size = o.size;
  links.channels = kChannels;
  links.key = handshake::GenerationKey(o.secret, prefix, token);
  links.mine = mine;
  links.public_keys = std::move(public_keys);
  links.sealed = o.encrypt;
  links.who = who;
  links.label = "generation " + std::to_string(o.generation) + " (" + prefix + ")";
  links.addresses = mesh->addresses_;
  links.log = o.log;
  handshake::Handshaken done =
      handshake::RunHandshakes(links, mesh->send_socks_, listener, deadline);
  mesh->recv_socks_ = std::move(done.accepted);
  if (o.encrypt) {
    mesh->SealLinks(done, aes, my_aes);
    // A receive batch (SO_RCVLOWAT) counts wire bytes, not a transfer's: with frames in between
    // it could wait for bytes that never come. Sealed receives wake for any byte.
    mesh->remote_receive_batch_ = 0;
  }
  mesh->remote_.assign(static_cast<size_t>(o.size), 0);
  for (int peer = 0; peer < o.size; ++peer)
    mesh->remote_[peer] = mesh->host_ids_[peer] != mesh->host_ids_[o.rank];
  mesh->TuneSockets(o);
  return mesh;
}

void TcpMesh::TuneSockets(const MeshOptions& o) {
  receive_lowat_.assign(recv_socks_.size(), 1);
  yield_floor_ = o.yield_send_buffer_min_bytes;
  yield_cap_ = o.yield_send_buffer_bytes;
  paced_send_buffer_.assign(send_socks_.size(), 0);
  next_pacing_.assign(send_socks_.size(), std::chrono::steady_clock::time_point{});
  for (size_t slot = 0; slot < send_socks_.size(); ++slot) {
    const int peer = static_cast<int>(slot % static_cast<size_t>(o.size));
    if (peer == o.rank) continue;
    const bool same_host = host_ids_[peer] == host_ids_[o.rank];
    const bool bulk = slot / static_cast<size_t>(o.size) == static_cast<size_t>(kBulkChannel);
    int buffer = !same_host ? o.remote_socket_buffer_bytes
                 : bulk     ? o.local_bulk_socket_buffer_bytes
                            : o.local_latency_socket_buffer_bytes;
    for (net::Socket* sock : {&send_socks_[slot], &recv_socks_[slot]}) {
      int fd = sock->fd();
      net::SetNonBlocking(fd, true);
      net::SetNoDelay(fd);
      if (buffer > 0) {
        ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(int));
        ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(int));
      }
    }
    if (o.traffic_gate && !o.urgent) {
      // Bytes queued in the kernel and the network would still go out ahead of the urgent side's.
      const int fd = send_socks_[slot].fd();
      int sndbuf = o.yield_send_buffer_bytes, lowat = o.yield_unsent_bytes;
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
      ::setsockopt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, &lowat, sizeof lowat);
      if (!same_host && o.yield_send_buffer_min_bytes > 0 &&
          o.yield_send_buffer_min_bytes < o.yield_send_buffer_bytes)
        paced_send_buffer_[slot] = sndbuf;
    }
  }
}

void TcpMesh::ReadPeers(Store& store, const MeshOptions& o, std::vector<std::string>* public_keys,
                        std::vector<char>* aes) {
  const std::string who = "rank " + std::to_string(o.rank);
  std::vector<std::string> keys;
  for (int r = 0; r < o.size; ++r) keys.push_back(o.key_prefix + "/addr/" + std::to_string(r));
  try {
    store.Wait(keys, o.timeout);
  } catch (const Error& e) {
    std::string missing;
    for (int r = 0; r < o.size; ++r)
      if (!store.Check(keys[r])) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    throw Error(ErrorCode::kTimeout,
                who + ": ranks [" + missing + "] did not join generation " +
                    std::to_string(o.generation) + " within " + std::to_string(o.timeout.count()) +
                    " ms",
                {o.rank, -1, "", "connect", 0});
  }
  public_keys->resize(static_cast<size_t>(o.size));
  aes->assign(static_cast<size_t>(o.size), 0);
  for (int r = 0; r < o.size; ++r) {
    PeerRecord rec = ParseRecord(store.Get(keys[r], o.timeout), r, who);
    addresses_[r] = std::move(rec.address);
    host_ids_[r] = std::move(rec.host_id);
    (*public_keys)[static_cast<size_t>(r)] = std::move(rec.public_key);
    (*aes)[static_cast<size_t>(r)] = rec.aes ? 1 : 0;
  }
}

void TcpMesh::SealLinks(const handshake::Handshaken& links, const std::vector<char>& aes,
                        bool my_aes) {
  senders_.resize(send_socks_.size());
  receivers_.resize(recv_socks_.size());
  for (size_t slot = 0; slot < send_socks_.size(); ++slot) {
    const int peer = static_cast<int>(slot % static_cast<size_t>(size_));
    if (peer == rank_) continue;
    // AES-256-GCM where both ends have the instructions for it, else ChaCha20-Poly1305.
    const sealed::Cipher cipher = my_aes && aes[static_cast<size_t>(peer)]
                                      ? sealed::Cipher::kAes256Gcm
                                      : sealed::Cipher::kChaCha20Poly1305;
    senders_[slot] = std::make_unique<sealed::SealedSender>(cipher, links.send_keys[slot]);
    receivers_[slot] = std::make_unique<sealed::SealedReceiver>(cipher, links.recv_keys[slot]);
  }
}

// A send found the buffer full: the moment the buffer, or the path behind it, limits.
void TcpMesh::PaceSendBuffer(size_t slot, int fd) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_pacing_[slot]) return;
  next_pacing_[slot] = now + std::chrono::milliseconds(20);
  const int current = paced_send_buffer_[slot];
  int target = net::PacedSendBuffer(net::ReadPathSample(fd), yield_floor_, yield_cap_, current);
  if (4 * std::abs(target - current) <= current) return;  // within a quarter: leave it
  if (::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &target, sizeof target) == 0)
    paced_send_buffer_[slot] = target;
}

void TcpMesh::Wake() {
  aborted_.store(true);
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void TcpMesh::ShutdownAll() {
  for (auto& s : send_socks_) s.Shutdown();
  for (auto& s : recv_socks_) s.Shutdown();
}

void TcpMesh::ThrowPeerError(ErrorCode code, int peer, const std::string& what,
                             const OpLabel& label) const {
  const char* verb = code == ErrorCode::kTimeout    ? "timed out on"
                     : code == ErrorCode::kProtocol ? "refused the data of"
                                                    : "lost";
  std::string msg = "rank " + std::to_string(Name(rank_)) + " (this process) " + verb + " rank " +
                    std::to_string(Name(peer)) + " at " + addresses_[peer] + " during " +
                    label.name + " #" + std::to_string(label.seq) + ": " + what;
  if (code == ErrorCode::kTimeout)
    msg += "; that rank is stopped, hung, slower than --timeout, or its link is cut";
  else if (code == ErrorCode::kProtocol)
    msg +=
        "; something between the two ranks changes their traffic — the group stops rather "
        "than reduce altered data";
  else
    msg += "; that process died or its connection was reset — rebuild the group without it";
  throw Error(code, msg, {Name(rank_), Name(peer), addresses_[peer], label.name, label.seq});
}

void TcpMesh::CheckPeers(const Transfer* t, size_t n, const OpLabel& label) const {
  for (size_t i = 0; i < n; ++i) {
    if (t[i].peer < 0 || t[i].peer >= size_ || t[i].peer == rank_)
      throw Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(rank_) +
                                                   ": transfer to invalid peer " +
                                                   std::to_string(t[i].peer) + " in " + label.name);
  }
}

void TcpMesh::ThrowStalled(const Transfer* t, size_t npoll, const OpLabel& label) const {
  // Name the first peer we are still waiting on (every pending one is listed).
  std::string others;
  int first = -1;
  for (size_t k = 0; k < npoll; ++k) {
    const Transfer& x = t[poll_owner_[k]];
    if (first < 0) first = x.peer;
    others += (others.empty() ? "" : ", ") +
              std::string(x.kind == Transfer::Kind::kSend ? "send to " : "receive from ") +
              std::to_string(x.peer) + " (" + std::to_string(x.done) + "/" +
              std::to_string(x.bytes) + " B)";
  }
  ThrowPeerError(ErrorCode::kTimeout, first,
                 "no byte moved for " + std::to_string(timeout_.count()) + " ms [" + others + "]",
                 label);
}

void TcpMesh::CountCompleted(const Transfer* t, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    auto& counter = t[i].kind == Transfer::Kind::kSend ? sent_ : received_;
    counter[static_cast<size_t>(t[i].peer)].fetch_add(t[i].bytes, std::memory_order_relaxed);
  }
}

ssize_t TcpMesh::Move(Transfer& x, size_t slot, int fd, bool* moved, const OpLabel& label) {
  char* p = static_cast<char*>(x.data) + x.done;
  const size_t left = x.bytes - x.done;
  if (senders_.empty()) {
    const ssize_t r = x.kind == Transfer::Kind::kSend
                          ? ::send(fd, p, left, MSG_DONTWAIT | MSG_NOSIGNAL)
                          : ::recv(fd, p, left, MSG_DONTWAIT);
    *moved = r > 0;
    return r;
  }
  if (x.kind == Transfer::Kind::kSend) {
    sealed::SealedSender& s = *senders_[slot];
    const ssize_t r = s.Send(fd, p, left);
    *moved = s.moved() || r > 0;
    return r;
  }
  sealed::SealedReceiver& s = *receivers_[slot];
  const ssize_t r = s.Recv(fd, p, left);
  *moved = s.moved() || r > 0;
  if (r == -2) ThrowPeerError(ErrorCode::kProtocol, x.peer, s.failure(), label);
  return r;
}

bool TcpMesh::Advance(Transfer& x, int channel, const OpLabel& label) {
  CheckPeers(&x, 1, label);
  if (aborted_.load())
    throw Error(ErrorCode::kAborted,
                "rank " + std::to_string(Name(rank_)) + ": connection aborted during " +
                    label.name + " #" + std::to_string(label.seq),
                {Name(rank_), -1, "", label.name, label.seq});
  if (x.done >= x.bytes) return false;
  bool moved = false;
  const ssize_t r = Move(x, Slot(channel, x.peer), SocketOf(x, channel), &moved, label);
  if (r > 0) {
    x.done += static_cast<size_t>(r);
    if (x.done == x.bytes) CountCompleted(&x, 1);
    return true;
  }
  if (r == 0 && x.kind == Transfer::Kind::kRecv)
    ThrowPeerError(ErrorCode::kPeerLost, x.peer, "connection closed by peer", label);
  if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    ThrowPeerError(ErrorCode::kPeerLost, x.peer, std::strerror(errno), label);
  return moved;
}

void TcpMesh::Exchange(Transfer* t, size_t n, const OpLabel& label) {
  CheckPeers(t, n, label);
  if (n > pollfds_.size() - 1 || n > prev_.size()) {
    // Large transfer lists grow the scratch once; the steady state never allocates.
    pollfds_.resize(n + 1);
    poll_owner_.resize(n + 1);
    prev_.resize(n);
  }
  // prev_[i]: the previous transfer of the same kind to the same peer; i may progress only once
  // that one is complete (byte-stream order).
  std::fill(last_of_.begin(), last_of_.end(), -1);
  for (size_t i = 0; i < n; ++i) {
    int slot = 2 * t[i].peer + (t[i].kind == Transfer::Kind::kSend ? 0 : 1);
    prev_[i] = last_of_[slot];
    last_of_[slot] = static_cast<int>(i);
  }
  auto head = [&](size_t i) { return prev_[i] < 0 || t[prev_[i]].done == t[prev_[i]].bytes; };
  for (size_t i = 0; i < n; ++i)
    if (t[i].bytes == 0 && t[i].on_complete) t[i].on_complete(t[i].arg, t[i]);
  // A zero-byte transfer is complete at once, gated or not (it carries no bytes to order).
  auto last_progress = net::Clock::now();
  GateHold hold(gate_.get());  // released however this returns
  for (;;) {
    if (aborted_.load())
      throw Error(ErrorCode::kAborted,
                  "rank " + std::to_string(rank_) + ": communicator aborted during " + label.name +
                      " #" + std::to_string(label.seq),
                  {rank_, -1, "", label.name, label.seq});
    bool pending = false;
    bool progressed = false;
    // Yielding to the urgent mesh: hand over no new bytes (receives go on).
    const bool paused = gate_ && !urgent_ && gate_->urgent();
    bool sending = false;  // urgent mesh: some send can go now
    // Some transfer waits on a same-host peer, or for the last batch of a message from another
    // host: spin_; else (streams from other hosts, sends into full buffers) remote_spin_.
    bool latency_bound = false;
    size_t npoll = 0;
    for (size_t i = 0; i < n; ++i) {
      Transfer& x = t[i];
      if (x.done >= x.bytes || !head(i) || (x.gate && *x.gate > 0) ||
          (paused && x.kind == Transfer::Kind::kSend)) {
        if (x.done < x.bytes) pending = true;
        continue;
      }
      if (x.kind == Transfer::Kind::kSend) sending = true;
      pending = true;
      const size_t slot = Slot(channel_, x.peer);
      int fd = (x.kind == Transfer::Kind::kSend ? send_socks_ : recv_socks_)[slot].fd();
      size_t left = x.bytes - x.done;
      bool moved = false;
      const ssize_t r = Move(x, slot, fd, &moved, label);
      if (moved && r <= 0) progressed = true;  // part of a sealed frame: not silence
      if (r > 0) {
        x.done += static_cast<size_t>(r);
        progressed = true;
        if (x.done == x.bytes && x.on_complete) x.on_complete(x.arg, x);
        continue;
      }
      if (r == 0 && x.kind == Transfer::Kind::kRecv)
        ThrowPeerError(ErrorCode::kPeerLost, x.peer, "connection closed by peer", label);
      if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        ThrowPeerError(ErrorCode::kPeerLost, x.peer, std::strerror(errno), label);
      if (x.kind == Transfer::Kind::kSend && paced_send_buffer_[slot] > 0) PaceSendBuffer(slot, fd);
      if (!remote_[x.peer]) {
        latency_bound = true;
      } else if (x.kind == Transfer::Kind::kRecv && remote_receive_batch_ > 0) {
        // Wake once a batch can be read, not per packet (the kernel still wakes us early when
        // the receive window is full). A non-blocking recv ignores it, so only poll is affected.
        const int lowat =
            static_cast<int>(std::min<size_t>(left, static_cast<size_t>(remote_receive_batch_)));
        if (receive_lowat_[slot] != lowat &&
            ::setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat) == 0)
          receive_lowat_[slot] = lowat;
        // A message's last batch: its arrival ends the wait, so catch it at once.
        if (left <= static_cast<size_t>(remote_receive_batch_)) latency_bound = true;
      }
      pollfds_[npoll] = {fd, static_cast<short>(x.kind == Transfer::Kind::kSend ? POLLOUT : POLLIN),
                         0};
      poll_owner_[npoll] = static_cast<int>(i);
      ++npoll;
    }
    if (urgent_ && gate_) hold.Set(sending && pending);
    if (!pending) return CountCompleted(t, n);
    // Something is pending but nothing is polled: every waiting transfer is gated, and no
    // transfer that could open a gate is left. No byte could change that, so the wait would end
    // only at the timeout, with no peer to name: a broken algorithm schedule (docs/errors.md).
    if (npoll == 0 && !progressed && !paused)
      internal::CheckFailed(__FILE__, __LINE__, "a pending transfer can progress",
                            std::string(label.name) + " #" + std::to_string(label.seq) +
                                " on rank " + std::to_string(rank_));
    auto now = net::Clock::now();
    if (progressed) {
      last_progress = now;
      if (progress_) progress_->fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (paused) {
      // Not silence: look again shortly (the urgent side holds the gate for one operation).
      last_progress = now;
      if (progress_) progress_->fetch_add(1, std::memory_order_relaxed);
      pollfds_[npoll] = {wake_fd_, POLLIN, 0};
      if (::poll(pollfds_.data(), npoll + 1, 1) < 0 && errno != EINTR)
        throw Error(ErrorCode::kIo, std::string("poll: ") + strerror(errno));
      continue;
    }
    if (now - last_progress < (latency_bound ? spin_ : remote_spin_)) {
      // Data usually arrives within microseconds on a fast link: retrying after a yield is far
      // cheaper than sleeping in poll() and being woken (MPI libraries spin the same way).
      sched_yield();
      continue;
    }
    pollfds_[npoll] = {wake_fd_, POLLIN, 0};
    auto idle = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_progress);
    int wait_ms = static_cast<int>(std::max<int64_t>(0, (timeout_ - idle).count()));
    int rc = ::poll(pollfds_.data(), npoll + 1, wait_ms);
    if (rc < 0 && errno != EINTR)
      throw Error(ErrorCode::kIo, std::string("poll: ") + strerror(errno));
    if (rc == 0 && net::Clock::now() - last_progress >= timeout_) ThrowStalled(t, npoll, label);
  }
}

}  // namespace cdt
