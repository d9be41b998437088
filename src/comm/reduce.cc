#include "comm/reduce.h"

#include <algorithm>
#include <cstdint>

#include "common/half.h"
#include "common/half_vector.h"

namespace cdt {

namespace {

template <typename T>
void ReduceTyped(T* __restrict d, const T* __restrict s, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i) d[i] += s[i];
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]);
      return;
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(uint16_t* d, const uint16_t* s, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    float a = ToF(d[i]);
    float b = ToF(s[i]);
    float r = (op == ReduceOp::kMax)   ? std::max(a, b)
              : (op == ReduceOp::kMin) ? std::min(a, b)
                                       : a + b;
    d[i] = FromF(r);
  }
}

template <typename T>
void DivideTyped(T* d, size_t n, int divisor) {
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<T>(d[i] / static_cast<T>(divisor));
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Divide16(uint16_t* d, size_t n, int divisor) {
  float inv = 1.0f / static_cast<float>(divisor);
  for (size_t i = 0; i < n; ++i) d[i] = FromF(ToF(d[i]) * inv);
}

}  // namespace

void ReduceInto(void* dst, const void* src, size_t count, DataType dtype, ReduceOp op) {
  switch (dtype) {
    case DataType::kFloat32:
      return ReduceTyped(static_cast<float*>(dst), static_cast<const float*>(src), count, op);
    case DataType::kFloat64:
      return ReduceTyped(static_cast<double*>(dst), static_cast<const double*>(src), count, op);
    case DataType::kInt32:
      return ReduceTyped(static_cast<int32_t*>(dst), static_cast<const int32_t*>(src), count, op);
    case DataType::kInt64:
      return ReduceTyped(static_cast<int64_t*>(dst), static_cast<const int64_t*>(src), count, op);
    case DataType::kInt8:
      return ReduceTyped(static_cast<int8_t*>(dst), static_cast<const int8_t*>(src), count, op);
    case DataType::kFloat16:
      if (op == ReduceOp::kSum || op == ReduceOp::kAvg)  // the gradient path: vectorised
        return SumHalfs(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count);
      return Reduce16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(dst),
                                                static_cast<const uint16_t*>(src), count, op);
    case DataType::kBFloat16:
      return Reduce16<BFloat16ToFloat, FloatToBFloat16>(
          static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(src), count, op);
  }
}

void FinishAverage(void* data, size_t count, DataType dtype, int divisor) {
  if (divisor <= 1) return;
  switch (dtype) {
    case DataType::kFloat32:
      return DivideTyped(static_cast<float*>(data), count, divisor);
    case DataType::kFloat64:
      return DivideTyped(static_cast<double*>(data), count, divisor);
    case DataType::kInt32:
      return DivideTyped(static_cast<int32_t*>(data), count, divisor);
    case DataType::kInt64:
      return DivideTyped(static_cast<int64_t*>(data), count, divisor);
    case DataType::kInt8:
      return DivideTyped(static_cast<int8_t*>(data), count, divisor);
    case DataType::kFloat16:
      return Divide16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(data), count, divisor);
    case DataType::kBFloat16:
      return Divide16<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(data), count,
                                                        divisor);
  }
}

}  // namespace cdt
