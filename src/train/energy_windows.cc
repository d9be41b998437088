#include "train/energy_windows.h"

#include <algorithm>

#include "green/energy_meter.h"

namespace cdt::train {

EnergyWindows::EnergyWindows(const std::string& profiles, int processes_sharing,
                             TrainResult::Energy* out, bool keep_steps)
    : out_(out), keep_steps_(keep_steps) {
  if (profiles.empty()) return;
  green::MeterSetOptions mo;
  mo.profiles_path = profiles;
  mo.scope = green::ModelMeterOptions::Scope::kProcess;
  mo.processes_sharing = std::max(1, processes_sharing);
  meter_ = std::make_unique<green::MeterSet>(mo);
  out_->meter = meter_->Describe();
  out_->modelled = meter_->any_modelled();
  mark_j_ = meter_->Read().total();
}

EnergyWindows::~EnergyWindows() = default;

void EnergyWindows::StepEnded() {
  if (!meter_) return;
  const double now = meter_->Read().total();
  if (keep_steps_) out_->step_j.push_back(now - mark_j_);
  out_->joules += now - mark_j_;
  mark_j_ = now;
}

void EnergyWindows::Finish(Communicator& comm) {
  if (!meter_) return;
  double j = out_->joules;
  comm.Allreduce(&j, 1, DataType::kFloat64, ReduceOp::kSum)->Wait();
  out_->joules = j;
}

}  // namespace cdt::train
