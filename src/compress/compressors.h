// The individual compressors (one per .cc file); MakeCompressor (compressor.cc) picks by name.
#pragma once

#include <memory>
#include <vector>

#include "compress/compressor.h"

namespace cdt::compress {

std::unique_ptr<Compressor> MakePlainAllreduce();                    // none.cc
std::unique_ptr<Compressor> MakeCast(DataType wire);                 // cast.cc: fp16, bf16
std::unique_ptr<Compressor> MakeInt8(size_t chunk, uint64_t seed);   // int8.cc
std::unique_ptr<Compressor> MakeTopK(double ratio);                  // topk.cc
std::unique_ptr<Compressor> MakeRandomK(double ratio, uint64_t seed);  // randomk.cc
std::unique_ptr<Compressor> MakeSignSgd(std::vector<TensorView> tensors);  // signsgd.cc
std::unique_ptr<Compressor> MakePowerSgd(int rank, uint64_t seed, std::vector<TensorView> tensors,
                                         size_t min_saved_bytes = 0);  // powersgd.cc

// Number of elements top-k and random-k send: ceil(ratio * n), at least 1 (none for n = 0).
size_t SparseCount(double ratio, size_t n);

}  // namespace cdt::compress
