// Per-step energy windows for the trainer (Zeus' begin/end windows around work): one meter
// reading per step boundary (green/energy_meter.h; a /proc read, a few microseconds, with the
// model meter). Each rank meters its own process; the totals are summed over ranks at the end.
#pragma once

#include <memory>
#include <string>

#include "cdt/communicator.h"
#include "train/train_result.h"

namespace cdt::green {
class MeterSet;
}

namespace cdt::train {

class EnergyWindows {
 public:
  // Off (every call a no-op) when `profiles` (the hardware profiles file) is empty.
  // `processes_sharing`: this host's ranks, among which the model meter splits the host's power.
  EnergyWindows(const std::string& profiles, int processes_sharing, TrainResult::Energy* out,
                bool keep_steps);
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
