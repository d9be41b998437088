// Reading and writing one element of a raw buffer of any DataType as a double. For tests, checks
// and tools (not the reduction hot path, which is typed: src/comm/reduce.cc).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cdt/types.h"
#include "common/half.h"

namespace cdt {

inline void StoreElement(void* base, DataType t, size_t i, double v) {
  switch (t) {
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = v;
      break;
    case DataType::kFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToHalf(static_cast<float>(v));
      break;
    case DataType::kBFloat16:
      static_cast<uint16_t*>(base)[i] = FloatToBFloat16(static_cast<float>(v));
      break;
    case DataType::kInt32:
      static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
      break;
    case DataType::kInt64:
      static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v);
      break;
    case DataType::kInt8:
      static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v);
      break;
    case DataType::kUInt8:
      static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v);
      break;
    case DataType::kBool:
      static_cast<uint8_t*>(base)[i] = v != 0 ? 1 : 0;
      break;
    case DataType::kInt16:
      static_cast<int16_t*>(base)[i] = static_cast<int16_t>(v);
      break;
  }
}

inline double LoadElement(const void* base, DataType t, size_t i) {
  switch (t) {
    case DataType::kFloat32:
      return static_cast<const float*>(base)[i];
    case DataType::kFloat64:
      return static_cast<const double*>(base)[i];
    case DataType::kFloat16:
      return HalfToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kBFloat16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(base)[i]);
    case DataType::kInt32:
      return static_cast<const int32_t*>(base)[i];
    case DataType::kInt64:
      return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DataType::kInt8:
      return static_cast<const int8_t*>(base)[i];
    case DataType::kUInt8:
    case DataType::kBool:
      return static_cast<const uint8_t*>(base)[i];
    case DataType::kInt16:
      return static_cast<const int16_t*>(base)[i];
  }
  return 0;
}

}  // namespace cdt
