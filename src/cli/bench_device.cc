#include "cli/bench_device.h"

#include "cdt/error.h"
#include "device/host_device.h"
#ifdef CDT_HAVE_CUDA
#include "device/cuda_device.h"
#endif

namespace cdt::cli {

std::unique_ptr<Device> OpenBenchDevice(const std::string& spec, int local_rank) {
  if (spec == "cpu") return nullptr;
  if (spec == "host-standin") return std::make_unique<HostDevice>();
  if (spec == "cuda" || spec.rfind("cuda:", 0) == 0) {
#ifdef CDT_HAVE_CUDA
    std::string why;
    const int count = CudaDevice::Count(&why);
    if (count == 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "--device " + spec + ": this process sees no CUDA device (" + why + ")");
    int ordinal = local_rank % count;
    if (spec != "cuda") {
      try {
        size_t used = 0;
        ordinal = std::stoi(spec.substr(5), &used);
        if (used != spec.size() - 5) throw std::invalid_argument(spec);
      } catch (const std::exception&) {
        throw Error(ErrorCode::kInvalidArgument,
                    "--device " + spec + ": say cuda or cuda:N (N a device ordinal)");
      }
    }
    return std::make_unique<CudaDevice>(ordinal);
#else
    throw Error(ErrorCode::kInvalidArgument,
                "--device " + spec +
                    ": this build has no CUDA support (configure where the CUDA toolkit, nvcc and "
                    "the runtime, is installed; docs/device.md)");
#endif
  }
  throw Error(ErrorCode::kInvalidArgument,
              "--device " + spec + ": say cpu, cuda, cuda:N or host-standin");
}

}  // namespace cdt::cli
