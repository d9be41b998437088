#include "comm/transport/node_arena.h"

#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "cdt/error.h"
#include "comm/transport/cross_memory.h"
#include "comm/transport/shared_futex.h"

namespace cdt::shm {
namespace {

constexpr uint64_t kMagic = 0x63647461726e6131ULL;  // "cdtarna1"
constexpr size_t kReasonBytes = 512;
constexpr size_t kPage = 4096;
// The longest a waiter sleeps before it looks at the members' pidfds again: how late a dead
// member is noticed at worst.
constexpr auto kSleepSlice = std::chrono::milliseconds(50);

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

uint64_t PidNamespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

int PidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

std::string Label(const char* op, uint64_t seq) {
  return std::string(op) + " #" + std::to_string(seq);
}

bool Exited(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

}  // namespace

struct NodeArena::Header {
  alignas(64) uint64_t magic;
  uint32_t members;
  uint32_t unused;
  uint64_t slot_bytes;
  alignas(64) std::atomic<uint32_t> aborted;  // 0, or 1 + the member that aborted first
  std::atomic<uint32_t> reason_ready;         // the reason below is written
  int32_t reason_code;                        // the aborting member's ErrorCode
  int32_t reason_peer;                        // and the rank its error named (-1: none)
  char reason[kReasonBytes];
  alignas(64) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleepers;
};

struct NodeArena::Member {
  alignas(64) std::atomic<uint64_t> arrived;
  int32_t pid;
  uint64_t pid_namespace;
  uint64_t mapping;  // the segment's address in the member's process (single-copy probe)
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "a shared-memory arena needs lock-free atomics");

std::optional<size_t> NodeArena::CheckedBytesFor(int64_t members, uint64_t slot_bytes) {
  if (members < 1 || members > kMaxMembers || slot_bytes == 0 || slot_bytes > kMaxSlotBytes)
    return std::nullopt;
  // Within those limits: head < 1 MiB, slots <= 2 x 4096 x 1 GiB = 2^43 bytes; no term can wrap a
  // 64-bit size. Checked all the same, so that a change of the limits cannot make it wrap.
  const size_t n = static_cast<size_t>(members);
  size_t slots = 0, total = 0;
  const size_t head = RoundUp(sizeof(Header) + sizeof(Member) * n, kPage);
  if (__builtin_mul_overflow(2 * n, RoundUp(static_cast<size_t>(slot_bytes), kPage), &slots) ||
      __builtin_add_overflow(head, slots, &total))
    return std::nullopt;
  return total;
}

size_t NodeArena::BytesFor(int members, size_t slot_bytes) {
  if (auto bytes = CheckedBytesFor(members, slot_bytes)) return *bytes;
  throw Error(ErrorCode::kInvalidArgument,
              "shared-memory arena: " + std::to_string(members) + " members of " +
                  std::to_string(slot_bytes) + "-byte slots: members must be 1.." +
                  std::to_string(kMaxMembers) + " and slots 1.." + std::to_string(kMaxSlotBytes) +
                  " bytes (CDT_SHM_SLOT_BYTES)");
}

NodeArena::NodeArena(Segment segment, int me, std::vector<int> ranks, size_t slot_bytes)
    : segment_(std::move(segment)),
      me_(me),
      ranks_(std::move(ranks)),
      slot_bytes_(slot_bytes),
      pidfds_(ranks_.size(), -1) {}

NodeArena::NodeArena(NodeArena&& o) noexcept
    : segment_(std::move(o.segment_)),
      me_(o.me_),
      ranks_(std::move(o.ranks_)),
      slot_bytes_(o.slot_bytes_),
      pidfds_(std::move(o.pidfds_)),
      step_(o.step_),
      uses_(o.uses_),
      spin_(o.spin_),
      progress_(o.progress_),
      single_copy_(o.single_copy_) {
  o.pidfds_.clear();
}

NodeArena::~NodeArena() {
  for (int fd : pidfds_)
    if (fd >= 0) ::close(fd);
}

NodeArena::Header* NodeArena::header() const { return static_cast<Header*>(segment_.data()); }

NodeArena::Member& NodeArena::member(int i) const {
  auto* first = reinterpret_cast<Member*>(static_cast<char*>(segment_.data()) + sizeof(Header));
  return first[i];
}

char* NodeArena::slot(int set, int m) const {
  const size_t head =
      RoundUp(sizeof(Header) + sizeof(Member) * static_cast<size_t>(members()), kPage);
  const size_t index =
      static_cast<size_t>(set) * static_cast<size_t>(members()) + static_cast<size_t>(m);
  return static_cast<char*>(segment_.data()) + head + index * RoundUp(slot_bytes_, kPage);
}

NodeArena NodeArena::Create(Segment segment, int me, const std::vector<int>& ranks,
                            size_t slot_bytes) {
  const int n = static_cast<int>(ranks.size());
  if (n < 1 || me < 0 || me >= n || segment.size() < BytesFor(n, slot_bytes))
    throw Error(ErrorCode::kInvalidArgument,
                "shared-memory arena " + segment.name() + ": " + std::to_string(n) +
                    " members of " + std::to_string(slot_bytes) + "-byte slots need " +
                    std::to_string(BytesFor(n, slot_bytes)) + " bytes, the segment has " +
                    std::to_string(segment.size()));
  auto* h = new (segment.data()) Header();
  for (int i = 0; i < n; ++i)
    new (static_cast<char*>(segment.data()) + sizeof(Header) + sizeof(Member) * i) Member();
  h->members = static_cast<uint32_t>(n);
  h->slot_bytes = slot_bytes;
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kMagic;
  NodeArena a(std::move(segment), me, ranks, slot_bytes);
  a.Register();
  return a;
}

size_t NodeArena::CheckHeader(const void* data, size_t size, int members, const std::string& name) {
  if (size < sizeof(Header) || static_cast<const Header*>(data)->magic != kMagic)
    throw Error(ErrorCode::kProtocol, "shared-memory arena " + name + ": not an arena of " +
                                          std::to_string(members) +
                                          " members (bad magic or too small)");
  // Read once: another process maps this memory too, and what is checked must be what is used.
  const volatile Header* h = static_cast<const Header*>(data);
  const uint32_t claimed = h->members;
  const uint64_t slot_bytes = h->slot_bytes;
  const std::optional<size_t> bytes = CheckedBytesFor(claimed, slot_bytes);
  if (claimed != static_cast<uint32_t>(members) || !bytes || size < *bytes)
    throw Error(ErrorCode::kProtocol,
                "shared-memory arena " + name + ": its header describes " +
                    std::to_string(claimed) + " members of " + std::to_string(slot_bytes) +
                    "-byte slots, which does not fit this group of " + std::to_string(members) +
                    " or its " + std::to_string(size) + "-byte segment (slots 1.." +
                    std::to_string(kMaxSlotBytes) + " bytes); not used");
  return static_cast<size_t>(slot_bytes);
}

NodeArena NodeArena::Attach(Segment segment, int me, const std::vector<int>& ranks) {
  const int n = static_cast<int>(ranks.size());
  if (me < 0 || me >= n)
    throw Error(ErrorCode::kInvalidArgument, "shared-memory arena " + segment.name() + ": member " +
                                                 std::to_string(me) + " of " + std::to_string(n));
  const size_t slot_bytes = CheckHeader(segment.data(), segment.size(), n, segment.name());
  NodeArena a(std::move(segment), me, ranks, slot_bytes);
  a.Register();
  return a;
}

void NodeArena::Register() {
  Member& m = member(me_);
  m.pid = static_cast<int32_t>(::getpid());
  m.pid_namespace = PidNamespace();
  m.mapping = reinterpret_cast<uintptr_t>(segment_.data());
}

void NodeArena::WatchMembers() {
  const uint64_t mine = PidNamespace();
  for (int i = 0; i < members(); ++i) {
    if (i == me_ || pidfds_[i] >= 0) continue;
    const Member& m = member(i);
    if (mine != 0 && m.pid_namespace == mine && m.pid > 0) pidfds_[i] = PidfdOpen(m.pid);
  }
}

std::string NodeArena::ProbeSingleCopy() const {
  const uint64_t mine = PidNamespace();
  for (int i = 0; i < members(); ++i) {
    if (i == me_) continue;
    const Member& m = member(i);
    if (mine == 0 || m.pid_namespace != mine || m.pid <= 0)
      return Describe(i) + " runs in another pid namespace";
    uint64_t seen = 0;
    const int err = ReadProcess(m.pid, static_cast<uintptr_t>(m.mapping), &seen, sizeof seen);
    if (err != 0)
      return "process_vm_readv of " + Describe(i) + ": " + std::strerror(err) +
             (err == EPERM ? " (a ptrace policy: kernel.yama.ptrace_scope 0 allows it)" : "");
    if (seen != kMagic) return Describe(i) + " has no arena where it said it mapped one";
  }
  return "";
}

void NodeArena::ReadMember(int i, uintptr_t remote, void* local, size_t bytes, const char* op,
                           uint64_t seq) const {
  const int err = ReadProcess(member(i).pid, remote, local, bytes);
  if (err == 0) return;
  if (aborted()) ThrowAborted(step_, op, seq);
  const int me = ranks_[static_cast<size_t>(me_)], peer = ranks_[static_cast<size_t>(i)];
  if (err == ESRCH)
    throw Error(ErrorCode::kPeerLost,
                "rank " + std::to_string(me) + " (this process) lost " + Describe(i) + " during " +
                    Label(op, seq) +
                    ": it exited while this rank read its data; that process "
                    "died — rebuild the group without it",
                {me, peer, "", op, seq});
  throw Error(ErrorCode::kIo,
              "rank " + std::to_string(me) + ": " + Label(op, seq) + ": reading " +
                  std::to_string(bytes) + " bytes from " + Describe(i) +
                  " (process_vm_readv) failed: " + std::strerror(err) +
                  "; set CDT_SHM_SINGLE_COPY=0 to copy through shared memory instead",
              {me, peer, "", op, seq});
}

std::string NodeArena::Describe(int i) const {
  return "rank " + std::to_string(ranks_[static_cast<size_t>(i)]) + " (pid " +
         std::to_string(member(i).pid) + ", this node)";
}

void NodeArena::Arrive(uint64_t step) {
  Header* h = header();
  member(me_).arrived.store(step, std::memory_order_seq_cst);
  if (h->sleepers.load(std::memory_order_seq_cst) != 0) {
    h->bell.fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(&h->bell);
  }
}

int NodeArena::Behind(uint64_t step) const {
  for (int i = 0; i < members(); ++i)
    if (member(i).arrived.load(std::memory_order_seq_cst) < step) return i;
  return -1;
}

void NodeArena::CheckAlive(uint64_t step, const char* op, uint64_t seq) const {
  for (int i = 0; i < members(); ++i) {
    const int fd = pidfds_[static_cast<size_t>(i)];
    if (fd < 0 || member(i).arrived.load(std::memory_order_seq_cst) >= step || !Exited(fd))
      continue;
    throw Error(ErrorCode::kPeerLost,
                "rank " + std::to_string(ranks_[static_cast<size_t>(me_)]) +
                    " (this process) lost " + Describe(i) + " during " + Label(op, seq) +
                    ": it exited while this node's ranks waited for it in shared memory; that "
                    "process died — rebuild the group without it",
                {ranks_[static_cast<size_t>(me_)], ranks_[static_cast<size_t>(i)], "", op, seq});
  }
}

void NodeArena::ThrowAborted(uint64_t step, const char* op, uint64_t seq) const {
  CheckAlive(step, op, seq);  // a dead member is the better explanation
  const Header* h = header();
  std::string reason = "aborted";
  if (h->reason_ready.load(std::memory_order_acquire))
    reason = std::string(h->reason, strnlen(h->reason, kReasonBytes));
  const int by = static_cast<int>(h->aborted.load(std::memory_order_acquire)) - 1;
  // The aborting member's error, as its code and peer: a survivor reports the rank that failed,
  // as over TCP, not the member that noticed first.
  ErrorCode code = ErrorCode::kAborted;
  int peer = by >= 0 && by < members() ? ranks_[static_cast<size_t>(by)] : -1;
  if (h->reason_ready.load(std::memory_order_acquire)) {
    code = static_cast<ErrorCode>(h->reason_code);
    if (h->reason_peer >= 0) peer = h->reason_peer;
  }
  throw Error(code,
              "rank " + std::to_string(ranks_[static_cast<size_t>(me_)]) + ": " + Label(op, seq) +
                  ": the node's shared-memory group was aborted by " +
                  (by >= 0 && by < members() ? Describe(by) : std::string("a member")) + ": " +
                  reason,
              {ranks_[static_cast<size_t>(me_)], peer, "", op, seq});
}

void NodeArena::ThrowTimeout(uint64_t step, std::chrono::milliseconds timeout, const char* op,
                             uint64_t seq) const {
  std::string behind;
  int first = -1;
  for (int i = 0; i < members(); ++i) {
    if (member(i).arrived.load(std::memory_order_seq_cst) >= step) continue;
    if (first < 0) first = i;
    behind += (behind.empty() ? "" : ", ") + Describe(i);
  }
  throw Error(ErrorCode::kTimeout,
              "rank " + std::to_string(ranks_[static_cast<size_t>(me_)]) +
                  " (this process) timed out on " + behind + " during " + Label(op, seq) +
                  ": waited " + std::to_string(timeout.count()) +
                  " ms in shared memory; that rank is stopped, hung, in another collective or "
                  "slower than --timeout",
              {ranks_[static_cast<size_t>(me_)],
               first >= 0 ? ranks_[static_cast<size_t>(first)] : -1, "", op, seq});
}

void NodeArena::WaitAll(uint64_t step, std::chrono::milliseconds timeout, const char* op,
                        uint64_t seq) {
  using Clock = std::chrono::steady_clock;
  Header* h = header();
  const auto start = Clock::now();
  const auto deadline = start + timeout;
  const auto spin_until = start + spin_;
  const auto tick = [this] {
    if (progress_) progress_->fetch_add(1, std::memory_order_relaxed);
  };
  for (unsigned i = 0;; ++i) {
    if (Behind(step) < 0) return tick();
    if (h->aborted.load(std::memory_order_acquire)) ThrowAborted(step, op, seq);
    if ((i & 63) == 63 && Clock::now() >= spin_until) break;
    sched_yield();
  }
  for (;;) {
    h->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = h->bell.load(std::memory_order_seq_cst);
    const bool done = Behind(step) < 0;
    const bool aborted = h->aborted.load(std::memory_order_seq_cst) != 0;
    const auto now = Clock::now();
    if (!done && !aborted && now < deadline)
      FutexWait(&h->bell, seen, std::min<Clock::duration>(deadline - now, kSleepSlice));
    h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (done || Behind(step) < 0) return tick();
    if (aborted || h->aborted.load(std::memory_order_acquire)) ThrowAborted(step, op, seq);
    CheckAlive(step, op, seq);
    if (Clock::now() >= deadline) ThrowTimeout(step, timeout, op, seq);
  }
}

void NodeArena::Abort(const std::string& reason, ErrorCode code, int peer_rank) {
  Header* h = header();
  uint32_t expected = 0;
  if (h->aborted.compare_exchange_strong(expected, static_cast<uint32_t>(me_) + 1,
                                         std::memory_order_seq_cst)) {
    const size_t n = std::min(reason.size(), kReasonBytes - 1);
    std::memcpy(h->reason, reason.data(), n);
    h->reason[n] = '\0';
    h->reason_code = static_cast<int32_t>(code);
    h->reason_peer = peer_rank;
    h->reason_ready.store(1, std::memory_order_release);
  }
  h->bell.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&h->bell);
}

bool NodeArena::aborted() const { return header()->aborted.load(std::memory_order_acquire) != 0; }

}  // namespace cdt::shm
