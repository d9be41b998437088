// AllreduceAutotuner: checks the selector's choice by measurement where the selector is unsure.
//
// For a size class (power-of-two byte range and dtype) whose selector offers a runner-up, the
// first kAuto calls run the two candidates in alternating blocks — choice, runner-up, choice,
// runner-up, `trials` blocks each. A block's first call is untimed: it absorbs the switch (the
// previous algorithm's skew between ranks, cold caches, TCP slow start). The rest are timed, and
// a block is long enough that each candidate's timed calls move at least min_bytes in total, so
// small sizes are judged over many calls rather than over a burst a cache or a shaped link absorbs.
// (Timing single alternating calls was wrong on the emulated cluster: each call inherited the
// other algorithm's tail and a 16 KiB class picked recursive doubling, 2x slower in steady state.)
//
// Then every rank contributes its median block time per candidate to a max-allreduce (the slowest
// rank decides how long a collective takes), and all ranks keep the selector's choice unless the
// runner-up's agreed time is at least kSwitchMargin lower, for the rest of the communicator's life.
// Every rank sees the same sequence of collectives, so all ranks trial and decide at the same call;
// the decision costs that one 2-element allreduce. This is Horovod's autotuner and NCCL's tuner
// plugins in miniature: measure alternatives on the real job, then stop measuring. Every trial call
// does the job's real work.
//
// Pure bookkeeping: the communicator runs the collectives and the agreement. Thread-safe (the
// communicator thread updates it while user threads may ask Decided()).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
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
  // The runner-up replaces the selector's choice only when at least this much faster (10%).
  static constexpr double kSwitchMargin = 0.10;

  // At most this many timed calls per block. Where the bytes rule would ask for more, the size is
  // latency-bound: its calls never drain a shaped link's token bucket, and 256 calls are judged
  // well. Uncapped, a 4-byte class took 2 million calls to decide (benchmarks warm up for that
  // long, so `bench allreduce --algo auto --min-bytes 4` ran for minutes printing nothing).
  static constexpr size_t kMaxTimedCallsPerBlock = 256;

  // Calls per block for `bytes`: one untimed, then enough timed ones for min_bytes over `trials`
  // blocks (at least one, at most kMaxTimedCallsPerBlock).
  static int BlockCalls(int trials, size_t min_bytes, size_t bytes);
  // How many kAuto calls of `bytes` it takes to decide a class (2 · trials blocks). Benchmarks
  // warm up for this long.
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

  // Records a call's local time (any Step from Begin; untimed ones only advance the block). Returns
  // the local medians of block means {choice, runner-up} in seconds once the class has all its
  // blocks: the caller max-allreduces them and calls Decide().
  std::optional<std::array<double, 2>> End(const Step& step, double seconds);

  // Fixes the class's algorithm from the agreed (slowest-rank) medians; returns a one-line report.
  std::string Decide(const Step& step, const std::array<double, 2>& agreed_seconds);

  // The decided algorithm for this size class, if tuning has finished there.
  std::optional<AllreduceAlgorithm> Decided(uint64_t epoch, size_t bytes, DataType dtype) const;

  int trials() const { return trials_; }

 private:
  struct Class {
    AllreduceAlgorithm candidates[2] = {AllreduceAlgorithm::kRing, AllreduceAlgorithm::kRing};
    std::vector<double> block_means[2];
    int block_calls = 2;  // from the first call's size (the class spans a factor of two)
    int block = 0;        // blocks finished
    int call_in_block = 0;
    double block_seconds = 0;
    bool decided = false;
    AllreduceAlgorithm winner = AllreduceAlgorithm::kRing;
  };
  static int Key(size_t bytes, DataType dtype);

  const int trials_;
  const size_t min_bytes_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, int>, Class> classes_;
};

}  // namespace cdt
