// Product and the bitwise reductions, uint8 and bool elements (issue 42): the kernel against an
// independent scalar reference (wrapping integer arithmetic done in uint64, bool as logic), every
// allreduce algorithm, reduce-scatter and reduce over real TCP loopback against the kernel's fold,
// and the combinations that mean nothing refused at submission naming what applies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "allreduce_check.h"
#include "cdt/error.h"
#include "comm/reduce.h"
#include "comm_test_util.h"

namespace cdt {
namespace {

using namespace cdt::testing;

const std::vector<DataType> kIntegerTypes = {DataType::kInt32, DataType::kInt64, DataType::kInt16,
                                             DataType::kInt8,  DataType::kUInt8, DataType::kBool};
const std::vector<ReduceOp> kAllOps = {ReduceOp::kSum, ReduceOp::kAvg,     ReduceOp::kMax,
                                       ReduceOp::kMin, ReduceOp::kProduct, ReduceOp::kBand,
                                       ReduceOp::kBor, ReduceOp::kBxor};

// Rank r's element i: small signed values (products over 5 ranks wrap in int8/uint8), 0/1 for bool.
int64_t Value(int rank, size_t i, DataType t) {
  if (t == DataType::kBool) return static_cast<int64_t>((i + static_cast<size_t>(rank)) % 3 == 0);
  if (t == DataType::kUInt8)
    return static_cast<int64_t>((i * 5 + static_cast<size_t>(rank) * 3) % 11);
  return static_cast<int64_t>((i + static_cast<size_t>(rank) * 3) % 7) - 3;
}

int Bits(DataType t) { return static_cast<int>(ElementSize(t)) * 8; }

// The element stored as the type's bit pattern, sign-extended for signed types.
int64_t Narrow(uint64_t v, DataType t) {
  if (t == DataType::kBool) return v != 0;
  const int bits = Bits(t);
  if (bits == 64) return static_cast<int64_t>(v);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  v &= mask;
  if (t == DataType::kUInt8) return static_cast<int64_t>(v);
  const uint64_t sign = uint64_t{1} << (bits - 1);
  return static_cast<int64_t>((v ^ sign)) - static_cast<int64_t>(sign);
}

// The reference: fold of ranks 0..p-1 in rank order, integer arithmetic wrapping at the width.
int64_t Reference(ReduceOp op, DataType t, int p, size_t i) {
  if (t == DataType::kBool) {
    bool acc = Value(0, i, t) != 0;
    for (int r = 1; r < p; ++r) {
      const bool x = Value(r, i, t) != 0;
      if (op == ReduceOp::kProduct || op == ReduceOp::kMin || op == ReduceOp::kBand)
        acc = acc && x;
      else if (op == ReduceOp::kBxor)
        acc = acc != x;
      else
        acc = acc || x;
    }
    return acc;
  }
  int64_t acc = Value(0, i, t);
  for (int r = 1; r < p; ++r) {
    const int64_t x = Value(r, i, t);
    const uint64_t a = static_cast<uint64_t>(acc), b = static_cast<uint64_t>(x);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = Narrow(a + b, t);
        break;
      case ReduceOp::kProduct:
        acc = Narrow(a * b, t);
        break;
      case ReduceOp::kMax:
        acc = std::max(acc, x);
        break;
      case ReduceOp::kMin:
        acc = std::min(acc, x);
        break;
      case ReduceOp::kBand:
        acc = Narrow(a & b, t);
        break;
      case ReduceOp::kBor:
        acc = Narrow(a | b, t);
        break;
      case ReduceOp::kBxor:
        acc = Narrow(a ^ b, t);
        break;
    }
  }
  if (op == ReduceOp::kAvg) acc = Narrow(static_cast<uint64_t>(acc / p), t);  // truncating
  return acc;
}

std::vector<unsigned char> Buffer(int rank, DataType t, size_t count) {
  std::vector<unsigned char> b(count * ElementSize(t));
  for (size_t i = 0; i < count; ++i)
    StoreElement(b.data(), t, i, static_cast<double>(Value(rank, i, t)));
  return b;
}

// "" or the first element of `buf` that differs from the reference.
std::string Compare(const std::vector<unsigned char>& buf, ReduceOp op, DataType t, int p,
                    size_t first, size_t count, const std::string& where) {
  for (size_t i = 0; i < count; ++i) {
    const double want = static_cast<double>(Reference(op, t, p, first + i));
    const double got = LoadElement(buf.data(), t, i);
    if (got != want)
      return where + " " + DataTypeName(t) + " " + ReduceOpName(op) + " p=" + std::to_string(p) +
             " element " + std::to_string(first + i) + ": got " + std::to_string(got) + " want " +
             std::to_string(want);
  }
  return "";
}

TEST(ReduceOps, TheKernelWrapsLikeTheReferenceForEveryIntegerTypeAndOp) {
  for (DataType t : kIntegerTypes)
    for (ReduceOp op : kAllOps) {
      if (!ReduceOpApplies(op, t)) continue;
      for (int p : {1, 2, 3, 5, 8}) {
        const size_t n = 29;
        std::vector<unsigned char> acc = Buffer(0, t, n);
        for (int r = 1; r < p; ++r) ReduceInto(acc.data(), Buffer(r, t, n).data(), n, t, op);
        if (op == ReduceOp::kAvg) FinishAverage(acc.data(), n, t, p);
        EXPECT_EQ(Compare(acc, op, t, p, 0, n, "kernel"), "");
      }
    }
}

TEST(ReduceOps, FloatProductsAreComputedInTheTypesPrecision) {
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16}) {
    const size_t n = 5;
    std::vector<unsigned char> a(n * ElementSize(t)), b(n * ElementSize(t));
    for (size_t i = 0; i < n; ++i) {
      StoreElement(a.data(), t, i, 1.5 + static_cast<double>(i));
      StoreElement(b.data(), t, i, -2.0);
    }
    ReduceInto(a.data(), b.data(), n, t, ReduceOp::kProduct);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(LoadElement(a.data(), t, i), -2.0 * (1.5 + static_cast<double>(i)))
          << DataTypeName(t);
  }
}

TEST(ReduceOps, OpsThatMeanNothingOnATypeAreRefusedNamingWhatApplies) {
  for (DataType t :
       {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16, DataType::kBFloat16})
    for (ReduceOp op : {ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor})
      EXPECT_FALSE(ReduceOpApplies(op, t));
  EXPECT_FALSE(ReduceOpApplies(ReduceOp::kAvg, DataType::kBool));
  try {
    CheckReduceOp(ReduceOp::kBxor, DataType::kBFloat16, "allreduce");
    FAIL() << "bxor on bf16 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("'bxor' is not defined on bf16"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("sum, avg, max, min, prod)"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ParseDataType("u8"), DataType::kUInt8);
  EXPECT_EQ(ParseReduceOp("bxor"), ReduceOp::kBxor);
  RunRanks(2, [](Communicator& comm) {
    float x[4] = {1, 2, 3, 4};
    try {
      comm.Allreduce(x, 4, DataType::kFloat32, ReduceOp::kBor)->Wait();
      ADD_FAILURE() << "bor on f32 submitted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    }
    // The refusal happened before anything was queued: the group still works.
    comm.Allreduce(x, 4, DataType::kFloat32, ReduceOp::kProduct)->Wait();
    EXPECT_EQ(x[3], 16.0f);
  });
}

class ReduceOpsTest : public ::testing::TestWithParam<int> {};

TEST_P(ReduceOpsTest, EveryAlgorithmReduceScatterAndReduceAgreeWithTheReference) {
  const int p = GetParam();
  RankSetup setup;
  setup.host_ids = TwoNodes(p);  // the hierarchical algorithm has two nodes to span
  RunRanks(
      p,
      [&](Communicator& comm) {
        const int me = comm.rank();
        for (DataType t : kIntegerTypes)
          for (ReduceOp op : kAllOps) {
            if (!ReduceOpApplies(op, t)) continue;
            for (size_t n : {size_t{1}, size_t{1031}, size_t{70001}}) {
              for (AllreduceAlgorithm algo : kAlgorithms) {
                std::vector<unsigned char> buf = Buffer(me, t, n);
                comm.Allreduce(buf.data(), n, t, op, {algo})->Wait();
                EXPECT_EQ(Compare(buf, op, t, p, 0, n,
                                  std::string("allreduce ") + AllreduceAlgorithmName(algo)),
                          "");
              }
              // Reduce-scatter: rank r's block is n elements starting at r * n.
              std::vector<unsigned char> in = Buffer(me, t, n * static_cast<size_t>(p));
              std::vector<unsigned char> out(n * ElementSize(t));
              comm.ReduceScatter(in.data(), out.data(), std::vector<size_t>(p, n), t, op)->Wait();
              EXPECT_EQ(Compare(out, op, t, p, n * static_cast<size_t>(me), n, "reduce_scatter"),
                        "");
              std::vector<unsigned char> r = Buffer(me, t, n);
              comm.Reduce(r.data(), n, t, op, p - 1)->Wait();
              if (me == p - 1) {
                EXPECT_EQ(Compare(r, op, t, p, 0, n, "reduce"), "");
              }
            }
          }
      },
      setup);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ReduceOpsTest, ::testing::Values(2, 3, 5),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

}  // namespace
}  // namespace cdt
