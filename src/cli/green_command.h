// `cann-dist-train green` (docs/green.md):
//   green --plan-only --trace FILE --start TIME --job-hours H --deadline H [--strategy ...]
//   green --carbon-aware --trace FILE --start TIME [--deadline H] [--time-scale S] [--certify]
//         -- <train options>
// Planning alone prints and writes the plan; the carbon-aware run calibrates the job (a short
// run measuring step time and power), plans it, and follows the plan: each running stretch is a
// `train --resume --stop-after N` on the same checkpoint directory, a pause is the checkpoint on
// disk and nothing running. Energy is metered on this host while the job runs, mapped onto the
// trace's clock (--time-scale S: one trace hour lasts S wall seconds, energy scaled by 3600/S),
// and reported as emissions.csv, JSON and HTML, optionally signed.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/environment.h"
#include "cli/green_options.h"

namespace cdt::cli {

void AddGreenOptions(CLI::App* cmd, GreenOptions* o);
int RunGreen(GreenOptions o, const Environment& env);

}  // namespace cdt::cli
