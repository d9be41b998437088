#include "comm/work_impl.h"

#include <sched.h>

#include <algorithm>

#include "common/check.h"

namespace cdt {

void WaitIgnoringError(const std::shared_ptr<Work>& work) noexcept {
  if (!work) return;
  try {
    work->Wait();
  } catch (...) {
  }
}

void WorkImpl::Wait(std::chrono::milliseconds timeout) {
  if (spin_.count() > 0) {
    const auto until =
        std::chrono::steady_clock::now() + std::min<std::chrono::microseconds>(spin_, timeout);
    while (!finished_.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until)
      sched_yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<std::string> stalled;
  if (!done_) {
    if (watch_)
      stalled = WaitWatching(lock, timeout);
    else
      cv_.wait(lock, [&] { return done_; });  // completed before it was handed out
  }
  // A deep copy: runtime_error shares its message buffer between copies through a reference count
  // that lives in libstdc++; a fresh string keeps threads apart.
  if (error_) {
    if (stalled)  // the abort's kAborted is the consequence: the silence is the cause
      throw Error(ErrorCode::kTimeout, *stalled + " (" + error_->what() + ")", error_->context());
    throw Error(error_->code(), std::string(error_->what()), error_->context());
  }
  if (other_error_) std::rethrow_exception(other_error_);
}

std::optional<std::string> WorkImpl::WaitWatching(std::unique_lock<std::mutex>& lock,
                                                  std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  // Look at the progress counter a few times per timeout, at most every 100 ms.
  const auto slice = std::clamp<std::chrono::milliseconds>(
      timeout / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(100));
  uint64_t seen = watch_->progress();
  auto quiet_since = Clock::now();
  while (!done_) {
    if (cv_.wait_for(lock, slice, [&] { return done_; })) return std::nullopt;
    const uint64_t now_progress = watch_->progress();
    const auto now = Clock::now();
    if (now_progress != seen) {
      seen = now_progress;
      quiet_since = now;
      continue;
    }
    if (now - quiet_since < timeout) continue;
    std::string reason = description_ + ": nothing moved on its communicator for " +
                         std::to_string(timeout.count()) +
                         " ms while waiting for it; the communicator was aborted";
    lock.unlock();
    watch_->AbortStalled(reason);
    lock.lock();
    // Join: the abort ends a running exchange at once and a shared-memory wait within 50 ms, and
    // fails the queued operations; what remains is at most one reduction of a segment. Returning
    // before the operation finished would hand the caller a buffer the engine still writes.
    const auto join_limit = std::max<std::chrono::milliseconds>(timeout, std::chrono::seconds(60));
    if (!cv_.wait_for(lock, join_limit, [&] { return done_; }))
      internal::CheckFailed(__FILE__, __LINE__, "an aborted operation finishes",
                            description_ + " still runs " + std::to_string(join_limit.count()) +
                                " ms after its communicator was aborted");
    return reason;
  }
  return std::nullopt;
}

bool WorkImpl::Completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

double WorkImpl::run_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return run_seconds_;
}

Work::Interval WorkImpl::run_interval() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ran_;
}

void WorkImpl::Finish(std::exception_ptr error) {
  std::optional<Error> copy;
  if (error) {
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      copy.emplace(e.code(), std::string(e.what()), e.context());
      error = nullptr;
    } catch (...) {
    }
  }
  const auto now = std::chrono::steady_clock::now();
  const bool started = started_ != std::chrono::steady_clock::time_point{};
  const double ran = started ? std::chrono::duration<double>(now - started_).count() : 0.0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    run_seconds_ = ran;
    if (started) ran_ = {started_, now};
    error_ = std::move(copy);
    other_error_ = std::move(error);
    finished_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
}

}  // namespace cdt
