// TaskRunner: one background thread that runs tasks in submission order, each behind a Work
// handle (cdt/communicator.h's contract: Wait rethrows the task's cdt::Error). The gradient
// reducer runs compressed bucket reductions on it — they encode, run collectives and decode —
// so that the training thread goes on with backward. One runner per communicator keeps the
// collectives of every rank in the same order.
//
// A task submitted `when_idle` waits until no ordinary task is queued: ordinary tasks submitted
// after it may run first. It still runs after every task submitted before it, and when-idle
// tasks keep their own order. The reducer Ends a bucket's reduction that way (it waits and
// decodes, and submits nothing), so that the next bucket's Begin, once queued, submits its
// collectives first and the link goes on from one bucket to the next.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cdt/communicator.h"

namespace cdt::train {

class TaskRunner {
 public:
  // `name`: the thread's (common/thread_name.h). `wait_limit`: the default bound of Work::Wait()
  // (the communicator's timeout plus a margin).
  TaskRunner(std::string name, std::chrono::milliseconds wait_limit);
  ~TaskRunner();  // finishes the queued tasks first
  TaskRunner(const TaskRunner&) = delete;
  TaskRunner& operator=(const TaskRunner&) = delete;

  std::shared_ptr<Work> Submit(std::string description, std::function<void()> task,
                               bool when_idle = false);

 private:
  struct Task;
  void Loop();

  const std::chrono::milliseconds wait_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;      // guarded by mu_
  std::deque<std::shared_ptr<Task>> when_idle_;  // guarded by mu_; run once queue_ is empty
  bool stopping_ = false;                        // guarded by mu_
  std::thread thread_;
};

}  // namespace cdt::train
