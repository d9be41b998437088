// Carbon-aware batch control (the seed's rule, docs/green.md). With a carbon budget, the
// threshold intensity is what the remaining budget allows for the remaining steps at the current
// energy per sample: threshold = remaining_g / (remaining_steps * batch * kwh_per_sample). When the
// grid is dirtier than 1.3 x threshold the global batch shrinks by 0.75 (fewer samples per hour
// while it is dirty), when cleaner than 0.7 x threshold it grows by 1.25 (make hay while the sun
// shines), within [min_batch, max_batch]; the learning rate follows the batch linearly. An alert
// is raised when the projected total (spent + remaining at the current intensity) reaches 95% of
// the cap.
#pragma once

#include <cstdint>
#include <string>

namespace cdt::green {

struct BatchControlConfig {
  double carbon_cap_kg = 0;
  int min_batch = 16, max_batch = 1024;
  double high = 1.3, low = 0.7, shrink = 0.75, grow = 1.25, alert_share = 0.95;
};

struct BatchDecision {
  int batch = 0;
  double lr_scale = 1;        // new batch / old batch
  double threshold_gco2 = 0;  // gCO2/kWh the budget allows from here on
  double projected_kg = 0;    // spent + remaining steps at the current intensity
  bool alert = false;         // projected >= alert_share x cap
  std::string reason;         // "dirty grid", "clean grid", "within band", "budget spent"
};

// `remaining_samples`: samples the job still has to see; `kwh_per_sample`: measured energy per
// sample; `intensity`: the grid now.
BatchDecision DecideBatch(const BatchControlConfig& config, int batch, double spent_kg,
                          double remaining_samples, double kwh_per_sample, double intensity_gco2);

}  // namespace cdt::green
