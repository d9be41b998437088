// Compressor state through a checkpoint (Compressor::GetState / SetState): a state restored into
// the same compressor continues bit for bit; one that does not fit (another PowerSGD rank, garbage)
// is left out and said, never read by offsets.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "comm_test_util.h"
#include "compress/compressor.h"
#include "compress/registry.h"
#include "compress_test_util.h"

namespace cdt::compress {
namespace {

TEST(Compress, StateRoundTripsThroughGetAndSet) {
  testing::RunRanks(2, [&](Communicator& comm) {
    CompressorOptions o;
    o.powersgd_min_saved_bytes = 0;  // 40x30 is factored (its Q is the state), not sent whole
    std::vector<TensorView> t = {{0, 40, 30}};
    for (const std::string& name :
         {std::string("powersgd"), std::string("topk"), std::string("randomk")}) {
      auto a = MakeCompressor(name, o, t), b = MakeCompressor(name, o, t);
      auto g = Gradient(comm.rank(), 1200);
      std::vector<float> local(1200);
      a->Reduce(comm, g.data(), local.data(), 1200);
      EXPECT_EQ(b->SetState(a->GetState()), "") << name;  // all of it used
      // Garbage (a count no residual has) is left out and said, not read by offsets.
      EXPECT_NE(MakeCompressor(name, o, t)->SetState({1e30f, 1}), "") << name;
      auto g1 = Gradient(comm.rank(), 1200, 1), g2 = g1;
      a->Reduce(comm, g1.data(), local.data(), 1200);
      b->Reduce(comm, g2.data(), local.data(), 1200);
      EXPECT_EQ(g1, g2) << name;
    }
  });
}

TEST(Compress, PowerSgdStateOfAnotherRankStartsAFreshQ) {
  // A rank-4 checkpoint resumed at rank 2 (and the other way round) warm-starts nothing: the
  // result is a fresh compressor's, not one built from the other rank's Q read by offsets.
  testing::RunRanks(2, [&](Communicator& comm) {
    std::vector<TensorView> t = {{0, 40, 30}, {1200, 20, 16}};
    const size_t n = 1200 + 320;
    for (auto [from, to] : {std::pair{4, 2}, std::pair{2, 4}}) {
      CompressorOptions a_opts, b_opts;
      a_opts.powersgd_rank = from;
      b_opts.powersgd_rank = to;
      a_opts.error_feedback = b_opts.error_feedback = false;
      a_opts.powersgd_min_saved_bytes = b_opts.powersgd_min_saved_bytes = 0;  // factor both
      auto a = MakeCompressor("powersgd", a_opts, t),
           loaded = MakeCompressor("powersgd", b_opts, t),
           fresh = MakeCompressor("powersgd", b_opts, t);
      auto g = Gradient(comm.rank(), n);
      std::vector<float> local(n);
      a->Reduce(comm, g.data(), local.data(), n);
      const std::string why = loaded->SetState(a->GetState());
      EXPECT_NE(why.find("rank-" + std::to_string(to) + " factors"), std::string::npos) << why;
      auto g1 = Gradient(comm.rank(), n, 1), g2 = g1;
      loaded->Reduce(comm, g1.data(), local.data(), n);
      fresh->Reduce(comm, g2.data(), local.data(), n);
      EXPECT_EQ(g1, g2) << "rank " << from << " -> " << to;
    }
  });
}

}  // namespace
}  // namespace cdt::compress
