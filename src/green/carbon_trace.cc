#include "green/carbon_trace.h"

#include <time.h>

#include <algorithm>
#include <cmath>

#include "cdt/error.h"
#include "green/iso_time.h"

namespace cdt::green {

CarbonTrace::CarbonTrace(std::string source, std::string region,
                         std::vector<CarbonInterval> intervals)
    : source_(std::move(source)), region_(std::move(region)), intervals_(std::move(intervals)) {
  if (intervals_.empty())
    throw Error(ErrorCode::kInvalidArgument, source_ + ": the carbon trace has no intervals");
  for (size_t i = 0; i < intervals_.size(); ++i) {
    const CarbonInterval& c = intervals_[i];
    if (!(c.end_unix > c.start_unix) || (i > 0 && c.start_unix != intervals_[i - 1].end_unix))
      throw Error(ErrorCode::kInvalidArgument,
                  source_ + ": carbon trace interval " + std::to_string(i) + " at " +
                      FormatIsoTime(c.start_unix) + " does not follow the previous one");
  }
}

CarbonTrace CarbonTrace::Constant(std::string source, std::string region, double gco2_per_kwh) {
  CarbonTrace t;
  t.source_ = std::move(source);
  t.region_ = std::move(region);
  t.constant_ = true;
  t.intervals_.push_back({-std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::infinity(), gco2_per_kwh, -1});
  return t;
}

double CarbonTrace::start_unix() const {
  return intervals_.empty() ? 0 : intervals_.front().start_unix;
}
double CarbonTrace::end_unix() const { return intervals_.empty() ? 0 : intervals_.back().end_unix; }

size_t CarbonTrace::Find(double t) const {
  if (intervals_.empty() || t < start_unix() || t >= end_unix())
    throw Error(ErrorCode::kInvalidArgument,
                source_ + " covers " + FormatIsoTime(start_unix()) + " .. " +
                    FormatIsoTime(end_unix()) + "; " + FormatIsoTime(t) +
                    " is outside it (pick a --start inside, or a longer trace)");
  auto it = std::upper_bound(intervals_.begin(), intervals_.end(), t,
                             [](double v, const CarbonInterval& c) { return v < c.start_unix; });
  return static_cast<size_t>(it - intervals_.begin()) - 1;
}

double CarbonTrace::IntensityAt(double t) const { return intervals_[Find(t)].gco2_per_kwh; }
double CarbonTrace::CarbonFreeShareAt(double t) const {
  return intervals_[Find(t)].carbon_free_share;
}

double CarbonTrace::GramsPerKw(double t0, double t1) const {
  if (t1 <= t0) return 0;
  Find(t0);
  if (t1 > end_unix()) Find(t1);  // throws with the range
  double grams = 0;
  for (size_t i = Find(t0); i < intervals_.size() && intervals_[i].start_unix < t1; ++i) {
    const double a = std::max(t0, intervals_[i].start_unix),
                 b = std::min(t1, intervals_[i].end_unix);
    if (b > a) grams += intervals_[i].gco2_per_kwh * (b - a) / 3600.0;
  }
  return grams;
}

double CarbonTrace::CarbonFreeKwhPerKw(double t0, double t1, bool* share_known) const {
  if (t1 <= t0) return 0;
  double kwh = 0;
  for (size_t i = Find(t0); i < intervals_.size() && intervals_[i].start_unix < t1; ++i) {
    const double a = std::max(t0, intervals_[i].start_unix),
                 b = std::min(t1, intervals_[i].end_unix);
    if (b <= a) continue;
    if (intervals_[i].carbon_free_share < 0) {
      if (share_known) *share_known = false;
      continue;
    }
    kwh += intervals_[i].carbon_free_share * (b - a) / 3600.0;
  }
  return kwh;
}

std::vector<double> CarbonTrace::Hourly(double start, int hours) const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(std::max(0, hours)));
  for (int h = 0; h < hours; ++h)
    out.push_back(GramsPerKw(start + 3600.0 * h, start + 3600.0 * (h + 1)));
  return out;
}

namespace {

// Jan 1, 00:00 UTC of the year holding `unix_s`.
double StartOfYear(double unix_s) {
  const time_t t = static_cast<time_t>(unix_s);
  struct tm tm {};
  gmtime_r(&t, &tm);
  tm.tm_mon = 0;
  tm.tm_mday = 1;
  tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
  return static_cast<double>(timegm(&tm));
}

}  // namespace

double CarbonTrace::SameMomentOfYear(double unix_s) const {
  double t = StartOfYear(start_unix()) + (unix_s - StartOfYear(unix_s));
  while (t >= end_unix()) t -= 365 * 86400.0;
  return t;
}

}  // namespace cdt::green
