#include "train/task_runner.h"

#include "comm/work_impl.h"
#include "common/thread_name.h"

namespace cdt::train {

struct TaskRunner::Task {
  std::function<void()> run;
  std::shared_ptr<WorkImpl> work;
};

TaskRunner::TaskRunner(std::string name, std::chrono::milliseconds wait_limit)
    : wait_limit_(wait_limit), thread_([this, name] {
        NameThisThread(name);
        Loop();
      }) {}

TaskRunner::~TaskRunner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<Work> TaskRunner::Submit(std::string description, std::function<void()> task,
                                         bool when_idle) {
  auto t = std::make_shared<Task>();
  t->run = std::move(task);
  t->work = std::make_shared<WorkImpl>(std::move(description), wait_limit_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    (when_idle ? when_idle_ : queue_).push_back(t);
  }
  cv_.notify_all();
  return t->work;
}

void TaskRunner::Loop() {
  for (;;) {
    std::shared_ptr<Task> t;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || !when_idle_.empty(); });
      std::deque<std::shared_ptr<Task>>& from = queue_.empty() ? when_idle_ : queue_;
      if (from.empty()) return;  // stopping and drained
      t = std::move(from.front());
      from.pop_front();
    }
    t->work->MarkStarted();
    try {
      t->run();
      t->work->Finish(nullptr);
    } catch (...) {
      t->work->Finish(std::current_exception());
    }
  }
}

}  // namespace cdt::train
