#include "elastic/fault_spec.h"

#include <string>

#include "cdt/error.h"

namespace cdt::elastic {

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
    try {
      size_t used = 0;
      std::string who = item.substr(colon + 1, at - colon - 1);
      if (f.kind == "slow") {
        const auto eq = who.find('=');
        if (eq == std::string::npos) throw bad("slow needs RANK=FACTOR");
        f.factor = std::stod(who.substr(eq + 1), &used);
        if (used != who.size() - eq - 1 || !(f.factor >= 1 && f.factor <= 1000))
          throw bad("FACTOR must be a number from 1 to 1000");
        who = who.substr(0, eq);
      }
      f.worker = std::stoi(who, &used);
      if (used != who.size()) throw bad("RANK is not an integer");
      std::string when = item.substr(at + 1);
      if (f.kind == "cut") {
        const auto plus = when.find('+');
        if (plus == std::string::npos) throw bad("cut needs NODE@STEP+SECONDS");
        f.factor = std::stod(when.substr(plus + 1), &used);
        if (used != when.size() - plus - 1 || !(f.factor > 0 && f.factor <= 3600))
          throw bad("SECONDS must be a number from 0 to 3600");
        when = when.substr(0, plus);
      }
      f.step = std::stoll(when, &used);
      if (used != when.size()) throw bad("STEP is not an integer");
    } catch (const Error&) {
      throw;
    } catch (...) {
      throw bad("RANK and STEP must be integers");
    }
    if (f.worker < 0 || f.step < 0) throw bad("RANK and STEP must not be negative");
    out.push_back(f);
  }
  return out;
}

}  // namespace cdt::elastic
