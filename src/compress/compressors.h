// The individual compressors (one per .cc file); MakeCompressor (compressor.cc) picks by name.
#pragma once

#include <memory>
#include <vector>

#include "compress/compressor.h"

namespace cdt::compress {

std::unique_ptr<Compressor> MakePlainAllreduce();                   // none.cc
std::unique_ptr<Compressor> MakeCast(DataType wire);                // cast.cc: fp16, bf16
std::unique_ptr<Compressor> MakeInt8(size_t chunk, uint64_t seed);  // int8.cc
// top-k and random-k send their kept values as `values` (float32, float16 or bfloat16).
std::unique_ptr<Compressor> MakeTopK(double ratio,
                                     DataType values = DataType::kFloat32);  // topk.cc
std::unique_ptr<Compressor> MakeRandomK(double ratio, uint64_t seed,
                                        DataType values = DataType::kFloat32);  // randomk.cc
std::unique_ptr<Compressor> MakeSignSgd(std::vector<TensorView> tensors);       // signsgd.cc
std::unique_ptr<Compressor> MakePowerSgd(int rank, uint64_t seed, std::vector<TensorView> tensors,
                                         size_t min_saved_bytes = 0);  // powersgd.cc

// The float type gradient values travel in (wire_values.cc; the casts, top-k's and random-k's
// values): its size in bytes (throws cdt::Error(kInvalidArgument) for a type other than f32, f16,
// bf16), and n values to it and back. A 16-bit value is the float rounded to nearest even; error
// feedback keeps the rounding.
size_t WireValueBytes(DataType values);
void EncodeWireValues(DataType values, const float* src, void* dst, size_t n);
void DecodeWireValues(DataType values, const void* src, float* dst, size_t n);

// Number of elements top-k and random-k send: ceil(ratio * n), at least 1 (none for n = 0).
size_t SparseCount(double ratio, size_t n);

}  // namespace cdt::compress
