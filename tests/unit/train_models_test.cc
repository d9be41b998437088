// The models' use announcements (train/models.h): the trainer defers each parameter's update
// until forward announces it, so a parameter forward uses without announcing it would be used
// one update late. Every model must announce every parameter in every forward, each once.
#include <gtest/gtest.h>

#include <set>

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
      EXPECT_TRUE(announced.count(p.unsafeGetTensorImpl())) << o.name << ": a parameter of shape "
                                                            << p.sizes() << " was never announced";
    EXPECT_EQ(announced.size(), model->parameters().size()) << o.name;
  }
}

TEST(TrainModels, EveryParameterIsAnnouncedBeforeUse) {
  ExpectEveryParameterAnnouncedOnce({"mlp"});
  ExpectEveryParameterAnnouncedOnce({"cnn"});
  ExpectEveryParameterAnnouncedOnce({"moe-transformer", 2, 32, 4, 4, 2});
}

TEST(TrainModels, CnnHasTheSpecifiedParameterCount) {
  auto model = MakeModel({"cnn"});
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  EXPECT_EQ(n, 421642);
}

}  // namespace
}  // namespace cdt::train
