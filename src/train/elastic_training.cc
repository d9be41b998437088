#include "train/elastic_training.h"

#include <algorithm>
#include <utility>

#include "train/trainer.h"

namespace cdt::train {

ElasticTraining::ElasticTraining(TrainOptions options, int worker_id, Report report,
                                 ModelFactory make_model)
    : options_(std::move(options)), report_(std::move(report)), make_model_(std::move(make_model)) {
  session_.worker_id = worker_id;
}

void ElasticTraining::Prepare() { LoadSessionData(options_, &session_); }

int ElasticTraining::Train(const elastic::Generation& g) {
  session_.generation = g.membership.generation;
  session_.regroup_requested = false;
  session_.before_step = g.before_step;
  TrainResult r = RunTraining(*g.comm, options_, g.priority, &session_, make_model_);
  r.generation = session_.generation;
  return report_(r, g.membership.rank);
}

void ElasticTraining::Restore(const elastic::Failure& f) {
  ElasticSession::Pending& p = session_.pending;
  if (p.active) {
    // A failure before the last one's recovery completed: the record stays the first one's,
    // with the workers lost if it had none yet.
    if (p.lost.empty() && !f.lost.empty()) {
      p.lost = f.lost;
      p.failure_unix = std::min(p.failure_unix, f.failure_unix);
    }
    return;
  }
  p.active = true;
  p.cause = f.cause;
  p.lost = f.lost;
  p.failure_unix = f.failure_unix;
  p.detected_unix = f.detected_unix;
  p.failed_step = f.failed_step;
  p.world_before = f.world_before;
}

void ElasticTraining::Forget() {
  session_.snapshots[0] = {};
  session_.snapshots[1] = {};
  session_.pending = {};
}

std::string ElasticTraining::Checkpoint() {
  return CheckpointSession(options_, &session_, make_model_);
}

double ElasticTraining::mean_step_s() const {
  const TrainResult& so_far = session_.result;
  return so_far.steps > 0 ? so_far.wall_s / static_cast<double>(so_far.steps) : 0;
}

}  // namespace cdt::train
