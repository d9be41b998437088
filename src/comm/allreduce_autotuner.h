// AllreduceAutotuner: checks the selector's choice by measurement where the selector is unsure.
//
// For a size class (power-of-two byte range and dtype) whose selector offers a runner-up, the
// first 2·trials kAuto calls alternate between the choice and the runner-up and are timed. Then
// every rank contributes its median time per candidate to a max-allreduce (the slowest rank
// decides how long a collective takes), and all ranks keep the candidate with the lower agreed
// time for the rest of the communicator's life. Because every rank sees the same sequence of
// collectives, all ranks trial and decide at the same call — the decision needs no extra
// round beyond that one 2-element allreduce. This is Horovod's autotuner and NCCL's tuner plugins
// in miniature: measure a few alternatives on the real job, then stop measuring.
//
// Pure bookkeeping: the communicator runs the collectives and the agreement. Thread-safe (the
// communicator thread updates it while user threads may ask Current()).
#pragma once

#include <array>
#include <cstdint>
#include <cstddef>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cdt/types.h"

namespace cdt {

class AllreduceAutotuner {
 public:
  // trials: timed calls per candidate; 0 disables tuning (Begin always returns the choice).
  explicit AllreduceAutotuner(int trials) : trials_(trials) {}

  struct Step {
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::kRing;
    bool trial = false;  // time this call and pass the seconds to End()
    uint64_t epoch = 0;  // selector epoch and size class, for End()
    int key = -1;
  };

  // Which algorithm the next kAuto call of `bytes` runs, given the selector's choice and
  // runner-up (kAuto = none). `epoch` numbers the selector: a new selector starts afresh, and
  // calls queued before it was installed finish their tuning under the old epoch.
  Step Begin(uint64_t epoch, size_t bytes, DataType dtype, AllreduceAlgorithm choice,
             AllreduceAlgorithm runner_up);

  // Records a trial's local time. Returns the local medians {choice, runner-up} in seconds once
  // the class has all its trials: the caller max-allreduces them and calls Decide().
  std::optional<std::array<double, 2>> End(const Step& step, double seconds);

  // Fixes the class's algorithm from the agreed (slowest-rank) medians; returns a one-line report.
  std::string Decide(const Step& step, const std::array<double, 2>& agreed_seconds);

  // The decided algorithm for this size class, if tuning has finished there.
  std::optional<AllreduceAlgorithm> Decided(uint64_t epoch, size_t bytes, DataType dtype) const;

  int trials() const { return trials_; }

 private:
  struct Class {
    AllreduceAlgorithm candidates[2] = {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRing};
    std::vector<double> seconds[2];
    int calls = 0;
    bool decided = false;
    AllreduceAlgorithm winner = AllreduceAlgorithm::kRing;
  };
  static int Key(size_t bytes, DataType dtype);

  const int trials_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, int>, Class> classes_;
};

}  // namespace cdt
