#include "elastic/fault_spec.h"

#include <limits>
#include <string>

#include "cdt/error.h"
#include "common/checked_number.h"

namespace cdt::elastic {
namespace {
constexpr int64_t kMaxWorker = std::numeric_limits<int>::max();  // a worker id is an int
}  // namespace

std::vector<Fault> ParseFaults(const std::string& spec) {
  std::vector<Fault> out;
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    const std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const auto colon = item.find(':'), at = item.find('@');
    auto bad = [&](const std::string& why) {
      return Error(ErrorCode::kInvalidArgument,
                   "--inject '" + item + "': " + why +
                       " (expected kill:RANK@STEP, hang:RANK@STEP, "
                       "slow:RANK=FACTOR@STEP or cut:NODE@STEP+SECONDS)");
    };
    if (colon == std::string::npos || at == std::string::npos || at < colon) throw bad("malformed");
    Fault f;
    f.kind = item.substr(0, colon);
    if (f.kind != "kill" && f.kind != "hang" && f.kind != "slow" && f.kind != "cut")
      throw bad("unknown fault '" + f.kind + "'");
    // Every number checked in full and in range before it is stored (no stoi: " 1", "+1" and
    // "1e3" are not ranks, and 99999999999 is not refused as "not an integer").
    std::string who = item.substr(colon + 1, at - colon - 1);
    if (f.kind == "slow") {
      const auto eq = who.find('=');
      if (eq == std::string::npos) throw bad("slow needs RANK=FACTOR");
      const auto factor = ParseNumberIn(std::string_view(who).substr(eq + 1), 1, 1000);
      if (!factor) throw bad("FACTOR must be a number from 1 to 1000");
      f.factor = *factor;
      who = who.substr(0, eq);
    }
    const auto worker = ParseIntegerIn(who, 0, kMaxWorker);
    if (!worker) throw bad("RANK must be an integer " + RangeText(0, kMaxWorker));
    f.worker = static_cast<int>(*worker);
    std::string when = item.substr(at + 1);
    if (f.kind == "cut") {
      const auto plus = when.find('+');
      if (plus == std::string::npos) throw bad("cut needs NODE@STEP+SECONDS");
      const auto seconds = ParseNumberIn(std::string_view(when).substr(plus + 1), 0, 3600);
      if (!seconds || *seconds <= 0) throw bad("SECONDS must be a number above 0, at most 3600");
      f.factor = *seconds;
      when = when.substr(0, plus);
    }
    const auto step = ParseIntegerIn(when, 0, std::numeric_limits<int64_t>::max());
    if (!step)
      throw bad("STEP must be an integer " + RangeText(0, std::numeric_limits<int64_t>::max()));
    f.step = *step;
    out.push_back(f);
  }
  return out;
}

}  // namespace cdt::elastic
