// Whole-buffer conversions between float32 and the 16-bit float formats, and the 16-bit sum the
// communicator's reduction uses (common/half.h converts one value).
//
// The fp16 compressor converts every gradient element three times and a 16-bit allreduce
// converts each element twice per hop, so element-at-a-time software conversion made fp16
// slower than sending float32 on fast links (docs/benchmarks.md, "bench compress"). On x86 CPUs
// with F16C and AVX2 (every x86 server since 2013) these use the hardware conversion, eight
// values per instruction; elsewhere they fall back to common/half.h (each call asks the CPU model
// GCC's runtime recorded at start-up). Both round to nearest even with the same results, but for
// NaN payloads.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cdt {

void FloatsToHalfs(const float* src, uint16_t* dst, size_t n);
void HalfsToFloats(const uint16_t* src, float* dst, size_t n);
// d[i] = half(float(d[i]) + float(s[i])).
void SumHalfs(uint16_t* d, const uint16_t* s, size_t n);

void FloatsToBFloat16s(const float* src, uint16_t* dst, size_t n);
void BFloat16sToFloats(const uint16_t* src, float* dst, size_t n);

}  // namespace cdt
