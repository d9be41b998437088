// Element types and reductions understood by every collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace cdt {

enum class DataType : uint8_t {
  kFloat32 = 0,
  kFloat64 = 1,
  kFloat16 = 2,   // IEEE 754 binary16; reduced in float32 precision, rounded to nearest even
  kBFloat16 = 3,  // bfloat16; reduced in float32 precision, rounded to nearest even
  kInt32 = 4,
  kInt64 = 5,
  kInt8 = 6,  // wraps on overflow: the caller bounds the sum (gradient compression's int8)
  kUInt8 = 7,  // wraps on overflow
  kBool = 8,   // one byte, 0 or 1: kSum/kMax/kBor are "or", kProduct/kMin/kBand "and", kBxor "xor"
  kInt16 = 9,  // wraps on overflow
};

enum class ReduceOp : uint8_t {
  kSum = 0,
  kAvg = 1,  // sum divided by the number of ranks; integer division for integer types
  kMax = 2,
  kMin = 3,
  kProduct = 4,
  kBand = 5,  // bitwise and, or, xor: integer and bool types only
  kBor = 6,
  kBxor = 7,
};

size_t ElementSize(DataType dtype);
// "f32", "f64", "f16", "bf16", "i32", "i64", "i8", "u8", "bool", "i16"
const char* DataTypeName(DataType dtype);
// "sum", "avg", "max", "min", "prod", "band", "bor", "bxor"
const char* ReduceOpName(ReduceOp op);

// Whether `op` is defined on `dtype`: the bitwise ops need an integer or bool type, avg a number.
bool ReduceOpApplies(ReduceOp op, DataType dtype);
// Throws cdt::Error(kInvalidArgument) naming `call`, the op, the type and the ops that apply,
// when `op` is not defined on `dtype` (every reducing collective checks at submission).
void CheckReduceOp(ReduceOp op, DataType dtype, const char* call);

// Parse the short names above; throw cdt::Error(kInvalidArgument) naming the accepted values.
DataType ParseDataType(std::string_view name);
ReduceOp ParseReduceOp(std::string_view name);

// Allreduce algorithms. Each lives in its own file under src/comm/collectives/.
enum class AllreduceAlgorithm : uint8_t {
  kAuto = 0,               // chosen per message size by the communicator's AllreduceSelector
  kRing = 1,               // "ring": reduce-scatter + allgather around a ring, bandwidth optimal
  kRecursiveDoubling = 2,  // "rd": log2(p) full-buffer exchanges, latency optimal
  kHalvingDoubling = 3,    // "rhd": Rabenseifner, recursive halving + doubling
  kTree = 4,               // "tree": pipelined double binary tree
  kHierarchical = 5,  // "hier": intra-node reduce-scatter, inter-node allreduce, intra allgather
};

const char* AllreduceAlgorithmName(AllreduceAlgorithm algo);  // the short names quoted above
AllreduceAlgorithm ParseAllreduceAlgorithm(std::string_view name);

}  // namespace cdt
