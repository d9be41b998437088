// Device memory as the engine sees it: asynchronous copies between a device buffer and pinned host
// memory on streams, events that order streams, and the allocations the staging needs.
//
// The engine reduces on the host (shared memory and TCP carry the bytes, as for CPU tensors), so a
// collective on device memory is copy-out, host collective, copy-in — chunked and pipelined by
// DeviceCollectives (cdt/device_collectives.h). This seam is all it needs of a device; CUDA
// implements it (src/device/cuda_device.h: CUDA streams, events, cudaMemcpyAsync, cudaHostAlloc),
// and HostDevice (src/device/host_device.h) stands in for a device where there is none: its
// "device memory" is host memory and each stream is a thread that runs its queue in order, which
// is how the pipeline's ordering is tested on machines without a GPU. A device-native transport
// (NCCL for CUDA, HCCL for Ascend) would sit beside DeviceCollectives, not behind this seam:
// docs/device.md.
//
// Stream semantics are CUDA's: work queued on one stream runs in queue order; Record() returns an
// event that completes once everything queued on the stream before it has; Wait(event) makes work
// queued on the stream afterwards wait for the event without blocking the calling thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

namespace cdt {

class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  // True once the work queued before the event on its stream has completed. Never blocks.
  virtual bool Done() const = 0;
  // Blocks the calling thread until Done() or `timeout` passed; returns Done(). Throws cdt::Error
  // (kIo) naming the device when the device reports a failure (a faulted kernel, a lost device).
  virtual bool WaitFor(std::chrono::milliseconds timeout) const = 0;
};

class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
  // Queue a copy of `bytes` between device memory and host memory (pinned: Device::AllocatePinned,
  // for the copy to be asynchronous); returns at once. Both buffers must stay valid and untouched
  // until an event recorded after the copy is done.
  virtual void CopyToHost(void* host, const void* device, size_t bytes) = 0;
  virtual void CopyToDevice(void* device, const void* host, size_t bytes) = 0;
  // An event that completes once everything queued on this stream so far has.
  virtual std::shared_ptr<DeviceEvent> Record() = 0;
  // Work queued on this stream from now on waits for `event` (recorded on any stream of the same
  // device). The calling thread does not wait.
  virtual void Wait(const DeviceEvent& event) = 0;
  // "cuda:0 stream 0x5581…", for error messages.
  virtual std::string name() const = 0;
};

class Device {
 public:
  virtual ~Device() = default;
  // "cuda:0 (NVIDIA H200)", "host stand-in (no device)".
  virtual std::string name() const = 0;
  // A stream of the engine's own (CUDA: non-blocking with respect to the legacy default stream).
  virtual std::unique_ptr<DeviceStream> NewStream() = 0;
  // Page-locked host memory (CUDA: cudaHostAlloc), freed when the last copy of the pointer goes.
  virtual std::shared_ptr<void> AllocatePinned(size_t bytes) = 0;
  // Device memory (CUDA: cudaMalloc), freed likewise; for tests and benchmarks.
  virtual std::shared_ptr<void> AllocateDevice(size_t bytes) = 0;
};

}  // namespace cdt
