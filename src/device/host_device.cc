#include "device/host_device.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>

#include "cdt/error.h"
#include "common/thread_name.h"

namespace cdt {
namespace {

class HostEvent : public DeviceEvent, public std::enable_shared_from_this<HostEvent> {
 public:
  void Fire() {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    cv_.notify_all();
  }
  bool Done() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  bool WaitFor(std::chrono::milliseconds timeout) const override {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done_; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
};

std::shared_ptr<void> AllocateHost(size_t bytes) {
  constexpr std::align_val_t kAlign{64};
  return std::shared_ptr<void>(::operator new(std::max<size_t>(bytes, 1), kAlign),
                               [](void* p) { ::operator delete(p, kAlign); });
}

}  // namespace

// The stream's thread and its queue; tasks run in order. A wait for an event blocks the thread
// (not the caller), as a stream waiting on an event stalls only that stream.
class HostStream::Queue {
 public:
  Queue() : thread_([this] { Loop(); }) {}
  ~Queue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Push(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

 private:
  void Loop() {
    NameThisThread("cdt-hoststream");
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;
};

HostStream::HostStream(std::chrono::microseconds copy_delay)
    : copy_delay_(copy_delay), queue_(std::make_shared<Queue>()) {}
HostStream::~HostStream() = default;

void HostStream::CopyToHost(void* host, const void* device, size_t bytes) {
  queue_->Push([=, delay = copy_delay_] {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(host, device, bytes);
  });
}

void HostStream::CopyToDevice(void* device, const void* host, size_t bytes) {
  queue_->Push([=, delay = copy_delay_] {
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    std::memcpy(device, host, bytes);
  });
}

void HostStream::Launch(std::function<void()> kernel) { queue_->Push(std::move(kernel)); }

std::shared_ptr<DeviceEvent> HostStream::Record() {
  auto event = std::make_shared<HostEvent>();
  queue_->Push([event] { event->Fire(); });
  return event;
}

void HostStream::Wait(const DeviceEvent& event) {
  const auto* host_event = dynamic_cast<const HostEvent*>(&event);
  if (!host_event)
    throw Error(ErrorCode::kInvalidArgument,
                "a host stand-in stream can only wait for events of host stand-in streams");
  // As cudaStreamWaitEvent, the wait holds the event (the caller may drop it at once). It waits
  // in slices so that a stream being destroyed does not wait for an event that never fires.
  std::shared_ptr<const HostEvent> held = host_event->shared_from_this();
  Queue* queue = queue_.get();
  queue_->Push([held, queue] {
    while (!held->WaitFor(std::chrono::milliseconds(20)) && !queue->stopping()) {
    }
  });
}

std::unique_ptr<DeviceStream> HostDevice::NewStream() {
  return std::make_unique<HostStream>(copy_delay_);
}
std::shared_ptr<void> HostDevice::AllocatePinned(size_t bytes) { return AllocateHost(bytes); }
std::shared_ptr<void> HostDevice::AllocateDevice(size_t bytes) { return AllocateHost(bytes); }

}  // namespace cdt
