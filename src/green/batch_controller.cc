#include "green/batch_controller.h"

#include <algorithm>
#include <cmath>

#include "cdt/error.h"

namespace cdt::green {

BatchDecision DecideBatch(const BatchControlConfig& c, int batch, double spent_kg,
                          double remaining_samples, double kwh_per_sample, double intensity) {
  if (!(c.carbon_cap_kg > 0) || c.min_batch < 1 || c.max_batch < c.min_batch || batch < 1)
    throw Error(ErrorCode::kInvalidArgument,
                "batch control needs a carbon cap > 0 and 1 <= min batch <= max batch");
  BatchDecision d;
  d.batch = batch;
  const double remaining_g = (c.carbon_cap_kg - spent_kg) * 1000.0;
  const double remaining_kwh = std::max(0.0, remaining_samples) * kwh_per_sample;
  d.projected_kg = spent_kg + remaining_kwh * intensity / 1000.0;
  d.alert = d.projected_kg >= c.alert_share * c.carbon_cap_kg;
  if (remaining_g <= 0) {
    d.reason = "budget spent";
    d.batch = std::max(c.min_batch, std::min(batch, c.max_batch));
    d.lr_scale = static_cast<double>(d.batch) / batch;
    return d;
  }
  d.threshold_gco2 = remaining_kwh > 0 ? remaining_g / remaining_kwh : 0;
  double next = batch;  // clamped while a double: batch x a configured factor may not fit an int
  if (remaining_kwh <= 0) {
    d.reason = "no work left";
  } else if (intensity > c.high * d.threshold_gco2) {
    next = std::floor(batch * c.shrink);
    d.reason = "dirty grid";
  } else if (intensity < c.low * d.threshold_gco2) {
    next = std::floor(batch * c.grow);
    d.reason = "clean grid";
  } else {
    d.reason = "within band";
  }
  if (std::isnan(next)) next = batch;
  d.batch = static_cast<int>(std::clamp(next, 1.0 * c.min_batch, 1.0 * c.max_batch));
  d.lr_scale = static_cast<double>(d.batch) / batch;
  return d;
}

}  // namespace cdt::green
