// CarbonTracker: energy and carbon of whatever runs while it is started (CodeCarbon's
// EmissionsTracker, for the Python front end and library users). A thread reads the meters
// (green/energy_meter.h: RAPL, NVML, npu-smi, else the TDP model) every `interval`; Stop() returns
// the run as a GreenReport — energy by component, carbon against the trace (green/accounting.h),
// duration — that AppendEmissionsCsv writes as CodeCarbon's emissions.csv row.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "green/accounting.h"
#include "green/carbon_trace.h"
#include "green/energy_meter.h"
#include "green/report.h"

namespace cdt::green {

struct CarbonTrackerOptions {
  MeterSetOptions meters;
  // Wall time onto the trace's clock: timebase.trace_start is the trace moment the start maps to
  // (wall_start is set by Start()); seconds_per_hour < 3600 replays the trace faster. A negative
  // trace_start: the same moment of the year (UTC) in the trace's first year — today's hour of a
  // 2022 trace.
  Timebase timebase;
  double pue = 1.0;
  std::chrono::milliseconds interval{1000};
  std::string project_name = "cann-dist-train", run_id, country_iso_code;
  std::function<double()> clock;  // Unix seconds; empty = the system clock (tests pass a fake)
};

class CarbonTracker {
 public:
  CarbonTracker(CarbonTrace trace, CarbonTrackerOptions options);
  ~CarbonTracker();  // stops the thread
  CarbonTracker(const CarbonTracker&) = delete;
  CarbonTracker& operator=(const CarbonTracker&) = delete;

  void Start();
  // A reading now, then the run so far (callable while running, and after Stop: the same).
  GreenReport Report();
  // Stops the thread after a last reading; the run as Report() gives it.
  GreenReport Stop();
  const std::string& meter_description() const { return description_; }

 private:
  void Sample();  // under mu_
  void Loop();

  CarbonTrace trace_;
  CarbonTrackerOptions o_;
  MeterSet meters_;
  std::string description_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false, stop_ = false;
  double wall_start_ = 0, wall_end_ = 0;
  EnergyReading first_, last_;
  std::vector<EnergySample> samples_;  // on the trace's clock, joules after PUE
  std::thread thread_;
};

}  // namespace cdt::green
