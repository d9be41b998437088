#include "green/accounting.h"

#include "cdt/error.h"

namespace cdt::green {

CarbonAccount Account(const CarbonTrace& trace, const std::vector<EnergySample>& s) {
  CarbonAccount a;
  for (size_t i = 1; i < s.size(); ++i) {
    const double dt = s[i].unix_s - s[i - 1].unix_s, dj = s[i].joules - s[i - 1].joules;
    if (dt < 0 || dj < 0)
      throw Error(ErrorCode::kInvalidArgument,
                  "energy samples out of order at sample " + std::to_string(i));
    if (dt == 0) continue;
    const double kw = dj / dt / 1000.0;
    a.energy_kwh += dj / 3.6e6;
    a.carbon_kg += kw * trace.GramsPerKw(s[i - 1].unix_s, s[i].unix_s) / 1000.0;
    a.carbon_free_kwh +=
        kw * trace.CarbonFreeKwhPerKw(s[i - 1].unix_s, s[i].unix_s, &a.carbon_free_known);
    a.seconds += dt;
  }
  return a;
}

}  // namespace cdt::green
