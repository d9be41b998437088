// The trainer as the elastic driver's state (elastic/driver.h): Train runs RunTraining in the
// generation's group from the newest state every member committed (its sync), committing after
// every step in memory; Restore records the failure it recovers from; Checkpoint writes the last
// commit to disk. Free of libtorch.
#pragma once

#include <functional>
#include <string>

#include "elastic/driver.h"
#include "train/elastic_session.h"
#include "train/train_options.h"
#include "train/train_result.h"
#include "train/trainer.h"

namespace cdt::train {

class ElasticTraining : public elastic::ElasticState {
 public:
  // `report(result, rank)`: what to do with a finished run (the CLI prints it on rank 0 and
  // writes the JSON); its return value is the exit code Train returns.
  using Report = std::function<int(const TrainResult& result, int rank)>;
  // `make_model`: a library user's model (trainer.h); null = the built-in one options name.
  ElasticTraining(TrainOptions options, int worker_id, Report report,
                  ModelFactory make_model = nullptr);

  void Prepare() override;
  int Train(const elastic::Generation& g) override;
  void Restore(const elastic::Failure& f) override;
  void Forget() override;
  std::string Checkpoint() override;
  int64_t current_step() const override { return session_.current_step; }
  double mean_step_s() const override;

  const ElasticSession& session() const { return session_; }

 private:
  TrainOptions options_;
  Report report_;
  ModelFactory make_model_;
  ElasticSession session_;
};

}  // namespace cdt::train
