// TaskRunner: one background thread that runs tasks in submission order, each behind a Work
// handle (cdt/communicator.h's contract: Wait rethrows the task's cdt::Error). The gradient
// reducer runs compressed bucket reductions on it — they encode, run collectives and decode —
// so that the training thread goes on with backward. One runner per communicator keeps the
// collectives of every rank in the same order.
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

  std::shared_ptr<Work> Submit(std::string description, std::function<void()> task);

 private:
  struct Task;
  void Loop();

  const std::chrono::milliseconds wait_limit_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Task>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace cdt::train
