#include "comm/reduce.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/half.h"
#include "common/half_vector.h"

namespace cdt {

namespace {

// The type sums and products are computed in: unsigned for integers, whose wrapping is defined
// there (torch's integer sums and products wrap too), the type itself for floats.
template <typename T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <typename T>
void ReduceTyped(T* __restrict d, const T* __restrict s, size_t n, ReduceOp op) {
  using W = typename Wrapping<T>::type;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (size_t i = 0; i < n; ++i)
        d[i] = static_cast<T>(static_cast<W>(d[i]) + static_cast<W>(s[i]));
      return;
    case ReduceOp::kMax:
      for (size_t i = 0; i < n; ++i) d[i] = std::max(d[i], s[i]);
      return;
    case ReduceOp::kMin:
      for (size_t i = 0; i < n; ++i) d[i] = std::min(d[i], s[i]);
      return;
    case ReduceOp::kProduct:
      for (size_t i = 0; i < n; ++i)
        d[i] = static_cast<T>(static_cast<W>(d[i]) * static_cast<W>(s[i]));
      return;
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      if constexpr (std::is_integral_v<T>) {
        if (op == ReduceOp::kBand)
          for (size_t i = 0; i < n; ++i) d[i] &= s[i];
        else if (op == ReduceOp::kBor)
          for (size_t i = 0; i < n; ++i) d[i] |= s[i];
        else
          for (size_t i = 0; i < n; ++i) d[i] ^= s[i];
      }
      return;  // floating types: refused at submission (CheckReduceOp)
  }
}

// Bytes that are 0 or 1: sum, max and bor are "or"; product, min and band "and"; bxor "xor".
void ReduceBool(uint8_t* __restrict d, const uint8_t* __restrict s, size_t n, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
    case ReduceOp::kMax:
    case ReduceOp::kBor:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>((d[i] | s[i]) != 0);
      return;
    case ReduceOp::kProduct:
    case ReduceOp::kMin:
    case ReduceOp::kBand:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(d[i] != 0 && s[i] != 0);
      return;
    case ReduceOp::kBxor:
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>((d[i] != 0) != (s[i] != 0));
      return;
  }
}

template <float (*ToF)(uint16_t), uint16_t (*FromF)(float)>
void Reduce16(uint16_t* d, const uint16_t* s, size_t n, ReduceOp op) {
  for (size_t i = 0; i < n; ++i) {
    float a = ToF(d[i]);
    float b = ToF(s[i]);
    float r = (op == ReduceOp::kMax)       ? std::max(a, b)
              : (op == ReduceOp::kMin)     ? std::min(a, b)
              : (op == ReduceOp::kProduct) ? a * b
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
    case DataType::kUInt8:
      return ReduceTyped(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count, op);
    case DataType::kInt16:
      return ReduceTyped(static_cast<int16_t*>(dst), static_cast<const int16_t*>(src), count, op);
    case DataType::kBool:
      return ReduceBool(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), count, op);
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
    case DataType::kUInt8:
      return DivideTyped(static_cast<uint8_t*>(data), count, divisor);
    case DataType::kInt16:
      return DivideTyped(static_cast<int16_t*>(data), count, divisor);
    case DataType::kBool:
      return;  // avg is refused on bool at submission
    case DataType::kFloat16:
      return Divide16<HalfToFloat, FloatToHalf>(static_cast<uint16_t*>(data), count, divisor);
    case DataType::kBFloat16:
      return Divide16<BFloat16ToFloat, FloatToBFloat16>(static_cast<uint16_t*>(data), count,
                                                        divisor);
  }
}

}  // namespace cdt
