// RAPL through powercap sysfs: intel-rapl:N is package N, intel-rapl:N:M a sub-zone of it
// (core, uncore, dram). Packages go to cpu, "dram" sub-zones to ram. energy_uj wraps at
// max_energy_range_uj; reading often enough (a wrap takes minutes even at full power) and adding
// the range back on a decrease keeps the sum right.
#include <dirent.h>

#include <fstream>
#include <sstream>

#include "green/energy_meter.h"

namespace cdt::green {
namespace {

bool ReadNumber(const std::string& path, double* v) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *v);
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

struct Zone {
  std::string path, name;
  bool dram = false;
  double max_uj = 0, last_uj = 0, total_j = 0;
};

class RaplMeter final : public EnergyMeter {
 public:
  explicit RaplMeter(std::vector<Zone> zones) : zones_(std::move(zones)) {}
  std::string name() const override { return "rapl"; }
  bool modelled() const override { return false; }
  bool covers_ram() const override {
    for (const Zone& z : zones_)
      if (z.dram) return true;
    return false;
  }
  std::string measures() const override {
    std::ostringstream s;
    s << "measured: RAPL energy counters";
    for (const Zone& z : zones_) s << " " << z.name;
    return s.str();
  }
  EnergyReading Read() override {
    EnergyReading r;
    for (Zone& z : zones_) {
      double uj;
      if (ReadNumber(z.path + "/energy_uj", &uj)) {
        double d = uj - z.last_uj;
        if (d < 0) d += z.max_uj;  // the counter wrapped
        z.total_j += d / 1e6;
        z.last_uj = uj;
      }
      (z.dram ? r.ram_j : r.cpu_j) += z.total_j;
    }
    return r;
  }

 private:
  std::vector<Zone> zones_;
};

}  // namespace

std::unique_ptr<EnergyMeter> OpenRaplMeter(const std::string& root) {
  DIR* dir = opendir(root.c_str());
  if (!dir) return nullptr;
  std::vector<Zone> zones;
  while (dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    if (n.rfind("intel-rapl:", 0) != 0) continue;
    Zone z;
    z.path = root + "/" + n;
    z.name = ReadLine(z.path + "/name");
    const bool sub = n.find(':', 11) != std::string::npos;
    z.dram = z.name == "dram";
    if (sub && !z.dram) continue;  // core/uncore are inside the package figure
    if (!ReadNumber(z.path + "/energy_uj", &z.last_uj) ||
        !ReadNumber(z.path + "/max_energy_range_uj", &z.max_uj))
      continue;  // unreadable (root-only since CVE-2020-8694) or not a zone
    if (z.name.empty()) z.name = n;
    zones.push_back(z);
  }
  closedir(dir);
  bool package = false;
  for (const Zone& z : zones) package |= !z.dram;
  if (!package) return nullptr;
  return std::make_unique<RaplMeter>(std::move(zones));
}

}  // namespace cdt::green
