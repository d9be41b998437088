#include "device/staged_work.h"

#include <algorithm>

#include "common/check.h"

namespace cdt {

StagedWork::StagedWork(std::string description, DeviceStream& caller,
                       std::chrono::milliseconds default_wait,
                       std::shared_ptr<std::atomic<uint64_t>> progress,
                       std::function<void(const std::string&)> abort)
    : description_(std::move(description)),
      caller_(caller),
      default_wait_(default_wait),
      progress_(std::move(progress)),
      abort_(std::move(abort)) {}

void StagedWork::Finish(std::shared_ptr<DeviceEvent> completion, std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mu_);
  ran_ = {started_, std::chrono::steady_clock::now()};
  completion_ = std::move(completion);
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      error_.emplace(e.code(), std::string(e.what()), e.context());
    } catch (...) {
      other_error_ = std::current_exception();
    }
  }
  done_ = true;
  cv_.notify_all();
}

bool StagedWork::Completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

double StagedWork::run_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? std::chrono::duration<double>(ran_.end - ran_.start).count() : 0.0;
}

Work::Interval StagedWork::run_interval() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ ? ran_ : Interval{};
}

std::shared_ptr<DeviceEvent> StagedWork::completion() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completion_;
}

void StagedWork::WaitHost(std::chrono::milliseconds timeout) {
  // As WorkImpl's wait: keep waiting while the operations move; after `timeout` of silence abort
  // the communicator, join the operation (its waits are bounded) and report the stall.
  const auto slice = std::clamp<std::chrono::milliseconds>(
      timeout / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t seen = progress_->load(std::memory_order_relaxed);
  auto quiet_since = std::chrono::steady_clock::now();
  std::optional<std::string> stalled;
  while (!done_) {
    if (cv_.wait_for(lock, slice, [&] { return done_; })) break;
    const uint64_t now_progress = progress_->load(std::memory_order_relaxed);
    const auto now = std::chrono::steady_clock::now();
    if (now_progress != seen) {
      seen = now_progress;
      quiet_since = now;
      continue;
    }
    if (now - quiet_since < timeout) continue;
    stalled = description_ + ": nothing moved for " + std::to_string(timeout.count()) +
              " ms while waiting for it; the communicator was aborted";
    lock.unlock();
    abort_(*stalled);
    lock.lock();
    // The aborted operation's waits are bounded (copies by the copy timeout, the host collective
    // ends at the abort): joining it takes at most `timeout` more, and a minute is a broken
    // invariant, not a slow device.
    const auto join_limit =
        std::max<std::chrono::milliseconds>(2 * timeout, std::chrono::seconds(60));
    if (!cv_.wait_for(lock, join_limit, [&] { return done_; }))
      internal::CheckFailed(__FILE__, __LINE__, "an aborted device operation finishes",
                            description_ + " still runs " + std::to_string(join_limit.count()) +
                                " ms after its communicator was aborted");
  }
  if (error_) {
    if (stalled)
      throw Error(ErrorCode::kTimeout, *stalled + " (" + error_->what() + ")", error_->context());
    throw Error(error_->code(), std::string(error_->what()), error_->context());
  }
  if (other_error_) std::rethrow_exception(other_error_);
}

void StagedWork::Wait(std::chrono::milliseconds timeout) {
  WaitHost(timeout);
  caller_.Wait(*completion());
}

void StagedWork::WaitOn(DeviceStream& stream) {
  WaitHost(default_wait_);
  stream.Wait(*completion());
}

}  // namespace cdt
