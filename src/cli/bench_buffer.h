// The buffer `bench allreduce` reduces: host memory (the communicator's own allreduce) or device
// memory (DeviceCollectives' staged allreduce, cdt/device_collectives.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "cdt/device.h"
#include "cdt/device_collectives.h"

namespace cdt::cli {

class BenchBuffer {
 public:
  // `device` null: host memory. Otherwise `bytes` of device memory, a stream standing for the
  // caller's, and staged collectives with `staging`; `device` must outlive the buffer.
  BenchBuffer(Communicator& comm, Device* device, size_t bytes, StagingOptions staging);

  // The host copy (on the CPU, the buffer itself): fill it, then Upload; Download, then read it.
  void* host() { return host_.data(); }
  void Upload(size_t bytes);
  void Download(size_t bytes);
  // In place; returns once the host side is done (the device's copy-in may still run).
  void Allreduce(size_t count, DataType dtype, const AllreduceOptions& options);
  // Returns once every allreduce's result is in the buffer (the caller's stream drained).
  void Drain();
  // "cpu", or the device's name.
  std::string where() const;

 private:
  Communicator& comm_;
  Device* device_;
  std::vector<unsigned char> host_;
  std::shared_ptr<void> pinned_, on_device_;
  std::unique_ptr<DeviceStream> caller_;
  std::unique_ptr<DeviceCollectives> staged_;
};

}  // namespace cdt::cli
