#include "train/replica.h"

#include <algorithm>
#include <string>
#include <vector>

#include "cdt/error.h"
#include "train/training_data.h"

namespace cdt::train {

namespace {

std::vector<torch::Tensor> StateTensors(torch::nn::Module& m) {
  std::vector<torch::Tensor> all = m.parameters();
  for (auto& b : m.buffers()) all.push_back(b);
  return all;
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> MakeOptimizer(const OptimizerOptions& o,
                                                       torch::nn::Module& m,
                                                       bool momentum_in_compressor) {
  if (o.name == "sgd")
    return std::make_unique<torch::optim::SGD>(
        m.parameters(), torch::optim::SGDOptions(o.lr)
                            .momentum(momentum_in_compressor ? 0.0 : o.momentum)
                            .weight_decay(o.weight_decay));
  if (o.name == "adamw")
    return std::make_unique<torch::optim::AdamW>(
        m.parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay));
  throw Error(ErrorCode::kInvalidArgument, "unknown optimizer '" + o.name + "' (use sgd or adamw)");
}

// Rank 0's values of `all` to every rank, in one float32 broadcast (integer buffers such as batch
// norm's step counter fit a float's 24 bits of integer for 16 million steps).
void BroadcastTensors(Communicator& comm, std::vector<torch::Tensor> all) {
  torch::NoGradGuard no_grad;
  int64_t n = 0;
  for (auto& t : all) n += t.numel();
  auto flat = torch::empty({n}, torch::kFloat32);
  int64_t at = 0;
  for (auto& t : all) {
    flat.narrow(0, at, t.numel()).copy_(t.reshape({-1}).to(torch::kFloat32));
    at += t.numel();
  }
  comm.Broadcast(flat.data_ptr<float>(), static_cast<size_t>(n), DataType::kFloat32, 0)->Wait();
  at = 0;
  for (auto& t : all) {
    t.copy_(flat.narrow(0, at, t.numel()).view_as(t));
    at += t.numel();
  }
}

void BroadcastState(Communicator& comm, torch::nn::Module& m) {
  BroadcastTensors(comm, StateTensors(m));
}

void BroadcastBuffers(Communicator& comm, torch::nn::Module& m) {
  if (!m.buffers().empty()) BroadcastTensors(comm, m.buffers());
}

bool ParamsConsistent(Communicator& comm, torch::nn::Module& m) {
  uint64_t h = 1469598103934665603ull;
  for (auto& t : StateTensors(m)) {
    auto c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ull;
  }
  std::vector<int64_t> all(static_cast<size_t>(comm.size()));
  int64_t mine = static_cast<int64_t>(h);
  comm.Allgatherv(&mine, all.data(), std::vector<size_t>(all.size(), 1), DataType::kInt64)->Wait();
  for (int64_t x : all)
    if (x != all[0]) return false;
  return true;
}

double Evaluate(Communicator& comm, ClassifierModel& model, const ImageDataset& test) {
  torch::NoGradGuard no_grad;
  const EvalModeScope scoring(model);  // batch norm on its running statistics, left as they are
  double counts[2] = {0, 0};           // correct, seen
  std::vector<int64_t> idx;
  for (int64_t i = comm.rank(); i < test.count; i += comm.size()) idx.push_back(i);
  for (size_t first = 0; first < idx.size(); first += 1000) {
    std::vector<int64_t> part(idx.begin() + static_cast<long>(first),
                              idx.begin() + static_cast<long>(std::min(idx.size(), first + 1000)));
    auto logits = model.Forward(Images(test, part)).first;
    counts[0] += logits.argmax(1).eq(Labels(test, part)).sum().item<double>();
    counts[1] += static_cast<double>(part.size());
  }
  comm.Allreduce(counts, 2, DataType::kFloat64, ReduceOp::kSum)->Wait();
  return counts[1] > 0 ? counts[0] / counts[1] : 0;
}

}  // namespace cdt::train
