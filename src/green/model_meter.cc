// The model energy meter: no counter on this machine, so power is computed from a profile and
// measured utilisation, and says so.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "cdt/error.h"
#include "common/file_system.h"
#include "common/unix_time.h"
#include "green/energy_meter.h"

namespace cdt::green {
namespace {

// A kernel file under `root` (/proc, or a test's fake tree); "" when it cannot be read.
std::string Slurp(const std::string& path) {
  try {
    return LocalFileSystem().ReadIfExists(path, size_t{1} << 20).value_or("");
  } catch (const Error&) {
    return "";
  }
}

// (busy, total) jiffies of the whole machine from the first line of /proc/stat.
bool HostJiffies(const std::string& root, double* busy, double* total, int* cpus) {
  std::istringstream in(Slurp(root + "/stat"));
  std::string line;
  *cpus = 0;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind("cpu ", 0) == 0) {
      std::istringstream f(line.substr(4));
      double v, sum = 0, idle = 0;
      for (int i = 0; f >> v; ++i) {
        if (i < 8) sum += v;  // user nice system idle iowait irq softirq steal
        if (i == 3 || i == 4) idle += v;
      }
      *busy = sum - idle;
      *total = sum;
      found = true;
    } else if (line.rfind("cpu", 0) == 0 && line.size() > 3 &&
               std::isdigit(static_cast<unsigned char>(line[3]))) {
      ++*cpus;
    }
  }
  return found;
}

// CPU seconds of this process (utime + stime) from /proc/self/stat.
bool ProcessCpuSeconds(const std::string& root, double* seconds) {
  const std::string s = Slurp(root + "/self/stat");
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream f(s.substr(close + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; f >> field; ++i) {  // field 3 is the state
    if (i == 14) utime = std::stod(field);
    if (i == 15) {
      stime = std::stod(field);
      *seconds = (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
      return true;
    }
  }
  return false;
}

// kB value of `key` in a /proc file of "Key:   123 kB" lines; -1 if absent.
double KbField(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1));
  return -1;
}

class ModelMeter final : public EnergyMeter {
 public:
  explicit ModelMeter(const ModelMeterOptions& o) : o_(o) {
    int cpus = 0;
    double busy, total;
    if (!HostJiffies(o_.proc_root, &busy, &total, &cpus))
      throw Error(ErrorCode::kIo, "model energy meter: cannot read " + o_.proc_root + "/stat");
    if (o_.cpus_visible <= 0) o_.cpus_visible = std::max(1, cpus);
    last_t_ = o_.clock ? o_.clock() : SteadySeconds();
    Sample(&last_busy_, &last_total_);
  }

  std::string name() const override { return "model"; }
  bool modelled() const override { return true; }
  std::string measures() const override {
    std::ostringstream s;
    const double share =
        o_.cpu.threads > 0 ? static_cast<double>(o_.cpus_visible) / o_.cpu.threads : 1.0;
    s << "modelled, not measured: "
      << (o_.scope == ModelMeterOptions::Scope::kHost ? "this host's" : "this process's")
      << " CPU utilisation x profile '" << o_.cpu.name << "' (" << o_.cpu.idle_w << "-"
      << o_.cpu.tdp_w << " W per package, this machine's " << o_.cpus_visible
      << " CPU(s) = " << share << " of it)";
    if (o_.include_ram) s << " + memory in use x " << o_.ram_w_per_gib << " W/GiB";
    if (o_.accelerator_count > 0)
      s << " + " << o_.accelerator_count << " x '" << o_.accelerator.name << "' at "
        << o_.accelerator_utilisation << " utilisation";
    return s.str();
  }

  EnergyReading Read() override {
    const double t = o_.clock ? o_.clock() : SteadySeconds();
    double busy = 0, total = 0;
    Sample(&busy, &total);
    const double dt = t - last_t_;
    if (dt > 0) {
      double util;
      if (o_.scope == ModelMeterOptions::Scope::kHost)
        util = total > last_total_ ? (busy - last_busy_) / (total - last_total_) : 0;
      else
        util = (busy - last_busy_) /
               (dt * o_.cpus_visible);  // CPU seconds over the machine's capacity
      util = std::clamp(util, 0.0, 1.0);
      const double share =
          o_.cpu.threads > 0 ? static_cast<double>(o_.cpus_visible) / o_.cpu.threads : 1.0;
      const double idle = o_.scope == ModelMeterOptions::Scope::kHost
                              ? o_.cpu.idle_w
                              : o_.cpu.idle_w / std::max(1, o_.processes_sharing);
      r_.cpu_j += share * (idle + (o_.cpu.tdp_w - o_.cpu.idle_w) * util) * dt;
      if (o_.include_ram) r_.ram_j += RamGib() * o_.ram_w_per_gib * dt;
      if (o_.accelerator_count > 0)
        r_.gpu_j += o_.accelerator_count *
                    (o_.accelerator.idle_w +
                     (o_.accelerator.tdp_w - o_.accelerator.idle_w) * o_.accelerator_utilisation) *
                    dt;
    }
    last_t_ = t;
    last_busy_ = busy;
    last_total_ = total;
    return r_;
  }

 private:
  void Sample(double* busy, double* total) {
    if (o_.scope == ModelMeterOptions::Scope::kHost) {
      int cpus;
      HostJiffies(o_.proc_root, busy, total, &cpus);
    } else {
      ProcessCpuSeconds(o_.proc_root, busy);
      *total = 0;
    }
  }
  double RamGib() const {
    if (o_.scope == ModelMeterOptions::Scope::kHost) {
      const std::string m = Slurp(o_.proc_root + "/meminfo");
      const double total = KbField(m, "MemTotal"), avail = KbField(m, "MemAvailable");
      return total > 0 && avail >= 0 ? (total - avail) / (1024.0 * 1024.0) : 0;
    }
    const double rss = KbField(Slurp(o_.proc_root + "/self/status"), "VmRSS");
    return rss > 0 ? rss / (1024.0 * 1024.0) : 0;
  }

  ModelMeterOptions o_;
  EnergyReading r_;
  double last_t_ = 0, last_busy_ = 0, last_total_ = 0;
};

}  // namespace

std::unique_ptr<EnergyMeter> OpenModelMeter(const ModelMeterOptions& options) {
  return std::make_unique<ModelMeter>(options);
}

std::string CpuModelName(const std::string& proc_root) {
  std::istringstream in(Slurp(proc_root + "/cpuinfo"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) return line.substr(line.find_first_not_of(' ', c + 1));
    }
  }
  return "";
}

}  // namespace cdt::green
