#include "comm/transport/shm_ring.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include "cdt/error.h"

namespace cdt::shm {
namespace {

constexpr uint64_t kMagic = 0x63647473686d7231ULL;  // "cdtshmr1"
constexpr size_t kMinCapacity = 4096;

std::string Errno() { return std::strerror(errno); }

// FUTEX_WAIT / FUTEX_WAKE on a word shared between processes (no FUTEX_PRIVATE_FLAG).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000000),
              static_cast<long>(timeout.count() % 1000000000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}
void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

}  // namespace

struct Ring::Header {
  alignas(64) uint64_t magic;
  uint64_t capacity;
  alignas(64) std::atomic<uint64_t> head;  // written by the writer
  alignas(64) std::atomic<uint64_t> tail;  // written by the reader
  alignas(64) std::atomic<uint32_t> data_seq;
  std::atomic<uint32_t> reader_waiting;
  alignas(64) std::atomic<uint32_t> space_seq;
  std::atomic<uint32_t> writer_waiting;
  alignas(64) std::atomic<uint32_t> closed;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free,
              "shared-memory rings need lock-free atomics");

// ---- Segment ---------------------------------------------------------------------------------

Segment Segment::Create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot create: " + Errno());
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = Errno();
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot size to " +
                                    std::to_string(bytes) + " bytes: " + why +
                                    " (is /dev/shm full?)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string why = Errno();
  ::close(fd);
  if (p == MAP_FAILED) {
    ::shm_unlink(name.c_str());
    throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot map: " + why);
  }
  Segment s;
  s.name_ = name;
  s.data_ = p;
  s.size_ = bytes;
  return s;
}

Segment Segment::Open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot open: " + Errno());
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    throw Error(ErrorCode::kIo, "shared memory " + name + ": empty or unreadable");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string why = Errno();
  ::close(fd);
  if (p == MAP_FAILED) throw Error(ErrorCode::kIo, "shared memory " + name + ": cannot map: " + why);
  Segment s;
  s.name_ = name;
  s.data_ = p;
  s.size_ = bytes;
  return s;
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), data_(std::exchange(o.data_, nullptr)), size_(o.size_) {}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    name_ = std::move(o.name_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
  }
  return *this;
}

Segment::~Segment() {
  if (data_) ::munmap(data_, size_);
}

bool Segment::Unlink() { return !name_.empty() && ::shm_unlink(name_.c_str()) == 0; }

// ---- Ring ------------------------------------------------------------------------------------

size_t Ring::BytesFor(size_t capacity) { return sizeof(Header) + capacity; }

Ring Ring::Create(void* memory, size_t capacity) {
  if (capacity < kMinCapacity || (capacity & (capacity - 1)) != 0)
    throw Error(ErrorCode::kInvalidArgument,
                "shared-memory ring: capacity " + std::to_string(capacity) +
                    " is not a power of two of at least 4096 bytes");
  if (reinterpret_cast<uintptr_t>(memory) % 64 != 0)
    throw Error(ErrorCode::kInvalidArgument, "shared-memory ring: memory not 64-byte aligned");
  Header* h = new (memory) Header();
  h->magic = kMagic;
  h->capacity = capacity;
  return Ring(h, static_cast<unsigned char*>(memory) + sizeof(Header), capacity);
}

Ring Ring::Attach(void* memory) {
  Header* h = static_cast<Header*>(memory);
  if (h->magic != kMagic || h->capacity < kMinCapacity || (h->capacity & (h->capacity - 1)) != 0)
    throw Error(ErrorCode::kProtocol, "shared-memory ring: not a ring (bad magic or capacity)");
  return Ring(h, static_cast<unsigned char*>(memory) + sizeof(Header),
              static_cast<size_t>(h->capacity));
}

size_t Ring::TryWrite(const void* data, size_t bytes) {
  const uint64_t head = h_->head.load(std::memory_order_relaxed);
  const uint64_t tail = h_->tail.load(std::memory_order_acquire);
  const size_t n = std::min(bytes, capacity_ - static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const size_t at = static_cast<size_t>(head) & (capacity_ - 1);
  const size_t first = std::min(n, capacity_ - at);
  std::memcpy(data_ + at, data, first);
  std::memcpy(data_, static_cast<const unsigned char*>(data) + first, n - first);
  h_->head.store(head + n, std::memory_order_release);
  if (h_->reader_waiting.load(std::memory_order_seq_cst)) {
    h_->data_seq.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&h_->data_seq);
  }
  return n;
}

size_t Ring::TryRead(void* data, size_t bytes) {
  const uint64_t tail = h_->tail.load(std::memory_order_relaxed);
  const uint64_t head = h_->head.load(std::memory_order_acquire);
  const size_t n = std::min(bytes, static_cast<size_t>(head - tail));
  if (n == 0) return 0;
  const size_t at = static_cast<size_t>(tail) & (capacity_ - 1);
  const size_t first = std::min(n, capacity_ - at);
  std::memcpy(data, data_ + at, first);
  std::memcpy(static_cast<unsigned char*>(data) + first, data_, n - first);
  h_->tail.store(tail + n, std::memory_order_release);
  if (h_->writer_waiting.load(std::memory_order_seq_cst)) {
    h_->space_seq.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&h_->space_seq);
  }
  return n;
}

template <typename Ready>
void Ring::WaitFor(Ready ready, std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiting,
                   std::chrono::steady_clock::time_point deadline, const char* for_what,
                   const std::string& what) {
  using Clock = std::chrono::steady_clock;
  const auto spin_until = Clock::now() + spin_;
  for (;;) {
    if (h_->closed.load(std::memory_order_acquire))
      throw Error(ErrorCode::kAborted, what + ": the shared-memory channel was closed");
    if (ready()) return;
    const auto now = Clock::now();
    if (now >= deadline)
      throw Error(ErrorCode::kTimeout, what + ": no " + std::string(for_what) +
                                           " in the shared-memory channel before the timeout "
                                           "(the peer stopped or is stuck)");
    if (now < spin_until) {
      sched_yield();
      continue;
    }
    // Announce, then look again (the other side checks `waiting` after publishing), then sleep
    // until bumped, closed, or at most 100 ms (a bound, not a poll interval the protocol needs).
    // `ready()` moves bytes when it can: if this second look moved some, the wait is over (sleeping
    // on would make the next look find nothing left to move and wait out the deadline).
    const uint32_t seen = seq.load(std::memory_order_acquire);
    waiting.store(1, std::memory_order_seq_cst);
    const bool moved = ready();
    if (!moved && !h_->closed.load(std::memory_order_acquire))
      FutexWait(&seq, seen,
                std::min<Clock::duration>(deadline - now, std::chrono::milliseconds(100)));
    waiting.store(0, std::memory_order_relaxed);
    if (moved) return;
  }
}

void Ring::Write(const void* data, size_t bytes, std::chrono::milliseconds timeout,
                 const std::string& what) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  size_t done = 0;
  while (done < bytes) {
    // A stalled reader is one that frees no space for `timeout`: the deadline restarts on
    // progress (as TcpMesh's "no byte moved").
    const auto until = std::chrono::steady_clock::now() + timeout;
    WaitFor(
        [&] {
          const size_t n = TryWrite(p + done, bytes - done);
          done += n;
          return n > 0;
        },
        h_->space_seq, h_->writer_waiting, until, "space", what);
  }
}

void Ring::Read(void* data, size_t bytes, std::chrono::milliseconds timeout,
                const std::string& what) {
  unsigned char* p = static_cast<unsigned char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    WaitFor(
        [&] {
          const size_t n = TryRead(p + done, bytes - done);
          done += n;
          return n > 0;
        },
        h_->data_seq, h_->reader_waiting, deadline, "data", what);
  }
}

void Ring::Abort() {
  h_->closed.store(1, std::memory_order_seq_cst);
  h_->data_seq.fetch_add(1, std::memory_order_release);
  h_->space_seq.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&h_->data_seq);
  FutexWakeAll(&h_->space_seq);
}

bool Ring::aborted() const { return h_->closed.load(std::memory_order_acquire) != 0; }

}  // namespace cdt::shm
