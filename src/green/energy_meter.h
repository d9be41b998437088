// Energy meters behind one interface, each saying what it measured (docs/green.md):
//  - RaplMeter: CPU packages (and DRAM where exposed) through powercap sysfs
//    (/sys/class/powercap/intel-rapl:*), counters' wrap-around handled with max_energy_range_uj.
//  - NvmlMeter: NVIDIA GPUs' energy counters (nvmlDeviceGetTotalEnergyConsumption), libnvidia-ml
//    loaded with dlopen so that nothing links against it.
//  - NpuSmiMeter: Ascend NPUs' power from `npu-smi info -t power`, integrated between readings.
//  - ModelMeter: no counter — power from a hardware profile (TDP, idle) scaled by measured CPU
//    utilisation (/proc), plus memory at 0.375 W per GiB in use (CodeCarbon's figure), and
//    accelerators from their profile at a given utilisation. Reported as modelled, not measured.
// A MeterSet picks, per component, the first that works: CPU RAPL -> model; accelerators NVML ->
// npu-smi -> (model if the user names the devices); RAM RAPL dram -> model. Readings are
// cumulative joules of IT equipment; the facility's energy is that times the PUE.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "green/hardware_profile.h"

namespace cdt::green {

struct EnergyReading {
  double cpu_j = 0, gpu_j = 0, ram_j = 0;  // gpu_j: every accelerator (GPU or NPU)
  double total() const { return cpu_j + gpu_j + ram_j; }
};

class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;
  virtual std::string name() const = 0;  // rapl | nvml | npu-smi | model
  virtual std::string measures()
      const = 0;  // one line: what, on which devices, measured or modelled
  virtual bool modelled() const = 0;
  virtual bool covers_ram() const { return false; }  // RAPL with a dram zone
  // Cumulative energy since the meter was created. Never decreases.
  virtual EnergyReading Read() = 0;
};

// RAPL under `root` (default /sys/class/powercap; tests pass a fake tree). nullptr when there is
// no readable package counter (no powercap, or it is root-only).
std::unique_ptr<EnergyMeter> OpenRaplMeter(const std::string& root = "/sys/class/powercap");
// NVML; nullptr when libnvidia-ml.so.1 cannot be loaded or shows no device with an energy counter.
std::unique_ptr<EnergyMeter> OpenNvmlMeter();
// npu-smi; nullptr when `npu-smi` is not on PATH or reports no power. `card_ids` empty = 0.
std::unique_ptr<EnergyMeter> OpenNpuSmiMeter(std::vector<int> card_ids = {});
// The watts in `npu-smi info -t power -i N` output ("Power Dissipation(W) : 71.2"); <0 if none.
double ParseNpuSmiPower(const std::string& output);

struct ModelMeterOptions {
  enum class Scope { kHost, kProcess } scope = Scope::kHost;  // whole machine, or this process
  std::string proc_root = "/proc";                            // tests pass a fake tree
  HardwareProfile cpu;                                        // per package
  int cpus_visible = 0;                                       // 0 = from proc_root/stat
  double ram_w_per_gib = 0.375;
  bool include_ram = true;
  HardwareProfile accelerator;  // with accelerator_count > 0
  int accelerator_count = 0;
  double accelerator_utilisation = 1.0;  // no counter: the share of TDP above idle assumed in use
  int processes_sharing = 1;             // process scope: ranks on this host share the idle power
  std::function<double()> clock;         // seconds; empty = steady_clock (tests pass a fake clock)
};
std::unique_ptr<EnergyMeter> OpenModelMeter(const ModelMeterOptions& options);

// The CPU model name from proc_root/cpuinfo ("Intel(R) Xeon(R) Processor"), "" if unknown.
std::string CpuModelName(const std::string& proc_root = "/proc");

struct MeterSetOptions {
  std::string profiles_path;  // knowledge_base/hardware_profiles/devices.json
  std::string powercap_root = "/sys/class/powercap";
  std::string proc_root = "/proc";
  bool try_hardware = true;  // false: the model only (tests, reproducible reports)
  ModelMeterOptions::Scope scope = ModelMeterOptions::Scope::kHost;
  int processes_sharing = 1;
  std::string accelerator_model;  // e.g. "A100" to model accelerators NVML cannot see
  int accelerator_count = 0;
};

class MeterSet {
 public:
  explicit MeterSet(const MeterSetOptions& options);
  EnergyReading Read();
  // "cpu: rapl (measured) ...; gpu: none; ram: model (modelled) ..." — for logs and reports.
  std::string Describe() const;
  bool any_modelled() const;
  const std::vector<std::unique_ptr<EnergyMeter>>& meters() const { return meters_; }

 private:
  std::vector<std::unique_ptr<EnergyMeter>> meters_;
};

}  // namespace cdt::green
