// Live carbon providers' forecast bodies (green/carbon_provider.h): the first byte picks the
// provider (Electricity Maps, WattTime, the Carbon Aware SDK), the rest is the HTTP body.
#include "cdt/error.h"
#include "fuzz_util.h"
#include "green/carbon_provider.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto kind = static_cast<cdt::green::CarbonProviderKind>(data[0] % 3);
  const std::string body(cdt::fuzz::AsText(data + 1, size - 1));
  double generated = 0;
  try {
    const cdt::green::CarbonTrace t =
        cdt::green::ParseProviderForecast(kind, body, "fuzz", &generated);
    if (!t.intervals().empty()) t.Hourly(t.start_unix(), 3);
  } catch (const cdt::Error&) {
  }
  return 0;
}
