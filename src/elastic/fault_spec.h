// Scripted faults (`--inject`, `fault-inject`; docs/elastic.md): what to do to which worker and
// when.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cdt::elastic {

// A scripted fault (`--inject kill:RANK@STEP,hang:RANK@STEP,slow:RANK=FACTOR@STEP,
// cut:NODE@STEP+SECONDS`): RANK is the worker's rank in the first generation (its worker id); the
// fault fires at the start of STEP.
struct Fault {
  std::string kind;  // kill (SIGKILL itself) | hang (SIGSTOP itself) | slow (from STEP on) |
                     // cut (node NODE's links down for SECONDS; worker = the node)
  int worker = 0;
  int64_t step = 0;
  double factor = 1;  // slow: each step takes this many times its time before STEP; cut: seconds
};

// Throws cdt::Error(kInvalidArgument) naming the bad item.
std::vector<Fault> ParseFaults(const std::string& spec);

}  // namespace cdt::elastic
