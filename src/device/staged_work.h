// The Work of one device operation (cdt/device_collectives.h): finished by DeviceCollectives'
// thread, waited for by the caller, whose stream it then orders after the result.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cdt/device_collectives.h"
#include "cdt/error.h"

namespace cdt {

class StagedWork : public DeviceWork {
 public:
  // `caller`: the stream Wait() orders. `progress`: bumped by the operations' thread at every
  // step (a chunk reduced, an operation started or ended). `abort`: aborts the operations'
  // communicator (a Wait that saw nothing move for its timeout).
  StagedWork(std::string description, DeviceStream& caller, std::chrono::milliseconds default_wait,
             std::shared_ptr<std::atomic<uint64_t>> progress,
             std::function<void(const std::string&)> abort);

  void Wait(std::chrono::milliseconds timeout) override;
  void Wait() override { Wait(default_wait_); }
  bool Completed() const override;
  double run_seconds() const override;
  Interval run_interval() const override;
  void WaitOn(DeviceStream& stream) override;
  std::shared_ptr<DeviceEvent> completion() const override;

  const std::string& description() const { return description_; }
  // The operations' thread: when it starts, then once at the end (`completion` null on failure).
  void MarkStarted() { started_ = std::chrono::steady_clock::now(); }
  void Finish(std::shared_ptr<DeviceEvent> completion, std::exception_ptr error);

 private:
  // Blocks until the host side finished; throws its error (or kTimeout after a stall).
  void WaitHost(std::chrono::milliseconds timeout);

  const std::string description_;  // "device allreduce #3 (f32 x 1048576, 4 chunks) on rank 1"
  DeviceStream& caller_;
  const std::chrono::milliseconds default_wait_;
  const std::shared_ptr<std::atomic<uint64_t>> progress_;
  const std::function<void(const std::string&)> abort_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;                                // guarded by mu_
  std::chrono::steady_clock::time_point started_{};  // the operations' thread, before Finish
  Interval ran_;                                     // guarded by mu_
  std::shared_ptr<DeviceEvent> completion_;          // guarded by mu_
  std::optional<Error> error_;                       // guarded by mu_
  std::exception_ptr other_error_;                   // guarded by mu_
};

}  // namespace cdt
