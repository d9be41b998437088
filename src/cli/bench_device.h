// `bench allreduce --device`: the device a benchmark's buffer lives on (docs/device.md).
#pragma once

#include <memory>
#include <string>

#include "cdt/device.h"

namespace cdt::cli {

// "cpu": null (the buffer is host memory, the communicator's own allreduce). "cuda": the GPU of
// this worker's local rank (local_rank mod the devices it sees: ranks share a GPU when there are
// fewer); "cuda:N": that one. "host-standin": src/device/host_device.h, host memory behind the
// staging pipeline (what the pipeline itself costs, on machines without a GPU). Throws
// cdt::Error(kInvalidArgument) naming the accepted values, or why CUDA is not available.
std::unique_ptr<Device> OpenBenchDevice(const std::string& spec, int local_rank);

}  // namespace cdt::cli
