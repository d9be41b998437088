// The compressors by name: what `train --compress`, `bench compress` and the adaptive controller
// name, parsed here into a Compressor (compressors.h's constructors) with its options. Apart
// from compressor.h (the interface) so that the interface does not depend on every compressor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cdt/types.h"
#include "compress/compressor.h"
#include "compress/method.h"

namespace cdt::compress {

// The compressor of `method`. `tensors` describe the bucket (PowerSGD uses them; the others only
// need the total). kNone returns the plain allreduce. Throws cdt::Error(kInvalidArgument) for
// options the method cannot take (a sparse ratio outside (0, 1], a PowerSGD rank below 1).
std::unique_ptr<Compressor> MakeCompressor(Method method, const CompressorOptions& options,
                                           const std::vector<TensorView>& tensors);
// By name (MethodNamed, then the above): for `bench compress` and tests.
std::unique_ptr<Compressor> MakeCompressor(const std::string& name,
                                           const CompressorOptions& options,
                                           const std::vector<TensorView>& tensors);

// Top-k and random-k: the compressors that send a share of the elements, so the ones that take a
// ratio (--compress-ratio) and a value type (--compress-values).
bool IsSparse(Method method);

// The ratio `train` uses for top-k and random-k when none is given: 0.01 for top-k, 0.75 for
// random-k, 0 for the others. Random-k delays each element ~1/ratio steps; at the default LR (0.1
// per 256 samples) the cnn here lost 1.2 points at 50% and 0.6 at 75% (docs/benchmarks.md), and
// the budget is one point. Top-k sends what matters first and keeps 1% within a point.
double DefaultRatio(Method method);

// `--compress-values` names: "fp32", "fp16", "bf16" to the sparse values' DataType; throws
// cdt::Error(kInvalidArgument) naming `flag` and the accepted names for anything else.
DataType SparseValuesNamed(const std::string& name, const std::string& flag = "--compress-values");

// The names MakeCompressor accepts, for help texts and errors.
const std::vector<std::string>& CompressorNames();
// The same, as error messages list them: "none, fp16, ..., signsgd".
std::string CompressorNameList();

}  // namespace cdt::compress
