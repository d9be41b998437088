// Closed-form allreduce checks shared by the in-process tests and the multi-process test worker.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cdt/communicator.h"
#include "common/element_access.h"

namespace cdt::testing {

inline const std::vector<AllreduceAlgorithm> kAlgorithms = {AllreduceAlgorithm::kRing,
                                                            AllreduceAlgorithm::kRecursiveDoubling,
                                                            AllreduceAlgorithm::kHalvingDoubling,
                                                            AllreduceAlgorithm::kTree,
                                                            AllreduceAlgorithm::kHierarchical,
                                                            AllreduceAlgorithm::kAuto};
inline const std::vector<DataType> kTypes = {DataType::kFloat32, DataType::kFloat64,
                                             DataType::kFloat16, DataType::kBFloat16,
                                             DataType::kInt32,   DataType::kInt64};
inline constexpr size_t kLarge = (4u << 20) + 5;

// Integer-valued inputs keep every partial sum exact even in bf16 (<= 256).
inline double Input(int rank, size_t i) { return (rank + 1) * static_cast<double>(i % 7 + 1); }
inline double MinMaxInput(int rank, size_t i) {
  return static_cast<double>((i * 3 + static_cast<size_t>(rank) * 5) % 11);
}

inline double Expected(ReduceOp op, int p, size_t i, DataType t) {
  if (op == ReduceOp::kSum || op == ReduceOp::kAvg) {
    double s = static_cast<double>(i % 7 + 1) * p * (p + 1) / 2;
    if (op == ReduceOp::kSum) return s;
    if (t == DataType::kInt32 || t == DataType::kInt64) return std::floor(s / p);
    return s / p;
  }
  double m = MinMaxInput(0, i);
  for (int r = 1; r < p; ++r)
    m = op == ReduceOp::kMax ? std::max(m, MinMaxInput(r, i)) : std::min(m, MinMaxInput(r, i));
  return m;
}

inline std::vector<std::string> TwoNodes(int p) {
  std::vector<std::string> ids;
  for (int r = 0; r < p; ++r) ids.push_back("node" + std::to_string(r * 2 / p));
  return ids;
}

// Runs one allreduce of `count` elements and checks every element against the closed form.
// Returns "" on success, else a description of the first wrong element.
inline std::string CheckAllreduce(Communicator& comm, AllreduceAlgorithm algo, DataType t,
                                  ReduceOp op, size_t count) {
  const int p = comm.size();
  const size_t elem = ElementSize(t);
  std::vector<unsigned char> buf(count * elem + 1);
  for (size_t i = 0; i < count; ++i)
    StoreElement(buf.data(), t, i,
                 op == ReduceOp::kMax || op == ReduceOp::kMin ? MinMaxInput(comm.rank(), i)
                                                              : Input(comm.rank(), i));
  comm.Allreduce(buf.data(), count, t, op, {algo})->Wait();
  const double tol =
      (t == DataType::kFloat16 || t == DataType::kBFloat16) && op == ReduceOp::kAvg ? 0.02 : 1e-9;
  for (size_t i = 0; i < count; ++i) {
    double want = Expected(op, p, i, t);
    double got = LoadElement(buf.data(), t, i);
    if (std::fabs(got - want) > tol * std::max(1.0, std::fabs(want))) {
      return std::string(AllreduceAlgorithmName(algo)) + " " + DataTypeName(t) + " " +
             ReduceOpName(op) + " p=" + std::to_string(p) + " count=" + std::to_string(count) +
             " rank " + std::to_string(comm.rank()) + " element " + std::to_string(i) + ": got " +
             std::to_string(got) + " want " + std::to_string(want);
    }
  }
  return "";
}

}  // namespace cdt::testing
