#include "train/models.h"

#include <string>
#include <vector>

#include "cdt/error.h"

namespace cdt::train {
namespace {

namespace nn = torch::nn;

nn::Conv2d Conv(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
  return nn::Conv2d(
      nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
}

// A conv and its batch norm, announced together just before use (models.h: the trainer defers
// each parameter's update until then).
class ConvBn : public nn::Module {
 public:
  ConvBn(int64_t in, int64_t out, int64_t kernel, int64_t stride) {
    conv_ = register_module("conv", Conv(in, out, kernel, stride));
    bn_ = register_module("bn", nn::BatchNorm2d(out));
  }
  torch::Tensor forward(const torch::Tensor& x, const ClassifierModel::UseHook& before_use) {
    before_use(parameters());
    return bn_(conv_(x));
  }

 private:
  nn::Conv2d conv_{nullptr};
  nn::BatchNorm2d bn_{nullptr};
};

// Basic (two 3x3) or bottleneck (1x1, 3x3, 1x1 with x4 expansion) residual block; a 1x1 conv on
// the shortcut where the shape changes.
class Block : public nn::Module {
 public:
  Block(int64_t in, int64_t width, int64_t stride, bool bottleneck) {
    const int64_t out = bottleneck ? 4 * width : width;
    if (bottleneck) {
      layers_.push_back(register_module("a", std::make_shared<ConvBn>(in, width, 1, 1)));
      layers_.push_back(register_module("b", std::make_shared<ConvBn>(width, width, 3, stride)));
      layers_.push_back(register_module("c", std::make_shared<ConvBn>(width, out, 1, 1)));
    } else {
      layers_.push_back(register_module("a", std::make_shared<ConvBn>(in, width, 3, stride)));
      layers_.push_back(register_module("b", std::make_shared<ConvBn>(width, out, 3, 1)));
    }
    if (stride != 1 || in != out)
      shortcut_ = register_module("shortcut", std::make_shared<ConvBn>(in, out, 1, stride));
  }
  torch::Tensor forward(const torch::Tensor& x, const ClassifierModel::UseHook& before_use) {
    torch::Tensor h = x;
    for (size_t i = 0; i < layers_.size(); ++i) {
      h = layers_[i]->forward(h, before_use);
      if (i + 1 < layers_.size()) h = torch::relu(h);
    }
    return torch::relu(h + (shortcut_ ? shortcut_->forward(x, before_use) : x));
  }

 private:
  std::vector<std::shared_ptr<ConvBn>> layers_;
  std::shared_ptr<ConvBn> shortcut_;
};

class ResNet : public ClassifierModel {
 public:
  ResNet(const std::vector<int>& blocks, bool bottleneck) {
    stem_ = register_module("stem", std::make_shared<ConvBn>(1, 64, 3, 1));
    int64_t in = 64;
    const int64_t widths[] = {64, 128, 256, 512};
    for (size_t s = 0; s < blocks.size(); ++s) {
      for (int b = 0; b < blocks[s]; ++b) {
        const int64_t stride = (s > 0 && b == 0) ? 2 : 1;
        auto block = std::make_shared<Block>(in, widths[s], stride, bottleneck);
        blocks_.push_back(
            register_module("layer" + std::to_string(s + 1) + "_" + std::to_string(b), block));
        in = bottleneck ? 4 * widths[s] : widths[s];
      }
    }
    head_ = register_module("fc", nn::Linear(in, 10));
  }

  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x) override {
    const UseHook before_use = announce();
    torch::Tensor h = torch::relu(stem_->forward(x, before_use));
    for (auto& block : blocks_) h = block->forward(h, before_use);
    h = torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    BeforeUse(*head_);
    return {head_(h), {}};
  }

 private:
  std::shared_ptr<ConvBn> stem_;
  std::vector<std::shared_ptr<Block>> blocks_;
  nn::Linear head_{nullptr};
};

}  // namespace

std::shared_ptr<ClassifierModel> MakeResNet(int depth) {
  if (depth == 18) return std::make_shared<ResNet>(std::vector<int>{2, 2, 2, 2}, false);
  if (depth == 50) return std::make_shared<ResNet>(std::vector<int>{3, 4, 6, 3}, true);
  throw Error(ErrorCode::kInvalidArgument,
              "resnet" + std::to_string(depth) + ": only resnet18 and resnet50 are built");
}

}  // namespace cdt::train
