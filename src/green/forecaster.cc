#include "green/forecaster.h"

#include <algorithm>
#include <cmath>

namespace cdt::green {

std::vector<double> ForecastHourly(const CarbonTrace& trace, double now, int horizon,
                                   const ForecastOptions& o) {
  // Hour of day h of the profile = mean of the same hour on the previous days.
  const int days = std::max(1, o.history_days);
  double profile[24];
  for (int h = 0; h < 24; ++h) {
    double sum = 0;
    int n = 0;
    for (int d = 1; d <= days; ++d) {
      const double t = now - 3600.0 * 24 * d + 3600.0 * h;  // hour h after `now`, d days back
      if (t >= trace.start_unix() && t + 3600 <= now) {
        sum += trace.GramsPerKw(t, t + 3600);
        ++n;
      }
    }
    profile[h] = n > 0 ? sum / n : std::nan("");
  }
  const double last =
      now - 3600 >= trace.start_unix() ? trace.GramsPerKw(now - 3600, now) : trace.IntensityAt(now);
  // The deviation now: last hour against its profile value (profile[23] is the hour before now).
  const double deviation = std::isnan(profile[23]) ? 0 : last - profile[23];
  std::vector<double> f(static_cast<size_t>(std::max(0, horizon)));
  for (int l = 0; l < horizon; ++l) {
    const double p = profile[l % 24];
    const double base = std::isnan(p) ? last : p;
    f[static_cast<size_t>(l)] =
        std::max(0.0, base + deviation * std::exp(-(l + 1) / o.persistence_hours));
  }
  return f;
}

double ForecastMape(const CarbonTrace& trace, double first, int origins, int spacing, int horizon,
                    const ForecastOptions& o) {
  double sum = 0;
  long n = 0;
  for (int i = 0; i < origins; ++i) {
    const double now = first + 3600.0 * spacing * i;
    if (now + 3600.0 * horizon > trace.end_unix()) break;
    const std::vector<double> f = ForecastHourly(trace, now, horizon, o);
    const std::vector<double> actual = trace.Hourly(now, horizon);
    for (int l = 0; l < horizon; ++l) {
      if (actual[static_cast<size_t>(l)] <= 0) continue;
      sum += std::abs(f[static_cast<size_t>(l)] - actual[static_cast<size_t>(l)]) /
             actual[static_cast<size_t>(l)];
      ++n;
    }
  }
  return n > 0 ? 100 * sum / static_cast<double>(n) : 0;
}

}  // namespace cdt::green
