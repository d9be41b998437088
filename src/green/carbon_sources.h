// Readers of carbon-intensity data (docs/green.md has the formats):
//  - dc-rl CSV: `timestamp,WND,SUN,WAT,OIL,NG,COL,NUC,OTH,avg_CI` (EIA-930 hourly data as
//    HewlettPackard/dc-rl prepares it); also gives the carbon-free share (WND+SUN+WAT+NUC)/total.
//  - generic CSV: `timestamp,gco2_per_kwh` (more columns are ignored).
//  - Carbon Aware SDK JSON: an array of {location, time, rating, duration} (the SDK's emissions
//    data; keys in any case, duration "hh:mm:ss" or ISO 8601 "PT1H").
//  - a constant per country / region from an annual-average table
//    (knowledge_base/carbon_profiles/annual_average.json).
// Bad input — a missing column, a number that is not one, a negative intensity, a timestamp that
// does not increase — throws cdt::Error(kInvalidArgument) with the file and line. Missing values
// and missing intervals are gaps, handled by the GapPolicy and logged through `log`.
#pragma once

#include <functional>
#include <string>

#include "common/file_system.h"
#include "green/carbon_trace.h"

namespace cdt::green {

enum class GapPolicy {
  kFail,          // a gap is an error
  kInterpolate,   // linear between the neighbours (default; hold the nearest at either end)
  kHoldPrevious,  // repeat the last known value
};
GapPolicy ParseGapPolicy(const std::string& name);  // fail | interpolate | hold

struct TraceReadOptions {
  GapPolicy gaps = GapPolicy::kInterpolate;
  std::function<void(const std::string&)> log;  // one line per gap policy decision
  std::string region;                           // "" = from the file name / content
  // Generic CSV only: read this column instead of the intensity (e.g. "price_per_kwh" for an
  // hourly price series, which then reuses the same checks and gap policy).
  std::string value_column;
  const FileSystem* fs = nullptr;  // null: the process's files
};

// Picks the reader from the content: JSON for '[' or '{', dc-rl for an `avg_CI` column, else
// the generic CSV.
CarbonTrace ReadCarbonTrace(const std::string& path, const TraceReadOptions& options = {});
// The same from text in memory (`path` names it in errors).
CarbonTrace ParseCarbonTrace(const std::string& text, const std::string& path,
                             const TraceReadOptions& options = {});

// The annual average of `region` (ISO 3166-1 alpha-3 like "FRA", or "WORLD", "EU") from the table.
CarbonTrace ConstantCarbonTrace(const std::string& region, const std::string& table_path);

}  // namespace cdt::green
