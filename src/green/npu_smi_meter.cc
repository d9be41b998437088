// Ascend NPUs through `npu-smi info -t power -i ID` (Huawei's tool has no energy counter): the
// power read at each Read(), integrated by the trapezoid rule between readings.
#include <chrono>
#include <cstdio>
#include <sstream>

#include "common/unix_time.h"
#include "green/energy_meter.h"

namespace cdt::green {
namespace {

std::string RunCommand(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  return out;
}

double CardPower(int id) {
  return ParseNpuSmiPower(
      RunCommand("npu-smi info -t power -i " + std::to_string(id) + " 2>/dev/null"));
}

class NpuSmiMeter final : public EnergyMeter {
 public:
  explicit NpuSmiMeter(std::vector<int> ids) : ids_(std::move(ids)) {
    last_t_ = SteadySeconds();
    last_w_ = Power();
  }
  std::string name() const override { return "npu-smi"; }
  bool modelled() const override { return false; }
  std::string measures() const override {
    return "measured: npu-smi power of " + std::to_string(ids_.size()) +
           " Ascend NPU(s), integrated between readings";
  }
  EnergyReading Read() override {
    const double t = SteadySeconds(), w = Power();
    if (w >= 0 && last_w_ >= 0) j_ += 0.5 * (w + last_w_) * (t - last_t_);
    last_t_ = t;
    if (w >= 0) last_w_ = w;
    EnergyReading r;
    r.gpu_j = j_;
    return r;
  }

 private:
  double Power() const {
    double sum = 0;
    for (int id : ids_) {
      const double w = CardPower(id);
      if (w < 0) return -1;
      sum += w;
    }
    return sum;
  }
  std::vector<int> ids_;
  double last_t_ = 0, last_w_ = -1, j_ = 0;
};

}  // namespace

double ParseNpuSmiPower(const std::string& output) {
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const size_t p = line.find("Power");
    const size_t c = line.find(':');
    if (p == std::string::npos || c == std::string::npos || c < p) continue;
    try {
      return std::stod(line.substr(c + 1));
    } catch (const std::exception&) {
    }
  }
  return -1;
}

std::unique_ptr<EnergyMeter> OpenNpuSmiMeter(std::vector<int> ids) {
  if (RunCommand("command -v npu-smi 2>/dev/null").empty()) return nullptr;
  if (ids.empty()) ids.push_back(0);
  for (int id : ids)
    if (CardPower(id) < 0) return nullptr;
  return std::make_unique<NpuSmiMeter>(std::move(ids));
}

}  // namespace cdt::green
