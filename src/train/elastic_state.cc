// The trainer's side of elastic training (docs/elastic.md).
#include "train/elastic_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>

#include "cdt/error.h"
#include "common/unix_time.h"

namespace cdt::train {
namespace {

void CopyInto(torch::Tensor* dst, const torch::Tensor& src) {
  if (!src.defined()) {
    *dst = torch::Tensor();
    return;
  }
  if (!dst->defined() || dst->sizes() != src.sizes() || dst->dtype() != src.dtype())
    *dst = torch::empty_like(src, torch::MemoryFormat::Contiguous);
  dst->copy_(src);
}

// The key of `p`'s entry in an optimizer's state: libtorch 1.13 keys it by the address of the
// parameter's TensorImpl printed as a string, 2.x by the address itself.
template <typename StateMap>
typename StateMap::key_type Key(const StateMap&, const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename StateMap::key_type, std::string>) {
    std::ostringstream s;  // what 1.13's c10::guts::to_string writes
    s << p.unsafeGetTensorImpl();
    return s.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

}  // namespace

void TakeMemorySnapshot(torch::nn::Module& model, torch::optim::Optimizer& opt, const Position& at,
                        MemorySnapshot* into, const std::vector<torch::Tensor>& buffers_before) {
  torch::NoGradGuard no_grad;
  into->at = at;
  std::vector<torch::Tensor> state = model.parameters();
  for (const auto& b : buffers_before.empty() ? model.buffers() : buffers_before)
    state.push_back(b);
  into->model.resize(state.size());
  for (size_t i = 0; i < state.size(); ++i) CopyInto(&into->model[i], state[i].detach());
  const std::vector<torch::Tensor> params = model.parameters();
  auto* sgd = dynamic_cast<torch::optim::SGD*>(&opt);
  const size_t slots = sgd ? 1 : 3;
  into->optimizer.resize(slots * params.size());
  into->steps.assign(params.size(), -1);
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = opt.state().find(Key(opt.state(), params[i]));
    torch::Tensor* slot = &into->optimizer[slots * i];
    if (it == opt.state().end()) {
      for (size_t k = 0; k < slots; ++k) slot[k] = torch::Tensor();
    } else if (sgd) {
      CopyInto(slot, static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer());
    } else {
      const auto& a = static_cast<torch::optim::AdamWParamState&>(*it->second);
      CopyInto(slot, a.exp_avg());
      CopyInto(slot + 1, a.exp_avg_sq());
      CopyInto(slot + 2, a.max_exp_avg_sq());
      into->steps[i] = a.step();
    }
  }
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  into->rng = gen.get_state();
}

void ApplyMemorySnapshot(const MemorySnapshot& s, torch::nn::Module& model,
                         torch::optim::Optimizer& opt) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> state = model.parameters();
  for (const auto& b : model.buffers()) state.push_back(b);
  if (state.size() != s.model.size())
    throw Error(ErrorCode::kProtocol,
                "elastic snapshot: it holds " + std::to_string(s.model.size()) +
                    " tensors, the model has " + std::to_string(state.size()));
  for (size_t i = 0; i < state.size(); ++i) state[i].copy_(s.model[i]);
  const std::vector<torch::Tensor> params = model.parameters();
  const bool sgd = dynamic_cast<torch::optim::SGD*>(&opt) != nullptr;
  if (!sgd && !dynamic_cast<torch::optim::AdamW*>(&opt))
    throw Error(ErrorCode::kInvalidArgument,
                "elastic snapshots support the sgd and adamw optimizers");
  const size_t slots = sgd ? 1 : 3;
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor* slot = &s.optimizer[slots * i];
    const auto key = Key(opt.state(), params[i]);
    if (!slot[0].defined()) {
      opt.state().erase(key);
    } else if (sgd) {
      auto st = std::make_unique<torch::optim::SGDParamState>();
      st->momentum_buffer(slot[0].clone());
      opt.state()[key] = std::move(st);
    } else {
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->exp_avg(slot[0].clone());
      st->exp_avg_sq(slot[1].clone());
      if (slot[2].defined()) st->max_exp_avg_sq(slot[2].clone());
      st->step(s.steps[i]);
      opt.state()[key] = std::move(st);
    }
  }
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(s.rng);
}

// Steps left in an --epochs run from `at` with a global batch of `global_batch` (a changed world
// size changes it; each epoch ends with a short step, as the sampler cuts it).
int64_t StepsToFinish(int64_t n, double epochs, Position at, int64_t global_batch) {
  if (static_cast<int64_t>(at.pos) >= n) {
    ++at.epoch;
    at.pos = 0;
  }
  auto steps_for = [&](double samples) {
    return samples <= 0
               ? 0
               : static_cast<int64_t>(std::ceil(samples / static_cast<double>(global_batch)));
  };
  const double whole = std::floor(epochs), part = epochs - whole;
  const auto epoch = static_cast<double>(at.epoch), pos = static_cast<double>(at.pos);
  const auto size = static_cast<double>(n);
  if (epoch < whole)
    return steps_for(size - pos) + static_cast<int64_t>(whole - epoch - 1) * steps_for(size) +
           steps_for(part * size);
  return steps_for(part * size - pos);
}

// Elastic: the first step of a new group completed; what the recovery cost.
void RecordRecovery(ElasticSession& s, int64_t step, int world, const Log* log) {
  ElasticSession::Pending& p = s.pending;
  TrainResult::Recovery rec;
  rec.cause = p.cause;
  rec.lost = p.lost;
  rec.detected_after_s = p.detected_unix - p.failure_unix;
  rec.rto_s = UnixSeconds() - p.failure_unix;
  rec.failed_step = p.failed_step;
  rec.resumed_step = step;
  rec.lost_steps = std::max<int64_t>(0, p.failed_step - step);
  rec.world_before = p.world_before;
  rec.world_after = world;
  rec.generation = s.generation;
  s.result.recoveries.push_back(rec);
  p.active = false;
  if (log) {
    std::string lost;
    for (int w : rec.lost) lost += (lost.empty() ? "" : ", ") + std::to_string(w);
    log->Info(
        "\relastic: generation {}: world {} -> {} (lost worker(s) {}); resumed at step {} ({} "
        "step(s) done again); detected after {:.3f} s, first step done {:.3f} s after the failure",
        rec.generation, rec.world_before, rec.world_after, lost.empty() ? "none" : lost,
        rec.resumed_step, rec.lost_steps, rec.detected_after_s, rec.rto_s);
  }
}

// Elastic: the group starts from the newest step every member has committed (the minimum of
// the members' newest snapshots; the older snapshot covers a member one step behind), sent by
// rank 0 so that members without one (spares) receive it too. False when no member has one.
bool RestoreCommittedState(Communicator& comm, ElasticSession& s, torch::nn::Module& model,
                           torch::optim::Optimizer& opt, uint64_t seed, Position* at) {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  int64_t agreed = s.snapshots[0].step >= 0 ? s.snapshots[0].step : kNone;
  comm.Allreduce(&agreed, 1, DataType::kInt64, ReduceOp::kMin)->Wait();
  if (agreed == kNone) return false;
  int64_t header[2] = {0, 0};  // bytes, size of the group that wrote them
  std::string bytes;
  if (comm.rank() == 0) {
    const ElasticSession::Snapshot* found = nullptr;
    for (const auto& snapshot : s.snapshots)
      if (snapshot.step == agreed) found = &snapshot;
    if (!found)
      throw Error(ErrorCode::kProtocol,
                  "rank " + std::to_string(comm.rank()) + ": holds no committed state of step " +
                      std::to_string(agreed) + " (newest " + std::to_string(s.snapshots[0].step) +
                      ", older " + std::to_string(s.snapshots[1].step) +
                      "); the group cannot resume");
    // Into the new group's model and optimizer, then serialised for the others.
    const MemorySnapshot& mem = *found->memory;
    ApplyMemorySnapshot(mem, model, opt);
    bytes = CaptureState(model, opt, mem.at, seed);
    *at = mem.at;
    header[0] = static_cast<int64_t>(bytes.size());
    header[1] = found->world;
  }
  comm.Broadcast(header, 2, DataType::kInt64, 0)->Wait();
  bytes.resize(static_cast<size_t>(header[0]));
  comm.Broadcast(bytes.data(), bytes.size(), DataType::kInt8, 0)->Wait();
  if (comm.rank() != 0)
    *at = RestoreState(bytes, model, opt, seed,
                       "the committed state of step " + std::to_string(agreed));
  auto mem = std::make_shared<MemorySnapshot>();
  TakeMemorySnapshot(model, opt, *at, mem.get());
  s.snapshots[0] = {agreed, mem, static_cast<int>(header[1])};
  s.snapshots[1] = {};
  // What the broken group recorded past the committed step is done again.
  auto drop_from = [agreed](std::vector<std::pair<int64_t, double>>& curve) {
    curve.erase(std::remove_if(curve.begin(), curve.end(),
                               [agreed](const auto& p) { return p.first >= agreed; }),
                curve.end());
  };
  drop_from(s.result.loss_curve);
  drop_from(s.result.eval_curve);
  return true;
}

}  // namespace cdt::train
