// The float type gradient values travel in — the fp16/bf16 casts, top-k's and random-k's kept
// values (compressors.h: WireValueBytes, EncodeWireValues, DecodeWireValues). float32 is a copy;
// the 16-bit floats use the whole-buffer conversions of common/half_vector.h (F16C where the CPU
// has it).
#include <cstring>

#include "cdt/error.h"
#include "common/half_vector.h"
#include "compress/compressors.h"

namespace cdt::compress {

size_t WireValueBytes(DataType values) {
  switch (values) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return 2;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  "gradient values travel as float32, float16 or bfloat16, not " +
                      std::string(DataTypeName(values)));
  }
}

void EncodeWireValues(DataType values, const float* src, void* dst, size_t n) {
  if (n == 0) return;
  if (values == DataType::kFloat16)
    FloatsToHalfs(src, static_cast<uint16_t*>(dst), n);
  else if (values == DataType::kBFloat16)
    FloatsToBFloat16s(src, static_cast<uint16_t*>(dst), n);
  else
    std::memcpy(dst, src, 4 * n);
}

void DecodeWireValues(DataType values, const void* src, float* dst, size_t n) {
  if (n == 0) return;
  if (values == DataType::kFloat16)
    HalfsToFloats(static_cast<const uint16_t*>(src), dst, n);
  else if (values == DataType::kBFloat16)
    BFloat16sToFloats(static_cast<const uint16_t*>(src), dst, n);
  else
    std::memcpy(dst, src, 4 * n);
}

}  // namespace cdt::compress
