#include "comm/transport/shm_ring.h"

#include <sched.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "cdt/error.h"
#include "comm/transport/shared_futex.h"

namespace cdt::shm {
namespace {

constexpr uint64_t kMagic = 0x63647473686d7231ULL;  // "cdtshmr1"
constexpr size_t kMinCapacity = 4096;

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
