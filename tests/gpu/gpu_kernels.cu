#include "gpu_kernels.h"

#include <cuda_runtime.h>

namespace cdt::testing {
namespace {

__global__ void SpinThenFill(float* d, size_t n, float add, long long spin_ns) {
  // %globaltimer counts nanoseconds on the device (what __nanosleep-based waits read).
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (static_cast<long long>(now - start) >= spin_ns) break;
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(blockDim.x) * gridDim.x)
    d[i] = static_cast<float>(i % 13) + add;
}

}  // namespace

void LaunchSpinThenFill(void* stream, float* d, size_t n, float add, double milliseconds) {
  SpinThenFill<<<64, 256, 0, static_cast<cudaStream_t>(stream)>>>(
      d, n, add, static_cast<long long>(milliseconds * 1e6));
}

}  // namespace cdt::testing
