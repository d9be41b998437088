#include "elastic/health_monitor.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cdt::elastic {

std::optional<HealthWarning> FailurePredictor::Fire(Armed& a, bool condition,
                                                    const HealthWarning& w) {
  if (!condition) {
    if (a.fired && ++a.quiet >= o_.baseline_samples) a = {};
    return std::nullopt;
  }
  a.quiet = 0;
  if (a.fired) return std::nullopt;
  a.fired = true;
  return w;
}

std::optional<HealthWarning> FailurePredictor::Observe(const HealthSample& s) {
  std::optional<HealthWarning> out;
  auto keep = [&out](std::optional<HealthWarning> w) {
    if (w && !out) out = w;
  };
  char detail[160];
  // Slowdown against the median of the first steps.
  if (s.step_time_s > 0) {
    if (static_cast<int>(first_steps_.size()) < o_.baseline_samples) {
      first_steps_.push_back(s.step_time_s);
      if (static_cast<int>(first_steps_.size()) == o_.baseline_samples) {
        std::vector<double> v = first_steps_;
        std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
        baseline_ = ewma_ = v[v.size() / 2];
      }
    } else {
      ewma_ = o_.ewma_alpha * s.step_time_s + (1 - o_.ewma_alpha) * ewma_;
      slow_run_ = ewma_ > o_.slow_factor * baseline_ ? slow_run_ + 1 : 0;
      std::snprintf(detail, sizeof detail,
                    "step time %.3f s (moving average) against %.3f s at the start", ewma_,
                    baseline_);
      keep(Fire(slow_, slow_run_ >= o_.slow_patience, {s.t, "slowdown", detail}));
    }
  }
  // Memory: least squares over the window, extrapolated to the limit.
  if (o_.memory_limit_bytes > 0 && s.rss_bytes > 0) {
    rss_.push_back({s.t, s.rss_bytes});
    while (static_cast<int>(rss_.size()) > o_.memory_window) rss_.pop_front();
    bool heading = false;
    double eta = -1;
    if (static_cast<int>(rss_.size()) == o_.memory_window) {
      double mt = 0, mb = 0;
      for (auto& [t, b] : rss_) mt += t, mb += b;
      mt /= rss_.size(), mb /= rss_.size();
      double num = 0, den = 0;
      for (auto& [t, b] : rss_) num += (t - mt) * (b - mb), den += (t - mt) * (t - mt);
      const double slope = den > 0 ? num / den : 0;  // bytes per second
      if (slope > 0) {
        eta = (o_.memory_limit_bytes - s.rss_bytes) / slope;
        heading = eta < o_.memory_horizon_s;
      }
    }
    std::snprintf(detail, sizeof detail,
                  "resident memory %.0f MB, at this rate at the %.0f MB limit in %.0f s",
                  s.rss_bytes / 1e6, o_.memory_limit_bytes / 1e6, eta);
    keep(Fire(memory_, heading, {s.t, "memory", detail}));
  }
  // Network: retransmissions per second between samples.
  if (last_ && s.t > last_->t) {
    const double rate = std::max(0.0, s.tcp_retrans - last_->tcp_retrans) / (s.t - last_->t);
    net_run_ = rate > o_.retrans_per_s ? net_run_ + 1 : 0;
    std::snprintf(detail, sizeof detail, "%.0f TCP retransmissions/s (threshold %.0f)", rate,
                  o_.retrans_per_s);
    keep(Fire(network_, net_run_ >= o_.retrans_patience, {s.t, "network", detail}));
  }
  if (s.temperature_c >= 0) {
    std::snprintf(detail, sizeof detail, "%.0f °C (limit %.0f °C)", s.temperature_c,
                  o_.temperature_limit_c);
    keep(Fire(heat_, s.temperature_c >= o_.temperature_limit_c, {s.t, "temperature", detail}));
  }
  last_ = s;
  return out;
}

std::optional<double> ReadTcpRetransSegs(const std::string& path) {
  // Two "Tcp:" lines: the field names, then the values.
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string line, names;
  while (std::getline(f, line)) {
    if (line.rfind("Tcp:", 0) != 0) continue;
    if (names.empty()) {
      names = line;
      continue;
    }
    std::istringstream n(names), v(line);
    std::string name, value;
    while (n >> name && v >> value)
      if (name == "RetransSegs") {
        try {
          return std::stod(value);
        } catch (...) {
          return std::nullopt;
        }
      }
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<double> ReadResidentBytes(int pid, const std::string& proc) {
  std::ifstream f(proc + "/" + std::to_string(pid) + "/statm");
  double size = 0, resident = 0;
  if (!(f >> size >> resident)) return std::nullopt;
  return resident * 4096.0;  // pages; 4 KiB on the machines we run on (sysconf would say)
}

std::optional<double> ReadMaxTemperatureC(const std::string& thermal) {
  std::error_code ec;
  std::optional<double> hottest;
  for (const auto& e : std::filesystem::directory_iterator(thermal, ec)) {
    if (e.path().filename().string().rfind("thermal_zone", 0) != 0) continue;
    std::ifstream f(e.path() / "temp");
    double milli = 0;
    if (f >> milli) hottest = std::max(hottest.value_or(-273.0), milli / 1000.0);
  }
  return hottest;
}

std::optional<double> ReadDiskBusyMs(const std::string& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  std::string line;
  double busy = 0;
  bool any = false;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string major, minor, name;
    in >> major >> minor >> name;
    // Whole disks only (sda, vda, nvme0n1), not partitions or loop devices.
    if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0) continue;
    const bool partition = (name.rfind("nvme", 0) == 0)
                               ? name.find('p', 4) != std::string::npos
                               : std::isdigit(static_cast<unsigned char>(name.back()));
    if (partition) continue;
    double field[10];
    bool ok = true;
    for (double& x : field) ok = ok && static_cast<bool>(in >> x);
    if (!ok) continue;
    busy += field[9];  // the 10th field after the name: milliseconds spent doing I/Os
    any = true;
  }
  return any ? std::optional<double>(busy) : std::nullopt;
}

void ScoreTrace(const std::vector<HealthWarning>& warnings, double failure_t, double horizon_s,
                PredictionScore* score) {
  bool predicted = false;
  for (const auto& w : warnings) {
    const bool useful = failure_t >= 0 && w.t <= failure_t && failure_t - w.t <= horizon_s;
    if (useful) {
      ++score->true_warnings;
      if (!predicted) score->lead_times_s.push_back(failure_t - w.t);
      predicted = true;
    } else {
      ++score->false_warnings;
    }
  }
  if (failure_t >= 0) {
    ++score->failures;
    score->predicted_failures += predicted ? 1 : 0;
  }
}

}  // namespace cdt::elastic
