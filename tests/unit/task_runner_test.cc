// TaskRunner (src/train/task_runner.h): ordinary tasks run in submission order; a when-idle task
// lets ordinary tasks submitted after it go first, but never one submitted before it wait; a
// task's error reaches whoever waits for it.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "train/task_runner.h"

namespace cdt::train {
namespace {

TEST(TaskRunner, WhenIdleTasksGoAfterEveryOrdinaryTaskQueued) {
  TaskRunner runner("test-runner", std::chrono::seconds(30));
  std::mutex mu;
  std::vector<std::string> ran;
  auto note = [&](std::string what) {
    return [&, what] {
      std::lock_guard<std::mutex> lock(mu);
      ran.push_back(what);
    };
  };
  // The first task holds the runner until everything else is queued.
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<std::shared_ptr<Work>> works;
  works.push_back(runner.Submit("gate", [&, released] {
    released.wait();
    note("gate")();
  }));
  works.push_back(runner.Submit("end 1", note("end 1"), true));
  works.push_back(runner.Submit("begin 2", note("begin 2")));
  works.push_back(runner.Submit("end 2", note("end 2"), true));
  works.push_back(runner.Submit("begin 3", note("begin 3")));
  release.set_value();
  for (auto& w : works) w->Wait();
  EXPECT_EQ(ran, (std::vector<std::string>{"gate", "begin 2", "begin 3", "end 1", "end 2"}));

  // Nothing queued: a when-idle task runs at once, and an ordinary task after it runs after it.
  ran.clear();
  auto a = runner.Submit("end 4", note("end 4"), true);
  a->Wait();
  runner.Submit("begin 5", note("begin 5"))->Wait();
  EXPECT_EQ(ran, (std::vector<std::string>{"end 4", "begin 5"}));
}

TEST(TaskRunner, WaitRethrowsTheTasksError) {
  TaskRunner runner("test-runner", std::chrono::seconds(30));
  auto failed = runner.Submit(
      "fails", [] { throw Error(ErrorCode::kPeerLost, "peer 3 went away"); }, true);
  try {
    failed->Wait();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kPeerLost);
    EXPECT_NE(std::string(e.what()).find("peer 3 went away"), std::string::npos);
  }
  runner.Submit("after", [] {})->Wait();  // the runner goes on
}

}  // namespace
}  // namespace cdt::train
