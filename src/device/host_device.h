// HostDevice: a stand-in for an accelerator where there is none (this project's CI machines). Its
// "device memory" is host memory and each stream is a thread that runs its queue in order, so the
// staging pipeline's stream ordering (cdt/device_collectives.h) is exercised for real on a CPU:
// a copy queued behind an event does wait for it, a copy whose event nobody waited for can still
// be in flight. It says what it is in name(). Not a device: use it for tests and for the
// pipeline's CPU benchmarks only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "cdt/device.h"

namespace cdt {

class HostStream;

class HostDevice : public Device {
 public:
  // `copy_delay`: every copy first sleeps this long (a slow copy engine), so that a copy the
  // pipeline forgot to wait for is still in flight when its bytes are read.
  explicit HostDevice(std::chrono::microseconds copy_delay = std::chrono::microseconds(0))
      : copy_delay_(copy_delay) {}
  std::string name() const override { return "host stand-in (no device)"; }
  std::unique_ptr<DeviceStream> NewStream() override;
  std::shared_ptr<void> AllocatePinned(size_t bytes) override;
  std::shared_ptr<void> AllocateDevice(size_t bytes) override;

 private:
  std::chrono::microseconds copy_delay_;
};

// The stream HostDevice::NewStream returns, with what a kernel launch would be: Launch queues
// `kernel` to run on the stream's thread in queue order (tests write "device memory" with it).
class HostStream : public DeviceStream {
 public:
  explicit HostStream(std::chrono::microseconds copy_delay = std::chrono::microseconds(0));
  // Runs what is queued (waits for events nobody will record end at once), then stops.
  ~HostStream() override;
  void CopyToHost(void* host, const void* device, size_t bytes) override;
  void CopyToDevice(void* device, const void* host, size_t bytes) override;
  std::shared_ptr<DeviceEvent> Record() override;
  void Wait(const DeviceEvent& event) override;
  std::string name() const override { return "host stand-in stream"; }
  void Launch(std::function<void()> kernel);

 private:
  class Queue;
  std::chrono::microseconds copy_delay_;
  std::shared_ptr<Queue> queue_;
};

}  // namespace cdt
