#include "device/cuda_device.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "cdt/error.h"

namespace cdt {
namespace {

// cudaSuccess or a cdt::Error naming the device, the call and the runtime's words.
void Check(cudaError_t rc, int ordinal, const char* call) {
  if (rc == cudaSuccess) return;
  throw Error(ErrorCode::kIo, "cuda:" + std::to_string(ordinal) + ": " + call + " failed: " +
                                  cudaGetErrorName(rc) + " (" + cudaGetErrorString(rc) + ")");
}

// Makes `ordinal` the calling thread's device for the scope and gives the caller back its own
// after: Record() and Wait() run on the caller's threads, where torch keeps its current device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != ordinal) {
      Check(cudaSetDevice(ordinal), ordinal, "cudaSetDevice");
      changed_ = true;
    }
  }
  ~DeviceGuard() {
    if (changed_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool changed_ = false;
};

class CudaEvent : public DeviceEvent {
 public:
  CudaEvent(int ordinal, cudaStream_t stream) : ordinal_(ordinal) {
    DeviceGuard guard(ordinal);
    Check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), ordinal,
          "cudaEventCreateWithFlags");
    Check(cudaEventRecord(event_, stream), ordinal, "cudaEventRecord");
  }
  ~CudaEvent() override { cudaEventDestroy(event_); }
  bool Done() const override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    Check(rc, ordinal_, "cudaEventQuery");
    return true;
  }
  // Polls (cudaEventSynchronize has no deadline): yields for the first 100 us, then sleeps in
  // steps growing to 1 ms, so a short copy is seen at once and a long wait costs no core.
  bool WaitFor(std::chrono::milliseconds timeout) const override {
    const auto start = std::chrono::steady_clock::now();
    auto nap = std::chrono::microseconds(10);
    while (!Done()) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (waited >= timeout) return false;
      if (waited < std::chrono::microseconds(100)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(nap);
        nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(1));
      }
    }
    return true;
  }
  cudaEvent_t get() const { return event_; }

 private:
  int ordinal_;
  cudaEvent_t event_ = nullptr;
};

class CudaStream : public DeviceStream {
 public:
  CudaStream(int ordinal, cudaStream_t stream, bool owned)
      : ordinal_(ordinal), stream_(stream), owned_(owned) {}
  ~CudaStream() override {
    if (owned_) cudaStreamDestroy(stream_);
  }
  void CopyToHost(void* host, const void* device, size_t bytes) override {
    DeviceGuard guard(ordinal_);
    Check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), ordinal_,
          "cudaMemcpyAsync (device to host)");
  }
  void CopyToDevice(void* device, const void* host, size_t bytes) override {
    DeviceGuard guard(ordinal_);
    Check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), ordinal_,
          "cudaMemcpyAsync (host to device)");
  }
  std::shared_ptr<DeviceEvent> Record() override {
    return std::make_shared<CudaEvent>(ordinal_, stream_);
  }
  void Wait(const DeviceEvent& event) override {
    const auto* cuda_event = dynamic_cast<const CudaEvent*>(&event);
    if (!cuda_event)
      throw Error(ErrorCode::kInvalidArgument,
                  "a CUDA stream can only wait for CUDA events (not a host stand-in's)");
    DeviceGuard guard(ordinal_);
    Check(cudaStreamWaitEvent(stream_, cuda_event->get(), 0), ordinal_, "cudaStreamWaitEvent");
  }
  std::string name() const override {
    char address[32];
    std::snprintf(address, sizeof address, "%p", static_cast<void*>(stream_));
    return "cuda:" + std::to_string(ordinal_) + " stream " + address;
  }

 private:
  int ordinal_;
  cudaStream_t stream_;
  bool owned_;
};

}  // namespace

int CudaDevice::Count(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(rc);
    return 0;
  }
  if (count == 0 && why) *why = "cudaGetDeviceCount: 0 devices";
  return count;
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  std::string why;
  const int count = Count(&why);
  if (ordinal < 0 || ordinal >= count)
    throw Error(
        ErrorCode::kInvalidArgument,
        "cuda:" + std::to_string(ordinal) + " does not exist: " +
            (count == 0 ? why
                        : "this process sees " + std::to_string(count) +
                              " CUDA device(s), cuda:0..cuda:" + std::to_string(count - 1)) +
            " (CUDA_VISIBLE_DEVICES narrows what a process sees)");
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, ordinal), ordinal, "cudaGetDeviceProperties");
  name_ = "cuda:" + std::to_string(ordinal) + " (" + prop.name + ")";
}

std::unique_ptr<DeviceStream> CudaDevice::NewStream() {
  DeviceGuard guard(ordinal_);
  cudaStream_t stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), ordinal_,
        "cudaStreamCreateWithFlags");
  return std::make_unique<CudaStream>(ordinal_, stream, true);
}

std::unique_ptr<DeviceStream> CudaDevice::WrapStream(void* cuda_stream) {
  return std::make_unique<CudaStream>(ordinal_, static_cast<cudaStream_t>(cuda_stream), false);
}

std::shared_ptr<void> CudaDevice::AllocatePinned(size_t bytes) {
  DeviceGuard guard(ordinal_);
  void* p = nullptr;
  Check(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable), ordinal_,
        "cudaHostAlloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFreeHost(q); });
}

std::shared_ptr<void> CudaDevice::AllocateDevice(size_t bytes) {
  DeviceGuard guard(ordinal_);
  void* p = nullptr;
  Check(cudaMalloc(&p, std::max<size_t>(bytes, 1)), ordinal_, "cudaMalloc");
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });  // any device may free it
}

}  // namespace cdt
