// Every allreduce algorithm x dtype x world size {1,2,3,4,5,7,8} x count {0, 1, p-1, not divisible
// by p, >= 4M}, plus the other collectives, over real TCP loopback with ranks as threads.
// Ranks are spread over two emulated "nodes" (host ids) so the hierarchical path is exercised with
// equal and unequal ranks per node.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "allreduce_check.h"
#include "comm_test_util.h"

namespace cdt {
namespace {

using testing::RunRanks;
using namespace cdt::testing;

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, AllreduceEveryAlgorithmTypeAndCount) {
  const int p = GetParam();
  testing::RankSetup setup;
  setup.host_ids = TwoNodes(p);
  setup.base.segment_bytes = 4096;  // small segments: many pipeline steps on modest buffers
  setup.base.timeout = std::chrono::seconds(60);
  RunRanks(
      p,
      [&](Communicator& comm) {
        for (AllreduceAlgorithm algo : kAlgorithms) {
          for (DataType t : kTypes) {
            for (size_t count :
                 {size_t{0}, size_t{1}, static_cast<size_t>(p > 1 ? p - 1 : 2), size_t{1031}}) {
              for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
                EXPECT_EQ(CheckAllreduce(comm, algo, t, op, count), "");
            }
            EXPECT_EQ(CheckAllreduce(comm, algo, t, ReduceOp::kSum, kLarge), "");
          }
        }
      },
      setup);
}

// Twice: through the node's shared memory (small slots: many rounds), and over TCP alone.
TEST_P(CollectivesTest, BroadcastAllgatherReduceScatterBarrierSendRecv) {
  const int p = GetParam();
  for (bool shm : {true, false}) {
    SCOPED_TRACE(shm ? "shared memory" : "TCP");
    testing::RankSetup setup;
    setup.base.segment_bytes = 4096;
    setup.base.shared_memory = shm;
    setup.base.shm_slot_bytes = 8192;
    RunRanks(
        p,
        [&](Communicator& comm) {
          const int me = comm.rank();
          ASSERT_EQ(comm.shares_memory(), shm && p > 1);
          for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{300000}}) {
            for (int root = 0; root < p; root += (p > 3 ? p / 2 : 1)) {
              std::vector<int32_t> b(count, me == root ? 0 : -1);
              for (size_t i = 0; i < count && me == root; ++i)
                b[i] = static_cast<int32_t>(i * 3 + root);
              comm.Broadcast(b.data(), count, DataType::kInt32, root)->Wait();
              for (size_t i = 0; i < count; ++i)
                ASSERT_EQ(b[i], static_cast<int32_t>(i * 3 + root));
            }
            // Allgatherv with unequal counts: rank r contributes count + r elements.
            std::vector<size_t> counts;
            for (int r = 0; r < p; ++r) counts.push_back(count + static_cast<size_t>(r));
            std::vector<int64_t> in(count + static_cast<size_t>(me));
            for (size_t i = 0; i < in.size(); ++i) in[i] = me * 1000000 + static_cast<int64_t>(i);
            size_t total = 0;
            for (size_t c : counts) total += c;
            std::vector<int64_t> out(total, -7);
            comm.Allgatherv(in.data(), out.data(), counts, DataType::kInt64)->Wait();
            size_t k = 0;
            for (int r = 0; r < p; ++r)
              for (size_t i = 0; i < counts[r]; ++i)
                ASSERT_EQ(out[k++], r * 1000000 + static_cast<int64_t>(i));
            // Reduce-scatter with the same unequal counts.
            std::vector<float> rs_in(total);
            for (size_t i = 0; i < total; ++i) rs_in[i] = static_cast<float>(Input(me, i));
            std::vector<float> rs_out(counts[me] + 1, -1.0f);
            comm.ReduceScatter(rs_in.data(), rs_out.data(), counts, DataType::kFloat32,
                               ReduceOp::kSum)
                ->Wait();
            size_t base = 0;
            for (int r = 0; r < me; ++r) base += counts[r];
            for (size_t i = 0; i < counts[me]; ++i)
              ASSERT_EQ(rs_out[i], Expected(ReduceOp::kSum, p, base + i, DataType::kFloat32));
            ASSERT_EQ(rs_out[counts[me]], -1.0f) << "reduce_scatter wrote past its slice";
          }
          comm.Barrier()->Wait();
          // Ring of send/recv: each rank sends to the next and receives from the previous.
          if (p > 1) {
            std::vector<char> out(70000, static_cast<char>(me)), in(70000, -1);
            auto s = comm.Send(out.data(), out.size(), (me + 1) % p);
            auto r = comm.Recv(in.data(), in.size(), (me + p - 1) % p);
            s->Wait();
            r->Wait();
            for (char c : in) ASSERT_EQ(c, static_cast<char>((me + p - 1) % p));
          }
        },
        setup);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, CollectivesTest, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

TEST(HierarchicalAllreduce, ThreeUnequalNodes) {
  testing::RankSetup setup;
  setup.host_ids = {"a", "b", "b", "c", "c", "c"};
  setup.base.segment_bytes = 2048;
  RunRanks(
      6,
      [&](Communicator& comm) {
        EXPECT_EQ(comm.layout().num_nodes, 3);
        for (size_t count : {size_t{1}, size_t{5}, size_t{1031}, size_t{200003}})
          EXPECT_EQ(CheckAllreduce(comm, AllreduceAlgorithm::kHierarchical, DataType::kFloat32,
                                   ReduceOp::kSum, count),
                    "");
      },
      setup);
}

// The same inputs give the same bits on every call, for every algorithm but the autotuner's
// (which alternates algorithms on purpose): e.g. a rank with two children in the tree adds their
// segments in child order, not in the order they happen to land (that made three ranks' float
// sums differ between calls, seen under TSan). Values spread over six decades, so that the order
// of additions shows in the rounding. Ranks on two emulated hosts, for the hierarchical path.
TEST(Allreduce, SameInputsSameBitsEveryCall) {
  for (int p : {3, 5})
    for (AllreduceAlgorithm algorithm : kAlgorithms) {
      if (algorithm == AllreduceAlgorithm::kAuto) continue;
      testing::RankSetup setup;
      setup.host_ids = TwoNodes(p);
      setup.base.segment_bytes = 4096;  // many segments, each a race between two children
      RunRanks(
          p,
          [&](Communicator& comm) {
            std::mt19937 rng(static_cast<unsigned>(17 + comm.rank()));
            std::uniform_real_distribution<float> mantissa(-1, 1);
            std::uniform_int_distribution<int> decade(-3, 3);
            std::vector<float> input(20000);
            for (float& x : input)
              x = mantissa(rng) * std::pow(10.0f, static_cast<float>(decade(rng)));
            std::vector<float> first;
            for (int call = 0; call < 20; ++call) {
              std::vector<float> data = input;
              comm.Allreduce(data.data(), data.size(), DataType::kFloat32, ReduceOp::kSum,
                             AllreduceOptions{algorithm})
                  ->Wait();
              if (call == 0) first = data;
              ASSERT_EQ(std::memcmp(data.data(), first.data(), 4 * data.size()), 0)
                  << AllreduceAlgorithmName(algorithm) << ", world " << p << ", rank "
                  << comm.rank() << ": call " << call << " differs from call 0";
            }
          },
          setup);
    }
}

}  // namespace
}  // namespace cdt
