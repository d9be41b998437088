// CudaDevice: cdt/device.h on a CUDA GPU, through the CUDA runtime (streams, events,
// cudaMemcpyAsync, cudaHostAlloc). Built wherever the CUDA toolkit is (CMake's CUDAToolkit; CI
// compiles and links it without a GPU); runs where a GPU is (make test-gpu, bench/device/).
// No CUDA header here: streams cross this header as void* (cudaStream_t), so that code which
// includes it compiles without the toolkit's include path.
#pragma once

#include <memory>
#include <string>

#include "cdt/device.h"

namespace cdt {

class CudaDevice : public Device {
 public:
  // How many CUDA devices this process sees; 0 with `why` set ("cudaGetDeviceCount: no CUDA-capable
  // device is detected") when none.
  static int Count(std::string* why);
  // Device `ordinal`. Throws cdt::Error(kInvalidArgument) naming the devices there are, or why
  // there are none.
  explicit CudaDevice(int ordinal);

  std::string name() const override { return name_; }
  int ordinal() const { return ordinal_; }
  std::unique_ptr<DeviceStream> NewStream() override;
  // A stream the caller owns (torch's current stream, say), not destroyed with the result.
  std::unique_ptr<DeviceStream> WrapStream(void* cuda_stream);
  std::shared_ptr<void> AllocatePinned(size_t bytes) override;
  std::shared_ptr<void> AllocateDevice(size_t bytes) override;

 private:
  int ordinal_;
  std::string name_;  // "cuda:0 (NVIDIA H200)"
};

}  // namespace cdt
