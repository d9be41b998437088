// Reduce, gather(v), scatter(v) and all-to-all(v) over real TCP loopback with ranks as threads,
// world sizes 1-8, every root, every dtype and reduction, counts around the algorithms' switch
// points (binomial/pipelined reduce at 256 KiB, all-at-once/pairwise all-to-all at 64 KiB a peer).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "allreduce_check.h"
#include "cdt/error.h"
#include "comm/collectives/algorithms.h"
#include "comm_test_util.h"

namespace cdt {
namespace {

using namespace cdt::testing;

class RootedCollectivesTest : public ::testing::TestWithParam<int> {};

// Reduce of `count` elements to `root`: the root holds the closed form, the others' buffers are
// untouched. "" or the first wrong element.
std::string CheckReduce(Communicator& comm, DataType t, ReduceOp op, size_t count, int root) {
  const int p = comm.size(), me = comm.rank();
  const size_t elem = ElementSize(t);
  const bool minmax = op == ReduceOp::kMax || op == ReduceOp::kMin;
  std::vector<unsigned char> buf(count * elem + 1, 0xAB), before;
  for (size_t i = 0; i < count; ++i)
    StoreElement(buf.data(), t, i, minmax ? MinMaxInput(me, i) : Input(me, i));
  before = buf;
  comm.Reduce(buf.data(), count, t, op, root)->Wait();
  const std::string where = std::string(DataTypeName(t)) + " " + ReduceOpName(op) +
                            " p=" + std::to_string(p) + " count=" + std::to_string(count) +
                            " root " + std::to_string(root) + " rank " + std::to_string(me);
  if (buf[count * elem] != 0xAB) return where + ": wrote past the buffer";
  if (me != root) return buf == before ? "" : where + ": a non-root buffer changed";
  const double tol =
      (t == DataType::kFloat16 || t == DataType::kBFloat16) && op == ReduceOp::kAvg ? 0.02 : 1e-9;
  for (size_t i = 0; i < count; ++i) {
    const double want = Expected(op, p, i, t), got = LoadElement(buf.data(), t, i);
    if (std::fabs(got - want) > tol * std::max(1.0, std::fabs(want)))
      return where + " element " + std::to_string(i) + ": got " + std::to_string(got) + " want " +
             std::to_string(want);
  }
  return "";
}

TEST_P(RootedCollectivesTest, ReduceEveryTypeOpRootAndSize) {
  const int p = GetParam();
  RankSetup setup;
  setup.base.segment_bytes = 4096;
  setup.base.timeout = std::chrono::seconds(60);
  RunRanks(
      p,
      [&](Communicator& comm) {
        for (int root = 0; root < p; root += (p > 3 ? p / 2 : 1)) {
          for (DataType t : kTypes)
            for (size_t count : {size_t{0}, size_t{1}, static_cast<size_t>(p + 1), size_t{1031}})
              for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin})
                EXPECT_EQ(CheckReduce(comm, t, op, count, root), "");
          // Past the switch to reduce-scatter + gather, and an uneven split of it.
          for (size_t count : {size_t{65536}, size_t{300007}})
            EXPECT_EQ(CheckReduce(comm, DataType::kFloat32, ReduceOp::kSum, count, root), "");
          EXPECT_EQ(CheckReduce(comm, DataType::kInt8, ReduceOp::kMax, 1 << 19, root), "");
        }
      },
      setup);
}

TEST_P(RootedCollectivesTest, GathervAndScattervWithUnequalCountsAtEveryRoot) {
  const int p = GetParam();
  RankSetup setup;
  RunRanks(
      p,
      [&](Communicator& comm) {
        const int me = comm.rank();
        for (size_t count : {size_t{0}, size_t{1}, size_t{1031}, size_t{200000}}) {
          // Rank r has count + r elements (rank 0 none when count is 0).
          std::vector<size_t> counts;
          for (int r = 0; r < p; ++r) counts.push_back(count + static_cast<size_t>(r));
          const size_t total = std::accumulate(counts.begin(), counts.end(), size_t{0});
          for (int root = 0; root < p; ++root) {
            std::vector<int64_t> in(counts[me]);
            for (size_t i = 0; i < in.size(); ++i) in[i] = me * 1000000 + static_cast<int64_t>(i);
            std::vector<int64_t> out(me == root ? total + 1 : 1, -7);
            comm.Gatherv(in.data(), out.data(), counts, DataType::kInt64, root)->Wait();
            if (me == root) {
              size_t k = 0;
              for (int r = 0; r < p; ++r)
                for (size_t i = 0; i < counts[r]; ++i)
                  ASSERT_EQ(out[k++], r * 1000000 + static_cast<int64_t>(i)) << "root " << root;
              ASSERT_EQ(out[total], -7) << "gather wrote past the buffer";
            } else {
              ASSERT_EQ(out[0], -7) << "gather wrote into a non-root output";
            }
            // Scatter the gathered whole back out: every rank gets its own block again.
            std::vector<int64_t> back(counts[me] + 1, -9);
            comm.Scatterv(out.data(), back.data(), counts, DataType::kInt64, root)->Wait();
            for (size_t i = 0; i < counts[me]; ++i) ASSERT_EQ(back[i], in[i]) << "root " << root;
            ASSERT_EQ(back[counts[me]], -9) << "scatter wrote past the buffer";
          }
        }
      },
      setup);
}

// Three times: through the node's shared memory with single-copy reads where blocks reach
// kAlltoallvSingleCopyMinBytes (scale 20000) and through the slots below (small slots: many
// rounds), through the slots alone, and over TCP alone.
TEST_P(RootedCollectivesTest, AlltoallvUnevenSplitsSmallAndLarge) {
  const int p = GetParam();
  for (int mode : {0, 1, 2}) {
    const bool shm = mode < 2;
    SCOPED_TRACE(mode == 0 ? "shared memory, single copy" : shm ? "shared memory" : "TCP");
    RankSetup setup;
    setup.base.shared_memory = shm;
    setup.base.shm_single_copy = mode == 0;
    setup.base.shm_slot_bytes = 8192;
    RunRanks(
        p,
        [&](Communicator& comm) {
          const int me = comm.rank();
          ASSERT_EQ(comm.shares_memory(), shm && p > 1);
          // Rank s sends (s + 2 d) * scale elements to rank d (some blocks empty when scale is 0).
          for (size_t scale : {size_t{0}, size_t{1}, size_t{37}, size_t{20000}}) {
            auto n = [&](int s, int d) { return static_cast<size_t>(s + 2 * d) * scale + (d % 2); };
            std::vector<size_t> send, recv;
            for (int d = 0; d < p; ++d) send.push_back(n(me, d));
            for (int s = 0; s < p; ++s) recv.push_back(n(s, me));
            std::vector<float> in(std::accumulate(send.begin(), send.end(), size_t{0}));
            size_t k = 0;
            for (int d = 0; d < p; ++d)
              for (size_t i = 0; i < send[d]; ++i)
                in[k++] = static_cast<float>(me * 100000 + d * 1000) + static_cast<float>(i % 997);
            std::vector<float> out(std::accumulate(recv.begin(), recv.end(), size_t{0}) + 1, -1);
            comm.Alltoallv(in.data(), send, out.data(), recv, DataType::kFloat32)->Wait();
            k = 0;
            for (int s = 0; s < p; ++s)
              for (size_t i = 0; i < recv[s]; ++i)
                ASSERT_EQ(out[k++],
                          static_cast<float>(s * 100000 + me * 1000) + static_cast<float>(i % 997))
                    << "from rank " << s << " scale " << scale;
            ASSERT_EQ(out.back(), -1) << "alltoall wrote past the buffer";
          }
        },
        setup);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RootedCollectivesTest, ::testing::Values(1, 2, 3, 4, 5, 7, 8),
                         [](const auto& info) { return "p" + std::to_string(info.param); });

TEST(RootedCollectives, AllToAllTakesTcpWhereTheSlotsCannotHoldARegionPerRank) {
  EXPECT_EQ(AlltoallvShmRegionBytes(1 << 20, 8), 131008u);  // (1 MiB - 64) / 8, to 64 bytes
  EXPECT_EQ(AlltoallvShmRegionBytes(4096, 8), 448u);
  EXPECT_EQ(AlltoallvShmRegionBytes(4096, 64), 0u);  // CDT_SHM_SLOT_BYTES=4096, 64 ranks a node
  EXPECT_EQ(AlltoallvShmRegionBytes(64, 1), 0u);
  EXPECT_EQ(AlltoallvShmRegionBytes(1 << 20, 0), 0u);
}

TEST(RootedCollectives, BadRootsAndCountsAreRefusedAtSubmission) {
  RunRanks(2, [&](Communicator& comm) {
    float x = 0;
    EXPECT_THROW(comm.Reduce(&x, 1, DataType::kFloat32, ReduceOp::kSum, 2), Error);
    EXPECT_THROW(comm.Gatherv(&x, &x, {1}, DataType::kFloat32, 0), Error);
    EXPECT_THROW(comm.Scatterv(&x, &x, {1, 1}, DataType::kFloat32, -1), Error);
    try {
      comm.Alltoallv(&x, {1, 0}, &x, {0, 1}, DataType::kFloat32);  // itself: 1 out, 0 in (rank 0)
      if (comm.rank() == 0) ADD_FAILURE() << "a self block that does not match was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expects"), std::string::npos) << e.what();
    }
    comm.Barrier()->Wait();
  });
}

// A peer that dies during a gather fails the root's operation naming it, within the timeout.
TEST(RootedCollectives, APeerLostDuringAGatherFailsTheRootNamingIt) {
  RankSetup setup;
  setup.base.timeout = std::chrono::seconds(5);
  RunRanks(
      3,
      [&](Communicator& comm) {
        std::vector<int32_t> in(1000, comm.rank()), out(3000);
        if (comm.rank() == 2) {
          comm.Abort();  // closes its connections: the others see the peer go
          return;
        }
        try {
          comm.Gatherv(in.data(), out.data(), {1000, 1000, 1000}, DataType::kInt32, 0)->Wait();
          if (comm.rank() == 0) ADD_FAILURE() << "the gather completed without rank 2";
        } catch (const Error& e) {
          if (comm.rank() == 0) {
            EXPECT_NE(std::string(e.what()).find("rank 2"), std::string::npos) << e.what();
          }
        }
      },
      setup);
}

}  // namespace
}  // namespace cdt
