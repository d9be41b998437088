// Carbon accounting: energy measured over time, integrated against a carbon trace. Power is
// taken as constant between two meter readings (what a counter-based meter knows), intensity as
// constant within each trace interval; the integral is exact for that step-by-step product.
#pragma once

#include <vector>

#include "green/carbon_trace.h"

namespace cdt::green {

// A meter reading: cumulative energy (joules, already multiplied by PUE where that applies) at a
// moment, on the trace's clock (Unix seconds of the trace time, see Timebase).
struct EnergySample {
  double unix_s = 0;
  double joules = 0;
};

struct CarbonAccount {
  double energy_kwh = 0;
  double carbon_kg = 0;
  double carbon_free_kwh = 0;     // energy times the carbon-free share of its interval
  bool carbon_free_known = true;  // false when a used interval had no share
  double seconds = 0;             // time covered
};

// Sum over consecutive samples. Samples must be in time order with non-decreasing energy.
CarbonAccount Account(const CarbonTrace& trace, const std::vector<EnergySample>& samples);

// Maps wall-clock time onto trace time: `--time-scale S` lets one trace hour last S wall seconds,
// so that trace_t = trace_start + (wall - wall_start) * 3600 / S. Energy measured in wall time is
// then scaled by the same factor (the job "would have" run 3600/S times longer at that power),
// so the accounting stays that of a real-time run.
struct Timebase {
  double wall_start = 0, trace_start = 0;
  double seconds_per_hour = 3600;  // 3600 = real time
  double Stretch() const { return 3600.0 / seconds_per_hour; }
  double ToTrace(double wall) const { return trace_start + (wall - wall_start) * Stretch(); }
  double ToWall(double trace) const { return wall_start + (trace - trace_start) / Stretch(); }
};

}  // namespace cdt::green
