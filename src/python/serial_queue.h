// SerialQueue: tasks run one after another, in the order posted, on one thread of their own. The
// process group's completions and the comm hook's compressed reductions each run on one: every
// rank then waits for (or submits) its collectives in the same order. The destructor runs what
// is queued, then joins.
//
// Joining with Python's GIL held could deadlock: a task's last act may be to drop a tensor Python
// made, which takes the GIL. Owners destroy their queue through DrainWithoutGil.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace cdt::python {

class SerialQueue {
 public:
  SerialQueue() : thread_([this] { Run(); }) {}
  ~SerialQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  SerialQueue(const SerialQueue&) = delete;
  SerialQueue& operator=(const SerialQueue&) = delete;

  // `task` must not throw (it reports its own errors).
  void Post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace cdt::python
