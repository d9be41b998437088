#include "green/energy_meter.h"

#include <sstream>

namespace cdt::green {

MeterSet::MeterSet(const MeterSetOptions& o) {
  bool cpu = false, ram = false, accel = false;
  if (o.try_hardware) {
    if (auto rapl = OpenRaplMeter(o.powercap_root)) {
      cpu = true;
      ram = rapl->covers_ram();
      meters_.push_back(std::move(rapl));
    }
    if (auto nvml = OpenNvmlMeter()) {
      accel = true;
      meters_.push_back(std::move(nvml));
    } else if (auto npu = OpenNpuSmiMeter()) {
      accel = true;
      meters_.push_back(std::move(npu));
    }
  }
  const bool model_accel = !accel && o.accelerator_count > 0;
  if (!cpu || !ram || model_accel) {
    const std::vector<HardwareProfile> profiles = LoadHardwareProfiles(o.profiles_path);
    ModelMeterOptions m;
    m.scope = o.scope;
    m.proc_root = o.proc_root;
    m.processes_sharing = o.processes_sharing;
    m.include_ram = !ram;
    if (!cpu) {
      m.cpu = FindProfile(profiles, "cpu", CpuModelName(o.proc_root));
    } else {
      m.cpu = FindProfile(profiles, "cpu", "");  // unused: RAPL measures the CPU
      m.cpu.tdp_w = m.cpu.idle_w = 0;
    }
    if (model_accel) {
      const bool npu = o.accelerator_model.find("910") != std::string::npos ||
                       o.accelerator_model.find("Ascend") != std::string::npos;
      m.accelerator = FindProfile(profiles, npu ? "npu" : "gpu", o.accelerator_model);
      m.accelerator_count = o.accelerator_count;
    }
    meters_.push_back(OpenModelMeter(m));
  }
}

EnergyReading MeterSet::Read() {
  EnergyReading r;
  for (auto& m : meters_) {
    const EnergyReading x = m->Read();
    r.cpu_j += x.cpu_j;
    r.gpu_j += x.gpu_j;
    r.ram_j += x.ram_j;
  }
  return r;
}

std::string MeterSet::Describe() const {
  std::ostringstream s;
  for (size_t i = 0; i < meters_.size(); ++i)
    s << (i ? "; " : "") << meters_[i]->name() << ": " << meters_[i]->measures();
  return s.str();
}

bool MeterSet::any_modelled() const {
  for (const auto& m : meters_)
    if (m->modelled()) return true;
  return false;
}

}  // namespace cdt::green
