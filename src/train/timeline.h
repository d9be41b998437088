// Timeline: what each rank's training thread and communication channels did when, written as a
// Chrome trace (`train --timeline FILE`; open it in https://ui.perfetto.dev or chrome://tracing),
// as Horovod's timeline and PyTorch's profiler traces are. Format and lanes: docs/training.md,
// "Timeline".
//
// One process per rank (pid = rank), three lanes (tid): the training thread (steps, forward,
// backward, waits for buckets, optimizer updates), the bulk channel and the priority channel
// (each bucket's collective, from the moment the channel's thread took it up to its end).
// Times are microseconds since the rank's Start(), which the trainer calls right after a barrier,
// so the ranks line up to within the barrier's skew (one network round trip), on one host or
// many.
//
// Not thread-safe: everything is recorded from the training thread (a collective's interval is
// read from its Work when the training thread collects it). Free of libtorch.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cdt/communicator.h"

namespace cdt::train {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  enum Lane : int { kTraining = 0, kBulk = 1, kPriority = 2 };

  // `steps`: how many steps to record from the first (0 = none: every call is a no-op).
  explicit Timeline(int64_t steps = 0) : steps_(steps) {}

  // Starts the clock and the recording, at step `first_step`.
  void Start(int64_t first_step);
  // Whether `step` is among the recorded ones; spans are kept only while the current step is.
  bool Recording() const { return recording_; }
  void SetStep(int64_t step) {
    recording_ = steps_ > 0 && step >= first_ && step < first_ + steps_;
  }

  // A span [start, end] on a lane, with numbers to show beside it (Chrome's "args").
  using Args = std::vector<std::pair<std::string, double>>;
  void Span(Lane lane, const std::string& name, Clock::time_point start, Clock::time_point end,
            Args args = {});

  size_t size() const { return events_.size(); }
  // This rank's events as a JSON array of Chrome trace events, process and lane names first.
  std::string Events(int rank) const;

 private:
  struct Event {
    Lane lane;
    std::string name;
    Args args;
    int64_t start_us, dur_us;
  };
  int64_t steps_;
  int64_t first_ = 0;
  bool recording_ = false;
  Clock::time_point t0_{};
  std::vector<Event> events_;
};

// Collective: gathers every rank's events on rank 0, which writes the Chrome trace to `path`
// ({"traceEvents": [...], "displayTimeUnit": "ms"}) atomically. Throws cdt::Error (kIo) on rank 0
// when the file cannot be written.
void WriteTimeline(Communicator& comm, const Timeline& timeline, const std::string& path);

}  // namespace cdt::train
