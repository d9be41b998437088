// OperationWatch: what a caller waiting for a Work can see of its communicator (cdt::Work's wait
// contract, docs/errors.md "Waits"): a progress counter that the transport bumps whenever bytes
// move, a shared-memory barrier step completes or an operation starts or ends, and the way to
// abort the communicator once nothing moved for the wait's timeout.
//
// A Work waits on its own operation, which may sit in the queue behind others: while any of them
// moves, the wait goes on (a long queue on a slow link is not a failure). Only silence — no
// operation of the communicator moving at all — ends it, and then by aborting the communicator
// and joining the operation, so that no buffer is written after Wait returns or throws.
//
// Shared (std::shared_ptr) by the communicator and every Work it handed out: a Work that outlives
// its communicator never calls into it (Detach() runs first in the communicator's destructor).
// Thread-safety: Tick() and progress() from any thread, lock-free; Attach/Detach/AbortStalled
// under the watch's own mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace cdt {

class OperationWatch {
 public:
  // The transport's hot path: one relaxed increment (a counter only compared for change).
  void Tick() { progress_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }
  // For transports that keep the pointer (TcpMesh, NodeArena); valid while the watch lives.
  std::atomic<uint64_t>* counter() { return &progress_; }

  // `abort(reason)` aborts the communicator: every running and queued operation fails at once.
  void Attach(std::function<void(const std::string& reason)> abort) {
    std::lock_guard<std::mutex> lock(mu_);
    abort_ = std::move(abort);
  }
  // The communicator is going away: AbortStalled does nothing from now on.
  void Detach() {
    std::lock_guard<std::mutex> lock(mu_);
    abort_ = nullptr;
  }
  void AbortStalled(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_) abort_(reason);
  }

 private:
  std::atomic<uint64_t> progress_{0};
  std::mutex mu_;
  std::function<void(const std::string&)> abort_;  // guarded by mu_
};

}  // namespace cdt
