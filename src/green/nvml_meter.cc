// NVIDIA GPUs through NVML's total-energy counter (millijoules since the driver loaded, Volta and
// newer). libnvidia-ml comes with the driver, not with a package we can depend on, so it is loaded
// with dlopen and its few functions looked up by name (as CodeCarbon does through pynvml).
#include <dlfcn.h>

#include <sstream>

#include "green/energy_meter.h"

namespace cdt::green {
namespace {

using nvmlDevice_t = void*;
using InitFn = int (*)();
using CountFn = int (*)(unsigned*);
using HandleFn = int (*)(unsigned, nvmlDevice_t*);
using EnergyFn = int (*)(nvmlDevice_t, unsigned long long*);
using NameFn = int (*)(nvmlDevice_t, char*, unsigned);

class NvmlMeter final : public EnergyMeter {
 public:
  NvmlMeter(void* lib, EnergyFn energy, std::vector<nvmlDevice_t> devices, std::string names)
      : lib_(lib), energy_(energy), devices_(std::move(devices)), names_(std::move(names)) {
    start_.resize(devices_.size());
    for (size_t i = 0; i < devices_.size(); ++i) energy_(devices_[i], &start_[i]);
  }
  ~NvmlMeter() override {
    if (auto shutdown = reinterpret_cast<InitFn>(dlsym(lib_, "nvmlShutdown"))) shutdown();
    dlclose(lib_);
  }
  std::string name() const override { return "nvml"; }
  bool modelled() const override { return false; }
  std::string measures() const override {
    return "measured: NVML total energy counter of " + std::to_string(devices_.size()) +
           " GPU(s):" + names_;
  }
  EnergyReading Read() override {
    EnergyReading r;
    for (size_t i = 0; i < devices_.size(); ++i) {
      unsigned long long mj = 0;
      if (energy_(devices_[i], &mj) == 0 && mj >= start_[i])
        last_[i] = static_cast<double>(mj - start_[i]) / 1000.0;
      r.gpu_j += last_[i];
    }
    return r;
  }

 private:
  void* lib_;
  EnergyFn energy_;
  std::vector<nvmlDevice_t> devices_;
  std::vector<unsigned long long> start_;
  std::vector<double> last_ = std::vector<double>(devices_.size(), 0.0);
  std::string names_;
};

}  // namespace

std::unique_ptr<EnergyMeter> OpenNvmlMeter() {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return nullptr;
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle = reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto energy = reinterpret_cast<EnergyFn>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
  auto dev_name = reinterpret_cast<NameFn>(dlsym(lib, "nvmlDeviceGetName"));
  unsigned n = 0;
  if (!init || !count || !handle || !energy || init() != 0 || count(&n) != 0 || n == 0) {
    dlclose(lib);
    return nullptr;
  }
  std::vector<nvmlDevice_t> devices;
  std::ostringstream names;
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t d = nullptr;
    unsigned long long mj;
    if (handle(i, &d) != 0 || energy(d, &mj) != 0) continue;  // pre-Volta: no energy counter
    devices.push_back(d);
    char buf[96] = {0};
    if (dev_name && dev_name(d, buf, sizeof buf) == 0) names << " " << buf;
  }
  if (devices.empty()) {
    dlclose(lib);
    return nullptr;
  }
  return std::make_unique<NvmlMeter>(lib, energy, std::move(devices), names.str());
}

}  // namespace cdt::green
