// A carbon-intensity time series: consecutive intervals of constant intensity (gCO2/kWh), as grid
// operators publish them (hourly EIA-930 data, 5-minute WattTime data), optionally with the share
// of the generation that was carbon-free. Readers for the file formats are in carbon_sources.h.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace cdt::green {

struct CarbonInterval {
  double start_unix = 0;
  double end_unix = 0;
  double gco2_per_kwh = 0;
  double carbon_free_share = -1;  // 0..1; -1 = the source does not say
};

class CarbonTrace {
 public:
  CarbonTrace() = default;
  // `intervals` must be sorted, non-overlapping and contiguous (readers check and say where).
  CarbonTrace(std::string source, std::string region, std::vector<CarbonInterval> intervals);
  // One intensity for all time (an annual average), carbon-free share unknown.
  static CarbonTrace Constant(std::string source, std::string region, double gco2_per_kwh);

  const std::string& source() const { return source_; }  // file (or table) it came from
  const std::string& region() const { return region_; }
  bool constant() const { return constant_; }
  double start_unix() const;
  // The moment of the trace's first year as far from Jan 1, 00:00 UTC as `unix_s` is from its
  // year's (today's hour in a 2022 trace), moved a year back while past the trace's end.
  double SameMomentOfYear(double unix_s) const;
  double end_unix() const;
  const std::vector<CarbonInterval>& intervals() const { return intervals_; }

  // Intensity at `t`. Throws cdt::Error(kInvalidArgument) naming the source and its range when
  // `t` is outside it.
  double IntensityAt(double unix_s) const;
  double CarbonFreeShareAt(double unix_s) const;  // -1 = unknown
  // Hourly means over [start, start + hours h): what planners and forecasters work on.
  std::vector<double> Hourly(double start_unix, int hours) const;

  // Integrals of a constant power over [t0, t1) against the step function: grams of CO2 for one
  // kW (multiply by the power), and kWh of carbon-free energy for one kW (intervals without a
  // share count as 0 and set *share_known to false).
  double GramsPerKw(double t0, double t1) const;
  double CarbonFreeKwhPerKw(double t0, double t1, bool* share_known) const;

  // What the reader did about gaps (one line each), for the log and the report.
  std::vector<std::string> notes;

 private:
  size_t Find(double unix_s) const;  // index of the interval holding t; throws outside

  std::string source_, region_;
  std::vector<CarbonInterval> intervals_;
  bool constant_ = false;
};

}  // namespace cdt::green
