// The models' use announcements (train/models.h): the trainer defers each parameter's update
// until forward announces it, so a parameter forward uses without announcing it would be used
// one update late. Every model must announce every parameter in every forward, each once.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cdt/error.h"
#include "train/blas_library.h"
#include "train/models.h"

namespace cdt::train {
namespace {

void ExpectEveryParameterAnnouncedOnce(const ModelOptions& o) {
  torch::manual_seed(3);
  auto model = MakeModel(o);
  std::vector<const void*> seen;
  model->set_use_hook([&](const std::vector<torch::Tensor>& ps) {
    for (const auto& p : ps) seen.push_back(p.unsafeGetTensorImpl());
  });
  for (int pass = 0; pass < 2; ++pass) {
    seen.clear();
    model->Forward(torch::randn({5, 1, 28, 28}));
    std::set<const void*> announced(seen.begin(), seen.end());
    EXPECT_EQ(announced.size(), seen.size()) << o.name << ": a parameter was announced twice";
    for (const auto& p : model->parameters())
      EXPECT_TRUE(announced.count(p.unsafeGetTensorImpl()))
          << o.name << ": a parameter of shape " << p.sizes() << " was never announced";
    EXPECT_EQ(announced.size(), model->parameters().size()) << o.name;
  }
}

TEST(TrainModels, EveryParameterIsAnnouncedBeforeUse) {
  ExpectEveryParameterAnnouncedOnce({"mlp"});
  ExpectEveryParameterAnnouncedOnce({"cnn"});
  ExpectEveryParameterAnnouncedOnce({"cnn", 2, 64, 4, 8, 2, /*linear_blocks=*/4});
  ExpectEveryParameterAnnouncedOnce({"mlp", 2, 64, 4, 8, 2, /*linear_blocks=*/3});
  ExpectEveryParameterAnnouncedOnce({"moe-transformer", 2, 32, 4, 4, 2});
  ExpectEveryParameterAnnouncedOnce({"resnet18"});
  ExpectEveryParameterAnnouncedOnce({"resnet50"});
}

// The ResNets have the parameter counts of their CIFAR-style form (one input channel: the stem has
// 64 x 1 x 3 x 3 weights), and map [B, 1, 28, 28] to [B, 10].
TEST(TrainModels, ResNetsHaveTheirParameterCountsAndShapes) {
  for (const auto& [name, want] : std::vector<std::pair<std::string, int64_t>>{
           {"resnet18", 11172810}, {"resnet50", 23519690}}) {
    auto model = MakeModel({name});
    int64_t n = 0;
    for (const auto& p : model->parameters()) n += p.numel();
    EXPECT_EQ(n, want) << name;
    EXPECT_EQ(model->Forward(torch::randn({3, 1, 28, 28})).first.sizes(),
              (std::vector<int64_t>{3, 10}))
        << name;
  }
}

TEST(TrainModels, CnnHasTheSpecifiedParameterCount) {
  auto model = MakeModel({"cnn"});
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  EXPECT_EQ(n, 421642);
}

// Row blocks change how fc1 is stored, not what the network is: the same initial values, the same
// parameter count, the same logits; and the blocks are used in ascending order on even steps and in
// descending order on odd ones.
TEST(TrainModels, RowBlocksKeepTheFunctionAndAlternateTheirOrder) {
  ModelOptions whole{"cnn"}, split{"cnn"};
  whole.linear_blocks = 1;
  split.linear_blocks = 5;  // 128 rows: blocks of 26, 26, 26, 25, 25
  torch::manual_seed(7);
  auto a = MakeModel(whole);
  torch::manual_seed(7);
  auto b = MakeModel(split);
  int64_t n = 0;
  for (const auto& p : b->parameters()) n += p.numel();
  EXPECT_EQ(n, 421642);
  EXPECT_EQ(b->parameters().size(), a->parameters().size() + 8);  // 5 weights and biases, not 1
  auto x = torch::randn({6, 1, 28, 28});
  EXPECT_TRUE(torch::allclose(a->Forward(x).first, b->Forward(x).first, 1e-5, 1e-6));

  // fc1's blocks are the parameters registered after the two convolutions' weights and biases.
  std::vector<const void*> blocks;
  for (size_t k = 4; k < 4 + 10; k += 2) blocks.push_back(b->parameters()[k].unsafeGetTensorImpl());
  std::vector<const void*> order;
  b->set_use_hook([&](const std::vector<torch::Tensor>& ps) {
    for (const auto& p : ps)
      for (const void* w : blocks)
        if (p.unsafeGetTensorImpl() == w) order.push_back(w);
  });
  for (int64_t step : {0, 1, 2, 7}) {
    order.clear();
    b->set_step(step);
    b->Forward(x);
    std::vector<const void*> expected = blocks;
    if (step % 2) std::reverse(expected.begin(), expected.end());
    EXPECT_EQ(order, expected) << "step " << step;
  }
  EXPECT_THROW(MakeModel({"cnn", 2, 64, 4, 8, 2, 129}), Error);
  EXPECT_THROW(MakeModel({"cnn", 2, 64, 4, 8, 2, 0}), Error);
}

// Debian's libtorch links the generic libblas.so.3: in this process (which links libtorch) sgemm_
// resolves to whichever implementation the alternatives system selected, and the probe finds it.
TEST(TrainModels, TheProbeFindsTheBlasLibtorchLinks) {
  torch::Tensor product = torch::ones({4, 8}).mm(torch::ones({8, 2}));  // BLAS loaded and used
  EXPECT_EQ(product[0][0].item<float>(), 8.0f);
  const BlasLibrary b = LoadedBlas();
  EXPECT_NE(b.name, "not found") << "nothing in this process defines sgemm_";
  EXPECT_FALSE(b.path.empty());
}

}  // namespace
}  // namespace cdt::train
