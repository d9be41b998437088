// Element-wise reduction kernels over raw buffers.
#pragma once

#include <cstddef>

#include "cdt/types.h"

namespace cdt {

// dst[i] = op(dst[i], src[i]) for i < count. kAvg reduces as kSum (the caller divides once at the
// end, see FinishAverage). f16/bf16 are widened to float32, combined, and rounded back.
void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op);

// Divides every element by `divisor` (the group size) after a kAvg reduction.
void FinishAverage(void* data, size_t count, DataType dtype, int divisor);

}  // namespace cdt
