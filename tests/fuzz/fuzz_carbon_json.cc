// Carbon-intensity traces in the Carbon Aware SDK's JSON (green/carbon_sources.h).
#include "cdt/error.h"
#include "fuzz_util.h"
#include "green/carbon_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(cdt::fuzz::AsText(data, size));
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || (text[first] != '[' && text[first] != '{')) return 0;  // CSV's
  try {
    cdt::green::ParseCarbonTrace(text, "fuzz.json");
  } catch (const cdt::Error&) {
  }
  return 0;
}
