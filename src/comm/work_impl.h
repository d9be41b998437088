// Work handle of one queued operation (see cdt::Work for the contract).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cdt/communicator.h"
#include "cdt/error.h"
#include "comm/operation_watch.h"

namespace cdt {

class WorkImpl : public Work {
 public:
  // `spin`: how long Wait() looks for completion (yielding) before it sleeps; see
  // CommunicatorOptions::idle_spin. `watch`: the communicator's progress and abort
  // (comm/operation_watch.h); null only for backends whose operations complete before the Work
  // is handed out (MPI), whose Wait just reads the result.
  WorkImpl(std::string description, std::chrono::milliseconds default_wait,
           std::chrono::microseconds spin = std::chrono::microseconds(0),
           std::shared_ptr<OperationWatch> watch = nullptr)
      : description_(std::move(description)),
        default_wait_(default_wait),
        spin_(spin),
        watch_(std::move(watch)) {}

  void Wait(std::chrono::milliseconds timeout) override;
  void Wait() override { Wait(default_wait_); }
  bool Completed() const override;
  double run_seconds() const override;
  Interval run_interval() const override;

  // Called by the communicator thread when the operation starts running, then once when it ends.
  void MarkStarted() { started_ = std::chrono::steady_clock::now(); }
  void Finish(std::exception_ptr error);

 private:
  // Waits (mu_ held through `lock`) until done_, aborting the communicator and joining the
  // operation once nothing moved on it for `timeout`; returns the reason if it did.
  std::optional<std::string> WaitWatching(std::unique_lock<std::mutex>& lock,
                                          std::chrono::milliseconds timeout);

  const std::string description_;  // "allreduce(ring) #12 on rank 3"
  const std::chrono::milliseconds default_wait_;
  const std::chrono::microseconds spin_;
  const std::shared_ptr<OperationWatch> watch_;
  std::atomic<bool> finished_{false};  // done_, readable without the lock (the spin)
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;                                // guarded by mu_
  std::chrono::steady_clock::time_point started_{};  // communicator thread only, before Finish
  double run_seconds_ = 0;                           // guarded by mu_
  Interval ran_;                                     // guarded by mu_
  // The failure, kept as a value: every Wait() throws its own copy, so no exception object is
  // shared between the communicator thread and waiting threads.
  std::optional<Error> error_;      // guarded by mu_
  std::exception_ptr other_error_;  // guarded by mu_; a non-cdt exception (a bug), rethrown as is
};

}  // namespace cdt
