// Carbon-intensity traces in CSV (green/carbon_sources.h): dc-rl's columns, or any CSV with a
// timestamp and a value column.
#include "cdt/error.h"
#include "fuzz_util.h"
#include "green/carbon_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(cdt::fuzz::AsText(data, size));
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) return 0;  // JSON's
  for (const char* policy : {"interpolate", "hold", "fail"}) {
    cdt::green::TraceReadOptions o;
    o.gaps = cdt::green::ParseGapPolicy(policy);
    try {
      cdt::green::ParseCarbonTrace(text, "fuzz.csv", o);
    } catch (const cdt::Error&) {
    }
  }
  return 0;
}
