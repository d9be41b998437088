// The trainer's side of elastic training (docs/elastic.md).
#include "train/elastic_state.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

#include "cdt/error.h"

namespace cdt::train {
namespace {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

// Steps left in an --epochs run from `at` with a global batch of `global_batch` (a changed world
// size changes it; each epoch ends with a short step, as the sampler cuts it).
int64_t StepsToFinish(int64_t n, double epochs, Position at, int64_t global_batch) {
  if (static_cast<int64_t>(at.pos) >= n) {
    ++at.epoch;
    at.pos = 0;
  }
  auto steps_for = [&](double samples) {
    return samples <= 0 ? 0 : static_cast<int64_t>(std::ceil(samples / static_cast<double>(global_batch)));
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
void RecordRecovery(ElasticSession& s, int64_t step, int world, bool log) {
  ElasticSession::Pending& p = s.pending;
  TrainResult::Recovery rec;
  rec.cause = p.cause;
  rec.lost = p.lost;
  rec.detected_after_s = p.detected_unix - p.failure_unix;
  rec.rto_s = UnixNow() - p.failure_unix;
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
    std::fprintf(stderr, "\relastic: generation %lld: world %d -> %d (lost worker(s) %s); resumed at step "
                         "%lld (%lld step(s) done again); detected after %.3f s, first step done %.3f s "
                         "after the failure\n",
                 static_cast<long long>(rec.generation), rec.world_before, rec.world_after,
                 lost.empty() ? "none" : lost.c_str(), static_cast<long long>(rec.resumed_step),
                 static_cast<long long>(rec.lost_steps), rec.detected_after_s, rec.rto_s);
  }
}

// Elastic: the group starts from the newest step every member has committed (the minimum of
// the members' newest snapshots; the older snapshot covers a member one step behind), sent by
// rank 0 so that members without one (spares) receive it too. False when no member has one.
bool RestoreCommittedState(Communicator& comm, ElasticSession& s, torch::nn::Module& model,
                           torch::optim::Optimizer& opt, const TrainOptions& o, Position* at) {
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
                  "rank " + std::to_string(comm.rank()) + ": holds no committed state of step " + std::to_string(agreed) +
                      " (newest " + std::to_string(s.snapshots[0].step) + ", older " +
                      std::to_string(s.snapshots[1].step) + "); the group cannot resume");
    bytes = found->bytes;
    header[0] = static_cast<int64_t>(bytes.size());
    header[1] = found->world;
  }
  comm.Broadcast(header, 2, DataType::kInt64, 0)->Wait();
  bytes.resize(static_cast<size_t>(header[0]));
  comm.Broadcast(bytes.data(), bytes.size(), DataType::kInt8, 0)->Wait();
  *at = RestoreState(bytes, model, opt, o, "the committed state of step " + std::to_string(agreed));
  s.snapshots[0] = {agreed, std::move(bytes), static_cast<int>(header[1])};
  s.snapshots[1] = {};
  // What the broken group recorded past the committed step is done again.
  auto drop_from = [agreed](std::vector<std::pair<int64_t, double>>& curve) {
    curve.erase(std::remove_if(curve.begin(), curve.end(), [agreed](const auto& p) { return p.first >= agreed; }),
                curve.end());
  };
  drop_from(s.result.loss_curve);
  drop_from(s.result.eval_curve);
  return true;
}

}  // namespace cdt::train
