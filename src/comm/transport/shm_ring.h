// ShmRing: a one-way byte stream between two processes of one host through shared memory — the
// first piece of the same-node transport (issue 32; anchors: Open MPI's vader BTL fastboxes,
// NCCL's SHM transport). One writer, one reader; bytes arrive in order, like a TCP stream.
//
// Layout of a ring in its segment (offsets from the segment's start, each field on its own cache
// line so that writer and reader do not false-share):
//   header   magic, capacity (a power of two)
//   head     bytes written so far (the writer stores it after copying: release)
//   tail     bytes read so far (the reader stores it after copying: release)
//   data_seq, space_seq   futex words: bumped when bytes / space appear and the other side waits
//   waiters  who sleeps (writer: space; reader: data)
//   closed   set by Close() or Abort() from either side: the other's waits end at once
//   data     capacity bytes
//
// Waiting spins for `spin`, then sleeps on a futex — shared between processes, so not libstdc++'s
// std::atomic::wait, which uses process-private futexes: this is written by hand for that reason.
// Every wait has a deadline (kTimeout: a stopped peer); a peer that dies is not seen here — the
// owner learns it from the connection or a pidfd and calls Abort(), which wakes both sides.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/transport/shm_segment.h"

namespace cdt::shm {

class Ring {
 public:
  // The bytes a ring of `capacity` data bytes (a power of two, at least 4 KiB) takes in a segment.
  static size_t BytesFor(size_t capacity);
  // Lays a new ring out at `memory` (BytesFor(capacity) bytes, 64-byte aligned, zeroed).
  static Ring Create(void* memory, size_t capacity);
  // A ring another process created at `memory`; throws cdt::Error(kProtocol) if it is not one.
  static Ring Attach(void* memory);

  // Copies `bytes` in, waiting for space; throws cdt::Error: kTimeout (no space for `timeout`:
  // the reader stalled), kAborted (closed). `what` names the peer in errors.
  void Write(const void* data, size_t bytes, std::chrono::milliseconds timeout,
             const std::string& what);
  // Copies `bytes` out, waiting for data; the same errors (kTimeout: the writer stalled).
  void Read(void* data, size_t bytes, std::chrono::milliseconds timeout, const std::string& what);
  // Without waiting: how many bytes were copied (0..bytes).
  size_t TryWrite(const void* data, size_t bytes);
  size_t TryRead(void* data, size_t bytes);

  // From any thread of either process: every wait on the ring, present and future, ends with
  // kAborted.
  void Abort();
  bool aborted() const;
  size_t capacity() const { return capacity_; }

  // How long a wait spins before it sleeps.
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }

 private:
  struct Header;
  Ring(Header* h, unsigned char* data, size_t capacity) : h_(h), data_(data), capacity_(capacity) {}
  // Waits until `ready()` or the deadline; `seq` is the futex word the other side bumps, `waiting`
  // the flag it checks before bumping.
  template <typename Ready>
  void WaitFor(Ready ready, std::atomic<uint32_t>& seq, std::atomic<uint32_t>& waiting,
               std::chrono::steady_clock::time_point deadline, const char* for_what,
               const std::string& what);

  Header* h_ = nullptr;
  unsigned char* data_ = nullptr;
  size_t capacity_ = 0;
  std::chrono::microseconds spin_{50};
};

}  // namespace cdt::shm
