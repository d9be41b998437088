#include "train/models.h"

#include "cdt/error.h"

namespace cdt::train {

namespace {

namespace nn = torch::nn;

// A linear layer whose weight rows (and bias) are split into `blocks` parameters (models.h). It is
// initialised through an ordinary nn::Linear, so its initial values — and the random numbers it
// draws — are exactly those of the unsplit layer.
class RowBlockedLinear : public nn::Module {
 public:
  RowBlockedLinear(int64_t in, int64_t out, int blocks) {
    if (blocks < 1 || blocks > out)
      throw Error(ErrorCode::kInvalidArgument, "--linear-blocks must be between 1 and " +
                                                   std::to_string(out) + " (the layer's outputs)");
    nn::Linear whole(in, out);
    if (blocks == 1) {
      weights_.push_back(register_parameter("weight", whole->weight.detach().clone()));
      biases_.push_back(register_parameter("bias", whole->bias.detach().clone()));
      return;
    }
    int64_t row = 0;
    for (int i = 0; i < blocks; ++i) {
      const int64_t rows = out / blocks + (i < out % blocks ? 1 : 0);
      const std::string n = std::to_string(i);
      weights_.push_back(
          register_parameter("weight" + n, whole->weight.detach().narrow(0, row, rows).clone()));
      biases_.push_back(
          register_parameter("bias" + n, whole->bias.detach().narrow(0, row, rows).clone()));
      row += rows;
    }
  }

  // Computes the blocks in ascending order, or descending when `reversed`, announcing each block's
  // parameters through `before_use` just before it.
  torch::Tensor forward(const torch::Tensor& x, bool reversed,
                        const std::function<void(const std::vector<torch::Tensor>&)>& before_use) {
    const size_t n = weights_.size();
    std::vector<torch::Tensor> parts(n);
    for (size_t j = 0; j < n; ++j) {
      const size_t i = reversed ? n - 1 - j : j;
      before_use({weights_[i], biases_[i]});
      parts[i] = torch::linear(x, weights_[i], biases_[i]);
    }
    return n == 1 ? parts[0] : torch::cat(parts, 1);
  }

 private:
  std::vector<torch::Tensor> weights_, biases_;
};

class Mlp : public ClassifierModel {
 public:
  explicit Mlp(int blocks) {
    fc1_ = register_module("fc1", std::make_shared<RowBlockedLinear>(784, kMlpHidden, blocks));
    fc2_ = register_module("fc2", nn::Linear(512, 256));
    fc3_ = register_module("fc3", nn::Linear(256, 10));
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x) override {
    auto h = torch::relu(fc1_->forward(x.flatten(1), odd_step(), announce()));
    BeforeUse(*fc2_);
    h = torch::relu(fc2_(h));
    BeforeUse(*fc3_);
    return {fc3_(h), {}};
  }

 private:
  std::shared_ptr<RowBlockedLinear> fc1_;
  nn::Linear fc2_{nullptr}, fc3_{nullptr};
};

class Cnn : public ClassifierModel {
 public:
  explicit Cnn(int blocks) {
    conv1_ = register_module("conv1", nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)));
    conv2_ = register_module("conv2", nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)));
    fc1_ = register_module("fc1", std::make_shared<RowBlockedLinear>(3136, kCnnHidden, blocks));
    fc2_ = register_module("fc2", nn::Linear(128, 10));
  }
  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x) override {
    BeforeUse(*conv1_);
    auto h = torch::max_pool2d(torch::relu(conv1_(x)), 2);
    BeforeUse(*conv2_);
    h = torch::max_pool2d(torch::relu(conv2_(h)), 2);
    h = torch::relu(fc1_->forward(h.flatten(1), odd_step(), announce()));
    BeforeUse(*fc2_);
    return {fc2_(h), {}};
  }

 private:
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
  std::shared_ptr<RowBlockedLinear> fc1_;
  nn::Linear fc2_{nullptr};
};

// Mixture of experts feed-forward: each token goes to its top-k experts, weighted by the
// renormalised gate probabilities. Experts that receive no token in a batch get no gradient; the
// gradient reducer fills those with zeros (as DDP's find_unused_parameters does).
class MoeFeedForward : public nn::Module {
 public:
  MoeFeedForward(int width, int experts, int top_k) : experts_(experts), top_k_(top_k) {
    gate_ = register_module("gate", nn::Linear(width, experts));
    for (int e = 0; e < experts; ++e) {
      auto expert =
          nn::Sequential(nn::Linear(width, 2 * width), nn::GELU(), nn::Linear(2 * width, width));
      experts_list_.push_back(register_module("expert" + std::to_string(e), expert));
    }
  }

  // x: [T, width]. Returns the output and the load-balancing loss.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) {
    auto probs = torch::softmax(gate_(x), -1);     // [T, E]
    auto [top_p, top_i] = probs.topk(top_k_, -1);  // [T, k]
    top_p = top_p / top_p.sum(-1, true);
    auto out = torch::zeros_like(x);
    for (int e = 0; e < experts_; ++e) {
      auto hit = (top_i == e);  // [T, k]
      auto rows = hit.any(-1).nonzero().squeeze(1);
      if (rows.numel() == 0) continue;
      auto weight = (top_p * hit).sum(-1).index_select(0, rows).unsqueeze(1);
      out.index_add_(
          0, rows,
          experts_list_[static_cast<size_t>(e)]->forward(x.index_select(0, rows)) * weight);
    }
    // f_e: share of routing slots taken by expert e; P_e: mean gate probability of e.
    auto counts = torch::zeros({experts_}, x.options())
                      .index_add_(0, top_i.flatten(), torch::ones({top_i.numel()}, x.options()));
    auto f = counts / static_cast<double>(top_i.numel());
    auto aux = experts_ * (f * probs.mean(0)).sum();
    return {out, aux};
  }

 private:
  int experts_, top_k_;
  nn::Linear gate_{nullptr};
  std::vector<nn::Sequential> experts_list_;
};

class MoeTransformer : public ClassifierModel {
 public:
  explicit MoeTransformer(const ModelOptions& o) : width_(o.width) {
    embed_ = register_module("embed", nn::Linear(49, o.width));
    position_ = register_parameter("position", torch::randn({16, 1, o.width}) * 0.02);
    for (int l = 0; l < o.layers; ++l) {
      const std::string p = "layer" + std::to_string(l) + "_";
      norm1_.push_back(
          register_module(p + "norm1", nn::LayerNorm(nn::LayerNormOptions({o.width}))));
      attn_.push_back(register_module(p + "attn", nn::MultiheadAttention(o.width, o.heads)));
      norm2_.push_back(
          register_module(p + "norm2", nn::LayerNorm(nn::LayerNormOptions({o.width}))));
      moe_.push_back(register_module(
          p + "moe", std::make_shared<MoeFeedForward>(o.width, o.experts, o.top_k)));
    }
    final_norm_ = register_module("final_norm", nn::LayerNorm(nn::LayerNormOptions({o.width})));
    head_ = register_module("head", nn::Linear(o.width, 10));
  }

  std::pair<torch::Tensor, torch::Tensor> Forward(const torch::Tensor& x) override {
    const int64_t B = x.size(0);
    // [B, 1, 28, 28] -> 16 patches of 7x7 -> [16, B, 49] (sequence first, as MultiheadAttention
    // wants).
    auto patches = x.view({B, 4, 7, 4, 7}).permute({1, 3, 0, 2, 4}).reshape({16, B, 49});
    BeforeUse(*embed_);
    BeforeUse(position_);
    auto h = embed_(patches) + position_;
    torch::Tensor aux = torch::zeros({}, x.options());
    for (size_t l = 0; l < attn_.size(); ++l) {
      BeforeUse(*norm1_[l]);
      auto n = norm1_[l](h);
      BeforeUse(*attn_[l]);
      h = h + std::get<0>(attn_[l](n, n, n));
      BeforeUse(*norm2_[l]);
      BeforeUse(*moe_[l]);
      auto [y, layer_aux] = moe_[l]->forward(norm2_[l](h).view({16 * B, width_}));
      h = h + y.view({16, B, width_});
      aux = aux + layer_aux;
    }
    BeforeUse(*final_norm_);
    BeforeUse(*head_);
    return {head_(final_norm_(h.mean(0))), aux / static_cast<double>(attn_.size())};
  }

 private:
  int width_;
  nn::Linear embed_{nullptr}, head_{nullptr};
  torch::Tensor position_;
  std::vector<nn::LayerNorm> norm1_, norm2_;
  std::vector<nn::MultiheadAttention> attn_;
  std::vector<std::shared_ptr<MoeFeedForward>> moe_;
  nn::LayerNorm final_norm_{nullptr};
};

}  // namespace

std::shared_ptr<ClassifierModel> MakeModel(const ModelOptions& o) {
  if (o.name == "mlp") return std::make_shared<Mlp>(o.linear_blocks);
  if (o.name == "cnn") return std::make_shared<Cnn>(o.linear_blocks);
  if (o.name == "resnet18") return MakeResNet(18);
  if (o.name == "resnet50") return MakeResNet(50);
  if (o.name == "moe-transformer") {
    if (o.layers < 1 || o.width < 1 || o.heads < 1 || o.width % o.heads != 0 || o.experts < 1 ||
        o.top_k < 1 || o.top_k > o.experts)
      throw Error(
          ErrorCode::kInvalidArgument,
          "moe-transformer: need layers >= 1, width divisible by heads, 1 <= top-k <= experts");
    return std::make_shared<MoeTransformer>(o);
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown model '" + o.name + "' (use " + kModelNameList + ")");
}

}  // namespace cdt::train
