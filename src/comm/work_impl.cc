#include "comm/work_impl.h"

namespace cdt {

void WorkImpl::Wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return done_; }))
    throw Error(ErrorCode::kTimeout, description_ + " still running after waiting " +
                                         std::to_string(timeout.count()) + " ms");
  if (error_) std::rethrow_exception(error_);
}

bool WorkImpl::Completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void WorkImpl::Finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

}  // namespace cdt
