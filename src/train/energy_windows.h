// Per-step energy windows for the trainer (Zeus' begin/end windows around work): one meter
// reading per step boundary (green/energy_meter.h; a /proc read, a few microseconds, with the
// model meter). Each rank meters its own process; the totals are summed over ranks at the end.
#pragma once

#include <memory>

#include "cdt/communicator.h"
#include "train/trainer.h"

namespace cdt::green {
class MeterSet;
}

namespace cdt::train {

class EnergyWindows {
 public:
  // Off (every call a no-op) when options.energy_profiles is empty.
  EnergyWindows(const TrainOptions& options, TrainResult::Energy* out, bool keep_steps);
  ~EnergyWindows();
  void StepEnded();                 // closes this step's window, opens the next
  void Finish(Communicator& comm);  // sums the ranks' joules (a collective: every rank calls it)

 private:
  std::unique_ptr<green::MeterSet> meter_;
  TrainResult::Energy* out_;
  bool keep_steps_;
  double mark_j_ = 0;
};

}  // namespace cdt::train
