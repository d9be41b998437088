// AllreduceAutotuner: checks the selector's choice by measurement where the selector is unsure.
//
// For a size class (power-of-two byte range and dtype) whose selector offers a runner-up, the
// first kAuto calls alternate between the choice and the runner-up; all but the first pair are
// timed, `trials` per candidate and at least min_bytes moved per candidate. Then
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
  // min_bytes: each candidate's timed calls must also move at least this much in total, so that
  // small size classes are judged over many calls, not over a burst a shaped link or a cache
  // absorbs (an idle tc-tbf link passes ~1.25 MB at full speed; see tools/emulate-cluster).
  explicit AllreduceAutotuner(int trials, size_t min_bytes = kDefaultMinBytes)
      : trials_(trials), min_bytes_(min_bytes) {}

  static constexpr size_t kDefaultMinBytes = 4 << 20;

  // How many kAuto calls of `bytes` it takes to decide a class: the untimed pair, then both
  // candidates' timed calls. Benchmarks warm up for this long.
  static int CallsToDecide(int trials, size_t min_bytes, size_t bytes);

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
    size_t bytes = 0;  // one call's size (the first seen; the class spans a factor of two)
    int calls = 0;
    bool decided = false;
    AllreduceAlgorithm winner = AllreduceAlgorithm::kRing;
  };
  static int Key(size_t bytes, DataType dtype);

  int TimedCallsPerCandidate(size_t bytes) const;

  const int trials_;
  const size_t min_bytes_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, int>, Class> classes_;
};

}  // namespace cdt
