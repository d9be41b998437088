#include "cdt/types.h"

#include <string>

#include "cdt/error.h"

namespace cdt {

size_t ElementSize(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kInt8:
      return 1;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown data type code " + std::to_string(static_cast<int>(dtype)));
}

const char* DataTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "f32";
    case DataType::kFloat64:
      return "f64";
    case DataType::kFloat16:
      return "f16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt64:
      return "i64";
    case DataType::kInt8:
      return "i8";
  }
  return "?";
}

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

DataType ParseDataType(std::string_view name) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                     DataType::kBFloat16, DataType::kInt32, DataType::kInt64, DataType::kInt8}) {
    if (name == DataTypeName(d)) return d;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown dtype '" + std::string(name) +
                                               "' (use f32, f64, f16, bf16, i32, i64 or i8)");
}

ReduceOp ParseReduceOp(std::string_view name) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    if (name == ReduceOpName(op)) return op;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown reduce op '" + std::string(name) + "' (use sum, avg, max or min)");
}

const char* AllreduceAlgorithmName(AllreduceAlgorithm algo) {
  switch (algo) {
    case AllreduceAlgorithm::kAuto:
      return "auto";
    case AllreduceAlgorithm::kRing:
      return "ring";
    case AllreduceAlgorithm::kRecursiveDoubling:
      return "rd";
    case AllreduceAlgorithm::kHalvingDoubling:
      return "rhd";
    case AllreduceAlgorithm::kTree:
      return "tree";
    case AllreduceAlgorithm::kHierarchical:
      return "hier";
  }
  return "?";
}

AllreduceAlgorithm ParseAllreduceAlgorithm(std::string_view name) {
  for (AllreduceAlgorithm a :
       {AllreduceAlgorithm::kAuto, AllreduceAlgorithm::kRing,
        AllreduceAlgorithm::kRecursiveDoubling, AllreduceAlgorithm::kHalvingDoubling,
        AllreduceAlgorithm::kTree, AllreduceAlgorithm::kHierarchical}) {
    if (name == AllreduceAlgorithmName(a)) return a;
  }
  throw Error(ErrorCode::kInvalidArgument, "unknown allreduce algorithm '" + std::string(name) +
                                               "' (use auto, ring, rd, rhd, tree or hier)");
}

}  // namespace cdt
