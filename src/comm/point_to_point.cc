// Tagged point-to-point messages over on-demand pair connections (cdt/point_to_point.h). The wire
// format (docs/wire_format.md, "Point-to-point messages"): on the pair's latency channel, each
// message is a 24-byte header { magic "CDPM", 0, tag (int64), bytes (uint64) } and its bytes.
//
// Threads: the caller posts (under mu_); one service thread moves every pair's bytes (it alone
// touches the Links); one detached connector thread per pair forms its TcpMesh (Connect blocks up
// to the timeout and cannot be interrupted, so it holds only shared state and may outlive the
// channel); one bell thread, awake only while a receive from any source waits, reads who rang.
// Gloo's unbound buffers with their recv-from-any (gloo/transport/unbound_buffer.h) and MPI's
// matching rules are the models; Gloo rings no bells because it connects everyone up front.
#include "cdt/point_to_point.h"

#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/p2p_records.h"
#include "comm/transport/tcp_mesh.h"

namespace cdt {
namespace {

using p2p::Arrived;
using p2p::Handover;
using p2p::kDiscardChunk;
using p2p::kMessageMagic;
using p2p::Link;
using p2p::MessageHeader;
using p2p::RecvOp;
using p2p::SendOp;
using Clock = p2p::Clock;
// The service thread's longest sleep: deadlines of posted receives and a busy link's silence are
// looked at this often at least.
constexpr int kPollMs = 100;

std::string Who(int rank) {
  return rank == PointToPoint::kAnySource ? "any rank" : "rank " + std::to_string(rank);
}

class TcpPointToPoint : public PointToPoint {
 public:
  TcpPointToPoint(std::shared_ptr<Store> store, const CommunicatorOptions& o)
      : store_(std::move(store)),
        options_(o),
        prefix_(o.job_id + "/gen" + std::to_string(o.generation) + "/p2p"),
        handover_(std::make_shared<Handover>()),
        outbox_(static_cast<size_t>(o.size)),
        link_state_(static_cast<size_t>(o.size), kNone),
        gone_(static_cast<size_t>(o.size)) {
    service_ = std::thread([this] { Serve(); });
    bells_ = std::thread([this] { WatchBells(); });
  }

  ~TcpPointToPoint() override {
    // Broken first, so that what a callback posts from now on fails at once too.
    Break(Error(ErrorCode::kAborted,
                "rank " + std::to_string(rank()) + ": the point-to-point channel was closed",
                {rank(), -1, "", "p2p", 0}));
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    bell_cv_.notify_all();
    handover_->Wake();
    service_.join();
    bells_.join();
  }

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }

  void Send(const void* data, size_t bytes, int dst, int64_t tag, Done done) override {
    CheckPeer(dst, false, "send");
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return FailNow(std::move(lock), std::move(done), *broken_);
    if (auto& gone = gone_[static_cast<size_t>(dst)])
      return FailNow(std::move(lock), std::move(done), *gone);
    outbox_[static_cast<size_t>(dst)].push_back(SendOp{data, bytes, tag, std::move(done)});
    Connect(dst, /*ring=*/true);
    lock.unlock();
    handover_->Wake();
  }

  void Recv(void* data, size_t bytes, int src, int64_t tag, Done done) override {
    CheckPeer(src, true, "recv");
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return FailNow(std::move(lock), std::move(done), *broken_);
    for (auto it = arrived_.begin(); it != arrived_.end(); ++it) {
      if ((src != kAnySource && it->src != src) || it->tag != tag) continue;
      Arrived m = std::move(*it);
      arrived_.erase(it);
      unexpected_bytes_ -= m.payload.size();
      lock.unlock();
      handover_->Wake();  // room in the budget: a parked link may go on
      if (m.payload.size() != bytes) {
        const Error e = SizeMismatch(m.src, tag, m.payload.size(), bytes);
        done(m.src, &e);
        return;
      }
      if (bytes > 0) std::memcpy(data, m.payload.data(), bytes);
      done(m.src, nullptr);
      return;
    }
    if (src != kAnySource && gone_[static_cast<size_t>(src)])
      return FailNow(std::move(lock), std::move(done), *gone_[static_cast<size_t>(src)]);
    posted_.push_back(
        RecvOp{data, bytes, src, tag, std::move(done), Clock::now() + options_.timeout});
    if (src == kAnySource) {
      ++any_source_waiting_;
      bell_cv_.notify_all();
    } else {
      Connect(src, /*ring=*/false);
    }
    lock.unlock();
    handover_->Wake();
  }

  void Abort() override {
    Break(Error(ErrorCode::kAborted,
                "rank " + std::to_string(rank()) + ": the point-to-point channel was aborted",
                {rank(), -1, "", "p2p", 0}));
  }

 private:
  enum LinkState : char { kNone, kConnecting, kUp };

  void CheckPeer(int peer, bool any_ok, const char* what) const {
    if ((any_ok && peer == kAnySource) || (peer >= 0 && peer < size() && peer != rank())) return;
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(rank()) + ": " + what + ": rank " + std::to_string(peer) +
                    " is not another rank of this group of " + std::to_string(size()),
                {rank(), peer, "", what, 0});
  }

  static void FailNow(std::unique_lock<std::mutex> lock, Done done, Error e) {
    lock.unlock();
    done(-1, &e);
  }

  Error SizeMismatch(int src, int64_t tag, size_t got, size_t want) const {
    return Error(ErrorCode::kInvalidArgument,
                 "rank " + std::to_string(rank()) + ": recv of " + std::to_string(want) +
                     " bytes with tag " + std::to_string(tag) + " matched a message of " +
                     std::to_string(got) + " bytes from rank " + std::to_string(src) +
                     ": sender and receiver must agree on the size (the message is dropped)",
                 {rank(), src, "", "recv", 0});
  }

  // Under mu_: starts forming the pair with `peer` unless it is formed or forming. A sender rings
  // first, so that a receive from any source on the peer learns of it.
  void Connect(int peer, bool ring) {
    char& state = link_state_[static_cast<size_t>(peer)];
    if (state != kNone) return;
    state = kConnecting;
    MeshOptions m;
    m.log = options_.log;
    const int lo = std::min(rank(), peer), hi = std::max(rank(), peer);
    m.rank = rank() == lo ? 0 : 1;
    m.size = 2;
    m.rank_names = {lo, hi};
    m.generation = options_.generation;
    m.key_prefix = prefix_ + "/link/" + std::to_string(lo) + "-" + std::to_string(hi);
    m.secret = options_.secret;
    m.allow_insecure = options_.allow_insecure;
    m.encrypt = options_.encrypt;
    m.bind_host = options_.bind_host;
    m.advertise_host = options_.advertise_host;
    m.host_id = options_.host_id;
    m.timeout = options_.timeout;
    m.local_latency_socket_buffer_bytes = options_.local_latency_socket_buffer_bytes;
    m.local_bulk_socket_buffer_bytes = options_.local_bulk_socket_buffer_bytes;
    m.remote_socket_buffer_bytes = options_.remote_socket_buffer_bytes;
    std::string bell;
    if (ring) bell = prefix_ + "/bell/" + std::to_string(peer);
    std::thread([store = store_, handover = handover_, m, bell, me = rank(), peer] {
      try {
        if (!bell.empty()) {
          const int64_t n = store->Add(bell, 1);
          store->Set(bell + "/" + std::to_string(n), std::to_string(me));
        }
        std::unique_ptr<TcpMesh> mesh = TcpMesh::Connect(*store, m);
        std::lock_guard<std::mutex> lock(handover->mu);
        handover->ready.emplace_back(peer, std::move(mesh));
      } catch (const Error& e) {
        std::lock_guard<std::mutex> lock(handover->mu);
        handover->failed.push_back(
            Error(e.code(),
                  "rank " + std::to_string(me) + ": no point-to-point connection with rank " +
                      std::to_string(peer) + " within " + std::to_string(m.timeout.count()) +
                      " ms (both must send or receive naming each other, or the receiver from "
                      "any source): " +
                      e.what(),
                  {me, peer, "", "p2p connect", 0}));
      }
      handover->Wake();
    }).detach();
  }

  // Breaks the channel with `e` (the first error wins): what is posted fails now; what the service
  // thread holds fails there.
  void Break(const Error& e) {
    std::list<RecvOp> posted;
    std::vector<std::deque<SendOp>> outbox;
    Error first = e;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!broken_) broken_ = e;
      first = *broken_;
      posted.swap(posted_);
      outbox.swap(outbox_);
      outbox_.resize(static_cast<size_t>(size()));
      arrived_.clear();
      any_source_waiting_ = 0;
    }
    handover_->Wake();
    for (RecvOp& r : posted) r.done(-1, &first);
    for (auto& q : outbox)
      for (SendOp& s : q) s.done(-1, &first);
  }

  // The bell thread: while a receive from any source waits, reads who rang this rank and forms
  // the pair with it. Waits on the store in short slices (a torch store serialises its calls, so
  // a long wait would hold up every other user of it in this process).
  void WatchBells() {
    int64_t next = 1;
    const std::string mine = prefix_ + "/bell/" + std::to_string(rank());
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        bell_cv_.wait(lock, [&] { return stopping_ || (any_source_waiting_ > 0 && !broken_); });
        if (stopping_) return;
      }
      const std::string key = mine + "/" + std::to_string(next);
      try {
        try {
          store_->Wait({key}, std::chrono::milliseconds(20));
        } catch (const Error&) {
          if (!store_->Check(key)) continue;  // not yet (a store that fails throws here)
        }
        const std::string who = store_->Get(key, options_.timeout);
        const int peer = std::stoi(who);
        CheckPeer(peer, false, "bell");
        ++next;
        std::lock_guard<std::mutex> lock(mu_);
        Connect(peer, /*ring=*/false);
      } catch (const Error& e) {
        Break(e);
      } catch (const std::exception& e) {
        Break(Error(ErrorCode::kProtocol, "rank " + std::to_string(rank()) + ": bell " + key +
                                              " holds no rank: " + e.what()));
      }
    }
  }

  void Serve();
  void Adopt();
  void Drop(size_t index, const Error& e);
  bool Pump(Link& link);
  bool PumpOut(Link& link);
  bool PumpIn(Link& link);
  bool StartPayload(Link& link, const OpLabel& label);
  bool Discard(Link& link, const OpLabel& label);
  void NextHeader(Link& link);
  // A link that goes away half-way through an unexpected message: its bytes leave the budget.
  void ReleaseHalfRead(const Link& link) {
    if (!link.in_payload || link.target || link.discard_left > 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    unexpected_bytes_ -= link.in_header.bytes;
  }
  // Why a receive from `src` (or any source) may have waited in vain: a message parked ahead.
  std::string ParkedAhead(int src) const;
  void Deliver(Link& link);
  void ExpireReceives();
  void FailLinks(const Error& e);
  std::optional<RecvOp> TakePosted(int peer, int64_t tag);
  // Headers travel on the latency channel, and so do messages below bulk_min_bytes; larger ones
  // on the bulk channel, whose small socket buffers stream faster between ranks of one host
  // (TcpMesh, docs/benchmarks.md). Both ends know the size from the header.
  int Channel(size_t bytes) const {
    return bytes >= options_.bulk_min_bytes ? TcpMesh::kBulkChannel : TcpMesh::kLatencyChannel;
  }
  int InChannel(const Link& link) const {
    return link.in_payload ? Channel(link.in.bytes) : TcpMesh::kLatencyChannel;
  }

  const std::shared_ptr<Store> store_;
  const CommunicatorOptions options_;
  const std::string prefix_;
  const std::shared_ptr<Handover> handover_;
  // Service thread only. By pointer: each Link's transfers point into the Link itself.
  std::vector<std::unique_ptr<Link>> links_;

  std::mutex mu_;
  std::condition_variable bell_cv_;
  std::vector<std::deque<SendOp>> outbox_;  // per peer, under mu_
  std::list<RecvOp> posted_;                // under mu_, in order posted
  std::list<Arrived> arrived_;              // under mu_, in order of arrival
  // Under mu_: bytes of arrived_ plus those being read for messages no receive matched yet, at
  // most options_.p2p_unexpected_max_bytes (beyond one message larger than that alone).
  size_t unexpected_bytes_ = 0;
  std::vector<char> link_state_;  // under mu_
  int any_source_waiting_ = 0;    // under mu_
  std::optional<Error> broken_;   // under mu_
  // Per peer, under mu_: why its link closed (a peer that ended, or was lost, between messages).
  std::vector<std::optional<Error>> gone_;
  bool stopping_ = false;  // under mu_
  std::thread service_, bells_;
};

void TcpPointToPoint::Serve() {
  std::vector<pollfd> fds;
  Clock::time_point last_moved{};
  for (;;) {
    std::optional<Error> broken;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) break;
      broken = broken_;
    }
    if (broken) {
      FailLinks(*broken);
    } else {
      Adopt();
    }
    bool moved = false;
    for (size_t i = 0; i < links_.size(); ++i) {
      try {
        moved |= Pump(*links_[i]);
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kPeerLost) {
          Break(e);
          break;
        }
        Drop(i--, e);
        moved = true;
      }
    }
    ExpireReceives();
    const auto now = Clock::now();
    if (moved) last_moved = now;
    // A reply usually follows within microseconds: look again (yielding) for `spin` before
    // sleeping in poll(), as the communicator's exchanges do (CommunicatorOptions::spin).
    if (now - last_moved < options_.spin) {
      sched_yield();
      continue;
    }
    fds.clear();
    for (const auto& link : links_) {
      // A parked link's bytes wait for a receive (posting one wakes this thread), not for poll.
      if (!link->parked)
        fds.push_back({link->mesh->SocketOf(link->in, InChannel(*link)), POLLIN, 0});
      if (link->sending) {
        const bool header = link->out[0].done < link->out[0].bytes;
        const Transfer& out = link->out[header ? 0 : 1];
        const int channel = header ? TcpMesh::kLatencyChannel : Channel(out.bytes);
        fds.push_back({link->mesh->SocketOf(out, channel), POLLOUT, 0});
      }
    }
    fds.push_back({handover_->wake_fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), kPollMs) > 0 && (fds.back().revents & POLLIN)) {
      uint64_t n;
      [[maybe_unused]] ssize_t r = ::read(handover_->wake_fd, &n, sizeof n);
    }
  }
  std::optional<Error> why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    why = broken_;  // the destructor breaks the channel before it stops this thread
  }
  FailLinks(why ? *why : Error(ErrorCode::kAborted, "the point-to-point channel was closed"));
}

// The peer of links_[index] closed its connection (it ended its channel, or died): what names
// that peer fails with `e`, now and later; receives from any source wait on for the others. A
// message already received from it is still delivered.
void TcpPointToPoint::Drop(size_t index, const Error& e) {
  std::unique_ptr<Link> link = std::move(links_[index]);
  links_.erase(links_.begin() + static_cast<std::ptrdiff_t>(index));
  const int peer = link->peer;
  std::list<RecvOp> failed;
  std::deque<SendOp> unsent;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone_[static_cast<size_t>(peer)] = e;
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->src == peer)
        failed.splice(failed.end(), posted_, it++);
      else
        ++it;
    }
    unsent.swap(outbox_[static_cast<size_t>(peer)]);
  }
  link->mesh->ShutdownAll();
  ReleaseHalfRead(*link);
  if (link->sending) link->sending->done(-1, &e);
  if (link->target) link->target->done(-1, &e);
  for (RecvOp& r : failed) r.done(-1, &e);
  for (SendOp& op : unsent) op.done(-1, &e);
}

// Takes the pairs the connectors formed (or the error of one that failed).
void TcpPointToPoint::Adopt() {
  std::vector<std::pair<int, std::unique_ptr<TcpMesh>>> ready;
  std::vector<Error> failed;
  {
    std::lock_guard<std::mutex> lock(handover_->mu);
    ready.swap(handover_->ready);
    failed.swap(handover_->failed);
  }
  if (!failed.empty()) return Break(failed.front());
  for (auto& [peer, mesh] : ready) {
    auto link = std::make_unique<Link>();
    link->peer = peer;
    link->other = peer < rank() ? 0 : 1;
    link->mesh = std::move(mesh);
    link->in = Transfer::Recv(link->other, &link->in_header, sizeof link->in_header);
    links_.push_back(std::move(link));
    std::lock_guard<std::mutex> lock(mu_);
    link_state_[static_cast<size_t>(peer)] = kUp;
  }
}

bool TcpPointToPoint::Pump(Link& link) {
  const bool busy = link.Busy();
  bool moved = PumpOut(link);
  moved |= PumpIn(link);
  const auto now = Clock::now();
  if (moved || !busy) {  // silence counts from the start of a message, not from the last one
    link.last_progress = now;
  } else if (link.Busy() && now - link.last_progress >= options_.timeout) {
    throw Error(ErrorCode::kTimeout,
                "rank " + std::to_string(rank()) + " (this process) timed out on rank " +
                    std::to_string(link.peer) + " at " + link.mesh->peer_address(link.other) +
                    " during point-to-point: no byte moved for " +
                    std::to_string(options_.timeout.count()) +
                    " ms in the middle of a message; that rank is stopped, hung, or its link "
                    "is cut, or it holds as many unreceived messages as it keeps "
                    "(p2p_unexpected_max_bytes) and has not posted this one's receive",
                {rank(), link.peer, link.mesh->peer_address(link.other), "p2p", 0});
  }
  return moved;
}

bool TcpPointToPoint::PumpOut(Link& link) {
  if (!link.sending) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& q = outbox_[static_cast<size_t>(link.peer)];
    if (q.empty()) return false;
    link.sending = std::move(q.front());
    q.pop_front();
    link.out_header = {kMessageMagic, 0, link.sending->tag, link.sending->bytes};
    link.out[0] = Transfer::Send(link.other, &link.out_header, sizeof link.out_header);
    link.out[1] = Transfer::Send(link.other, link.sending->data, link.sending->bytes);
  }
  const OpLabel label{"send", link.sends + 1};
  bool moved = link.mesh->Advance(link.out[0], TcpMesh::kLatencyChannel, label);
  if (link.out[0].done == link.out[0].bytes)
    moved |= link.mesh->Advance(link.out[1], Channel(link.out[1].bytes), label);
  if (link.out[0].done < link.out[0].bytes || link.out[1].done < link.out[1].bytes) return moved;
  ++link.sends;
  SendOp done = std::move(*link.sending);
  link.sending.reset();
  done.done(link.peer, nullptr);
  return true;
}

bool TcpPointToPoint::PumpIn(Link& link) {
  const OpLabel label{"recv", link.recvs + 1};
  if (link.discard_left > 0) return Discard(link, label);
  bool moved = link.mesh->Advance(link.in, InChannel(link), label);
  if (link.in.done < link.in.bytes) return moved;
  if (!link.in_payload) {
    const MessageHeader& h = link.in_header;
    if (h.magic != kMessageMagic)
      throw Error(ErrorCode::kProtocol,
                  "rank " + std::to_string(rank()) + ": rank " + std::to_string(link.peer) +
                      " sent a point-to-point message without its header (magic " +
                      std::to_string(h.magic) + "): not a peer of this channel",
                  {rank(), link.peer, link.mesh->peer_address(link.other), "recv", 0});
    if (!StartPayload(link, label)) return moved;
    if (!link.in_payload) return true;  // dropped (a failed receive's), or under way
    link.mesh->Advance(link.in, InChannel(link), label);
    if (link.in.done < link.in.bytes) return true;
  }
  Deliver(link);
  return true;
}

// The header of `link` is in: where its bytes go. Into the posted receive that matches; dropped
// (Discard) when that receive has another size, which then fails; else kept aside, within the
// unexpected-bytes budget, or not yet (the link parks: false).
bool TcpPointToPoint::StartPayload(Link& link, const OpLabel& label) {
  const MessageHeader& h = link.in_header;
  std::unique_lock<std::mutex> lock(mu_);
  link.target = TakePosted(link.peer, h.tag);
  if (!link.target) {
    // Kept aside only within the budget; past it the message waits for its receive, unread.
    if (h.bytes > options_.p2p_unexpected_max_bytes -
                      std::min(options_.p2p_unexpected_max_bytes, unexpected_bytes_)) {
      link.parked = true;
      return false;
    }
    unexpected_bytes_ += h.bytes;
  }
  lock.unlock();
  link.parked = false;
  link.in_payload = true;
  if (link.target && link.target->bytes != h.bytes) {
    std::optional<RecvOp> failed = std::move(link.target);
    link.target.reset();
    link.in_payload = false;
    const Error e = SizeMismatch(link.peer, h.tag, h.bytes, failed->bytes);
    failed->done(link.peer, &e);
    if (h.bytes == 0) {
      NextHeader(link);
      return true;
    }
    link.discard_left = h.bytes;
    link.scratch.resize(kDiscardChunk);
    link.in = Transfer::Recv(link.other, link.scratch.data(),
                             static_cast<size_t>(std::min<uint64_t>(h.bytes, kDiscardChunk)));
    Discard(link, label);
    return true;
  }
  void* into = nullptr;
  if (link.target) {
    into = link.target->data;
  } else {
    link.scratch.resize(h.bytes);  // unexpected: kept aside (counted in unexpected_bytes_)
    into = link.scratch.data();
  }
  link.in = Transfer::Recv(link.other, into, h.bytes);
  return true;
}

// Reads and drops the rest of a message whose receive failed on its size, a chunk at a time.
bool TcpPointToPoint::Discard(Link& link, const OpLabel& label) {
  bool moved = false;
  for (;;) {
    const int channel = Channel(link.in_header.bytes);
    moved |= link.mesh->Advance(link.in, channel, label);
    if (link.in.done < link.in.bytes) return moved;
    link.discard_left -= link.in.bytes;
    if (link.discard_left == 0) {
      link.scratch = std::vector<char>();
      NextHeader(link);
      return true;
    }
    link.in =
        Transfer::Recv(link.other, link.scratch.data(),
                       static_cast<size_t>(std::min<uint64_t>(link.discard_left, kDiscardChunk)));
  }
}

// The message on `link` is done with: read the next header.
void TcpPointToPoint::NextHeader(Link& link) {
  ++link.recvs;
  link.in_payload = false;
  link.in = Transfer::Recv(link.other, &link.in_header, sizeof link.in_header);
}

// A whole message is in: complete its receive, or keep it for one to come.
void TcpPointToPoint::Deliver(Link& link) {
  const MessageHeader h = link.in_header;
  std::optional<RecvOp> target = std::move(link.target);
  std::vector<char> payload = std::move(link.scratch);
  link.target.reset();
  link.scratch.clear();
  NextHeader(link);
  if (!target) {
    std::unique_lock<std::mutex> lock(mu_);
    target = TakePosted(link.peer, h.tag);
    if (!target) {
      arrived_.push_back(Arrived{link.peer, h.tag, std::move(payload)});
      return;
    }
    unexpected_bytes_ -= payload.size();
    lock.unlock();
    if (target->bytes == payload.size() && !payload.empty())
      std::memcpy(target->data, payload.data(), payload.size());
  }
  if (target->bytes != h.bytes) {
    const Error e = SizeMismatch(link.peer, h.tag, h.bytes, target->bytes);
    target->done(link.peer, &e);
    return;
  }
  target->done(link.peer, nullptr);
}

void TcpPointToPoint::ExpireReceives() {
  std::list<RecvOp> expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = Clock::now();
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->deadline > now) {
        ++it;
        continue;
      }
      if (it->src == kAnySource) --any_source_waiting_;
      expired.splice(expired.end(), posted_, it++);
    }
  }
  for (RecvOp& r : expired) {
    const Error e(ErrorCode::kTimeout,
                  "rank " + std::to_string(rank()) + ": recv from " + Who(r.src) + " with tag " +
                      std::to_string(r.tag) + ": no message came within " +
                      std::to_string(options_.timeout.count()) +
                      " ms (the group's timeout); nothing was written to its buffer" +
                      ParkedAhead(r.src),
                  {rank(), r.src, "", "recv", 0});
    r.done(-1, &e);
  }
}

// The channel broke: what the links hold fails, and their connections close (so that their peers
// fail at once too).
void TcpPointToPoint::FailLinks(const Error& e) {
  std::vector<std::unique_ptr<Link>> links;
  links.swap(links_);
  for (auto& link : links) {
    link->mesh->ShutdownAll();
    ReleaseHalfRead(*link);
    if (link->sending) link->sending->done(-1, &e);
    if (link->target) link->target->done(-1, &e);
  }
  std::vector<std::pair<int, std::unique_ptr<TcpMesh>>> ready;
  {
    std::lock_guard<std::mutex> lock(handover_->mu);
    ready.swap(handover_->ready);
    handover_->failed.clear();
  }
  for (auto& r : ready) r.second->ShutdownAll();
}

std::string TcpPointToPoint::ParkedAhead(int src) const {
  for (const auto& link : links_) {
    if (!link->parked || (src != kAnySource && link->peer != src)) continue;
    return "; a message from rank " + std::to_string(link->peer) + " with tag " +
           std::to_string(link->in_header.tag) + " (" + std::to_string(link->in_header.bytes) +
           " bytes) waits ahead of it for its own receive: the messages kept for receives not yet "
           "posted reached their budget (CommunicatorOptions::p2p_unexpected_max_bytes, " +
           std::to_string(options_.p2p_unexpected_max_bytes) + ")";
  }
  return "";
}

// Under mu_: the first receive posted for a message from `peer` with `tag` (from that peer or
// from any source), taken off the list.
std::optional<RecvOp> TcpPointToPoint::TakePosted(int peer, int64_t tag) {
  for (auto it = posted_.begin(); it != posted_.end(); ++it) {
    if ((it->src != kAnySource && it->src != peer) || it->tag != tag) continue;
    if (it->src == kAnySource) --any_source_waiting_;
    RecvOp op = std::move(*it);
    posted_.erase(it);
    return op;
  }
  return std::nullopt;
}

}  // namespace

std::unique_ptr<PointToPoint> CreatePointToPoint(std::shared_ptr<Store> store,
                                                 const CommunicatorOptions& options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size)
    throw Error(ErrorCode::kInvalidArgument, "rank " + std::to_string(options.rank) +
                                                 " is outside world size " +
                                                 std::to_string(options.size));
  if (options.timeout.count() <= 0)
    throw Error(ErrorCode::kInvalidArgument,
                "rank " + std::to_string(options.rank) + ": the timeout must be positive");
  if (!store) throw Error(ErrorCode::kInvalidArgument, "point-to-point needs a store");
  return std::make_unique<TcpPointToPoint>(std::move(store), options);
}

}  // namespace cdt
