// Kernels the GPU tests queue on a caller's stream (tests/gpu/gpu_kernels.cu).
#pragma once

#include <cstddef>

namespace cdt::testing {

// Queues on `stream` (a cudaStream_t) a kernel that spins for about `milliseconds`, then writes
// d[i] = i % 13 + add for every i < n: the "backward pass" whose result a collective must wait for.
void LaunchSpinThenFill(void* stream, float* d, size_t n, float add, double milliseconds);

}  // namespace cdt::testing
