// The carbon-aware run of `cann-dist-train green --carbon-aware` (docs/green.md): calibrate, plan,
// follow the plan with child `train` processes, account, report.
#pragma once

#include "cli/environment.h"
#include "cli/green_options.h"

namespace cdt::cli {

int RunCarbonAware(const GreenOptions& o, const Environment& env);

}  // namespace cdt::cli
