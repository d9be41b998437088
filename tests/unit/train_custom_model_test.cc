// A library user's model (train/trainer.h, ModelFactory) trained by RunTraining on a one-rank
// group: the factory is used, the name only labels the result, and a model that announces none
// of its parameters (no BeforeUse calls) still trains with the same arithmetic as without the
// overlap of updates with the next forward: the trainer applies every update before its forward.
#include <gtest/gtest.h>

#include "cdt/tcp_communicator.h"
#include "comm/store/memory_store.h"
#include "train/models.h"
#include "train/trainer.h"

namespace cdt::train {
namespace {

class Silent : public ClassifierModel {  // announces nothing
 public:
  Silent() {
    fc1_ = register_module("fc1", torch::nn::Linear(784, 32));
    fc2_ = register_module("fc2", torch::nn::Linear(32, 10));
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x) override {
    return {fc2_->forward(torch::relu(fc1_->forward(x.flatten(1)))), torch::Tensor()};
  }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};

TrainResult Train(bool overlap) {
  MemoryStore store;
  CommunicatorOptions co;
  co.job_id = overlap ? "overlap" : "plain";
  std::unique_ptr<Communicator> comm = ConnectTcpCommunicator(store, co);
  TrainOptions o;
  o.model.name = "silent";
  o.data.dataset = "synthetic";
  o.data.synthetic_samples = 2000;
  o.data.batch_size = 32;
  o.reduction.bucket_mb = 0.01;  // several buckets, each updated on its own
  o.reduction.overlap_next_forward = overlap;
  o.steps = 30;
  o.metrics.progress = false;
  o.threads = 1;
  int built = 0;
  TrainResult r = RunTraining(*comm, o, nullptr, nullptr, [&built](const ModelOptions&) {
    ++built;
    return std::make_shared<Silent>();
  });
  EXPECT_EQ(built, 1);
  return r;
}

TEST(CustomModel, AModelThatAnnouncesNothingTrainsAsWithoutOverlap) {
  const TrainResult a = Train(true), b = Train(false);
  EXPECT_EQ(a.model, "silent");
  EXPECT_GT(a.buckets, 1);
  ASSERT_EQ(a.loss_curve.size(), 30u);
  ASSERT_EQ(a.loss_curve.size(), b.loss_curve.size());
  for (size_t i = 0; i < a.loss_curve.size(); ++i)
    EXPECT_EQ(a.loss_curve[i].second, b.loss_curve[i].second) << "step " << i;
  EXPECT_LT(a.loss_curve.back().second, a.loss_curve.front().second);
}

}  // namespace
}  // namespace cdt::train
