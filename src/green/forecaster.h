// Carbon-intensity forecast for the next 24-72 hours from the past only: a daily profile (the
// mean of each hour of the day over the last `history_days`) plus the current deviation from it,
// decaying with the lead time (persistence): f(now + l) = p(hod(now + l)) + (x_now - p(hod(now)))
// * exp(-l / tau). Grid intensity follows the daily solar and load cycle; persistence carries
// today's weather for a few hours. Its error is measured on the real traces (bench/green_study).
#pragma once

#include <vector>

#include "green/carbon_trace.h"

namespace cdt::green {

struct ForecastOptions {
  // Chosen by the sweep in docs/benchmarks.md ("Green"): 14 days and 12 h lost least reduction
  // on the nine 2022 traces (ERCO, wind-driven, stays the hardest).
  int history_days = 14;
  double persistence_hours = 12;  // tau
};

// Hourly forecast for [now, now + horizon h) using only the trace before `now` (now must be a
// whole hour after the trace's start + 1 day, else the missing history is the persistence value).
std::vector<double> ForecastHourly(const CarbonTrace& trace, double now_unix, int horizon_hours,
                                   const ForecastOptions& options = {});

// Mean absolute percentage error of ForecastHourly over `origins` forecast origins spaced
// `spacing_hours` apart from `first_unix`, each `horizon_hours` long.
double ForecastMape(const CarbonTrace& trace, double first_unix, int origins, int spacing_hours,
                    int horizon_hours, const ForecastOptions& options = {});

}  // namespace cdt::green
