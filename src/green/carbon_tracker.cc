#include "green/carbon_tracker.h"

#include <algorithm>
#include <utility>

#include "cdt/error.h"
#include "common/unix_time.h"

namespace cdt::green {

CarbonTracker::CarbonTracker(CarbonTrace trace, CarbonTrackerOptions options)
    : trace_(std::move(trace)), o_(std::move(options)), meters_(o_.meters) {
  if (!o_.clock) o_.clock = [] { return UnixSeconds(); };
  if (!(o_.pue >= 1.0))
    throw Error(ErrorCode::kInvalidArgument, "CarbonTracker: pue must be at least 1");
  if (o_.interval.count() <= 0)
    throw Error(ErrorCode::kInvalidArgument, "CarbonTracker: the interval must be positive");
  description_ = meters_.Describe();
}

CarbonTracker::~CarbonTracker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CarbonTracker::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_ || thread_.joinable())
    throw Error(ErrorCode::kInvalidArgument, "CarbonTracker: already started (one run per tracker)");
  wall_start_ = o_.clock();
  o_.timebase.wall_start = wall_start_;
  if (o_.timebase.trace_start < 0) {
    o_.timebase.trace_start = trace_.SameMomentOfYear(wall_start_);
  }
  const double t = o_.timebase.ToTrace(wall_start_);
  if (t < trace_.start_unix() || t >= trace_.end_unix())
    throw Error(ErrorCode::kInvalidArgument,
                "CarbonTracker: the run starts at trace time " + std::to_string(t) +
                    ", outside the trace " + trace_.source() + " (" +
                    std::to_string(trace_.start_unix()) + " to " +
                    std::to_string(trace_.end_unix()) + "); choose the trace start");
  first_ = last_ = meters_.Read();
  samples_ = {{t, 0}};
  running_ = true;
  thread_ = std::thread([this] { Loop(); });
}

void CarbonTracker::Sample() {
  const double wall = o_.clock();
  last_ = meters_.Read();
  // Energy measured in wall time, stretched like the clock (Timebase), times PUE.
  const double joules = (last_.total() - first_.total()) * o_.pue * o_.timebase.Stretch();
  const double t = std::min(o_.timebase.ToTrace(wall), trace_.end_unix());
  if (t > samples_.back().unix_s) samples_.push_back({t, std::max(joules, samples_.back().joules)});
  wall_end_ = wall;
}

void CarbonTracker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, o_.interval, [&] { return stop_; });
    if (running_) Sample();
  }
}

GreenReport CarbonTracker::Report() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_ && samples_.empty())
    throw Error(ErrorCode::kInvalidArgument, "CarbonTracker: not started");
  if (running_) Sample();
  const CarbonAccount a = Account(trace_, samples_);
  GreenReport r;
  r.project_name = o_.project_name;
  r.run_id = o_.run_id;
  r.region = trace_.region();
  r.country_iso_code = o_.country_iso_code;
  r.trace_source = trace_.source();
  r.trace_start_unix = o_.timebase.trace_start;
  r.timestamp_unix = wall_start_;  // CodeCarbon's: when the run was measured
  r.time_scale_s_per_hour = o_.timebase.seconds_per_hour;
  r.wall_s = wall_end_ - wall_start_;
  r.duration_s = a.seconds;
  r.pue = o_.pue;
  const double stretch = o_.timebase.Stretch();
  r.cpu_kwh = (last_.cpu_j - first_.cpu_j) * stretch / 3.6e6;
  r.gpu_kwh = (last_.gpu_j - first_.gpu_j) * stretch / 3.6e6;
  r.ram_kwh = (last_.ram_j - first_.ram_j) * stretch / 3.6e6;
  r.energy_kwh = a.energy_kwh;
  r.carbon_kg = a.carbon_kg;
  r.baseline_carbon_kg = a.carbon_kg;  // nothing was moved: the run is its own baseline
  if (a.carbon_free_known && a.energy_kwh > 0)
    r.carbon_free_energy_ratio = a.carbon_free_kwh / a.energy_kwh;
  r.meter = description_;
  r.modelled = meters_.any_modelled();
  r.actual.push_back({samples_.front().unix_s, samples_.back().unix_s, 1, a.energy_kwh,
                      a.carbon_kg});
  return r;
}

GreenReport CarbonTracker::Stop() {
  GreenReport r = Report();
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_ = false;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  return r;
}

}  // namespace cdt::green
