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
    case DataType::kInt16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kInt8:
    case DataType::kUInt8:
    case DataType::kBool:
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
    case DataType::kUInt8:
      return "u8";
    case DataType::kBool:
      return "bool";
    case DataType::kInt16:
      return "i16";
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
    case ReduceOp::kProduct:
      return "prod";
    case ReduceOp::kBand:
      return "band";
    case ReduceOp::kBor:
      return "bor";
    case ReduceOp::kBxor:
      return "bxor";
  }
  return "?";
}

namespace {

constexpr DataType kAllTypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                                  DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                                  DataType::kInt8,     DataType::kUInt8,   DataType::kBool,
                                  DataType::kInt16};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg,     ReduceOp::kMax,
                                ReduceOp::kMin, ReduceOp::kProduct, ReduceOp::kBand,
                                ReduceOp::kBor, ReduceOp::kBxor};

bool IsFloating(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

}  // namespace

bool ReduceOpApplies(ReduceOp op, DataType dtype) {
  switch (op) {
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      return !IsFloating(dtype);
    case ReduceOp::kAvg:
      return dtype != DataType::kBool;
    default:
      return true;
  }
}

void CheckReduceOp(ReduceOp op, DataType dtype, const char* call) {
  if (ReduceOpApplies(op, dtype)) return;
  std::string ok;
  for (ReduceOp o : kAllOps)
    if (ReduceOpApplies(o, dtype)) ok += (ok.empty() ? "" : ", ") + std::string(ReduceOpName(o));
  throw Error(ErrorCode::kInvalidArgument,
              std::string(call) + ": reduce op '" + ReduceOpName(op) + "' is not defined on " +
                  DataTypeName(dtype) + " elements (" + DataTypeName(dtype) + " takes " + ok + ")");
}

DataType ParseDataType(std::string_view name) {
  for (DataType d : kAllTypes) {
    if (name == DataTypeName(d)) return d;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown dtype '" + std::string(name) +
                  "' (use f32, f64, f16, bf16, i32, i64, i8, u8, bool or i16)");
}

ReduceOp ParseReduceOp(std::string_view name) {
  for (ReduceOp op : kAllOps) {
    if (name == ReduceOpName(op)) return op;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown reduce op '" + std::string(name) +
                  "' (use sum, avg, max, min, prod, band, bor or bxor)");
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
