// SerialQueue: tasks run one after another, in the order posted, on one thread of their own. The
// process group's completions and the comm hook's compressed reductions each run on one: every
// rank then waits for (or submits) its collectives in the same order. The destructor runs what
// is queued, then joins.
//
// Joining with Python's GIL held could deadlock: a task's last act may be to drop a tensor Python
// made, which takes the GIL. Owners destroy their queue through DrainWithoutGil, and wait for it
// through WaitIdle with the GIL released.
//
// PyTorch 2.x releases a tensor's Python object under the GIL whenever C++ drops a reference to
// a tensor Python saw, so this thread takes the GIL as it destroys finished tasks. Once the
// interpreter finalizes, that ends the thread through destructors that cannot unwind
// (std::terminate, seen with 2.11 when a DDP model was collected at exit): owners make the queue
// idle before (torch 2.x's destroy_process_group calls the backend's shutdown, which waits here).
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

  // Returns once every task posted before has run and been destroyed.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return tasks_.empty() && !running_; });
  }

  // Nothing posted is waiting or running (a snapshot: true stays true until the next Post).
  bool Idle() {
    std::lock_guard<std::mutex> lock(mu_);
    return tasks_.empty() && !running_;
  }

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
        running_ = true;
      }
      task();
      task = nullptr;  // its captures go here, before the queue counts as idle
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = false;
      }
      idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  bool running_ = false;  // a task runs or is being destroyed
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

}  // namespace cdt::python
