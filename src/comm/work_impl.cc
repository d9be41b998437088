#include "comm/work_impl.h"

#include <sched.h>

#include <algorithm>

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
    const auto until = std::chrono::steady_clock::now() + std::min<std::chrono::microseconds>(
                                                              spin_, timeout);
    while (!finished_.load(std::memory_order_acquire) &&
           std::chrono::steady_clock::now() < until)
      sched_yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; }))
    throw Error(ErrorCode::kTimeout, description_ + " still running after waiting " +
                                         std::to_string(timeout.count()) + " ms");
  // A deep copy: runtime_error shares its message buffer between copies through a reference count
  // that lives in libstdc++; a fresh string keeps threads apart.
  if (error_) throw Error(error_->code(), std::string(error_->what()), error_->context());
  if (other_error_) std::rethrow_exception(other_error_);
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
