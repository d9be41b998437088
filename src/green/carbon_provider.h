// Live carbon-intensity forecasts from HTTP providers, behind one interface (docs/green.md, "Live
// providers"): Electricity Maps (v3 /carbon-intensity/forecast), WattTime (v3 /forecast, the
// marginal signal co2_moer in lbs/MWh) and the Carbon Aware SDK's web API
// (/emissions/forecasts/current). Each answer becomes a CarbonTrace from its first point, so the
// planners take it as they take a trace file. A provider that fails (no answer within the
// timeout, an HTTP error, a body that is not its format) or answers with a stale forecast is
// replaced by the forecaster over a trace file with a warning (ForecastOrFallBack), never
// silently.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "green/carbon_trace.h"
#include "green/forecaster.h"

namespace cdt::green {

enum class CarbonProviderKind { kElectricityMaps, kWattTime, kCarbonAwareSdk };

// "electricitymaps", "watttime", "carbon-aware-sdk"; throws cdt::Error(kInvalidArgument) naming
// them for anything else.
CarbonProviderKind ParseCarbonProviderKind(const std::string& name);
const char* CarbonProviderName(CarbonProviderKind kind);

struct CarbonProviderOptions {
  CarbonProviderKind kind = CarbonProviderKind::kElectricityMaps;
  // Scheme, host and port: empty = the provider's public API (https://api.electricitymap.org,
  // https://api.watttime.org); the Carbon Aware SDK has none, its URL is required.
  std::string base_url;
  // Electricity Maps: the `auth-token` header; WattTime: a bearer token from its /login; the SDK:
  // none, or a bearer token if the deployment asks for one.
  std::string token;
  // Electricity Maps zone ("DE", "US-CAL-CISO"), WattTime region ("CAISO_NORTH"), SDK location
  // ("eastus").
  std::string zone;
  std::chrono::milliseconds timeout{10000};  // connect and read
  // A forecast generated longer ago than this is stale: the fallback replaces it.
  double max_age_hours = 3;
  // A forecast fetched less than this long ago is served again without asking (rate limits).
  double cache_seconds = 900;
};

// The forecast in a provider's response body, as a trace from its first point. Throws
// cdt::Error(kProtocol) naming `source` and what is wrong (not JSON, a missing field, units it
// cannot convert, points out of order). `generated_unix`: when the provider made the forecast
// (its own stamp, else the first point's time).
CarbonTrace ParseProviderForecast(CarbonProviderKind kind, const std::string& body,
                                  const std::string& source, double* generated_unix);

class CarbonProvider {
 public:
  virtual ~CarbonProvider() = default;
  // "electricitymaps DE (https://api.electricitymap.org)"
  virtual std::string name() const = 0;
  // The newest forecast covering `now_unix`. Throws cdt::Error (kIo: no answer or an HTTP error;
  // kProtocol: a body not in the provider's format; kTimeout: stale, generated more than
  // max_age_hours before `now_unix`) naming the provider and what to do.
  virtual CarbonTrace Forecast(double now_unix) = 0;
};

// The HTTP provider of `options.kind`, with its cache; `now` is the clock the cache reads (the
// process's by default; tests pass their own).
std::unique_ptr<CarbonProvider> MakeHttpCarbonProvider(const CarbonProviderOptions& options,
                                                       std::function<double()> now = nullptr);

struct LiveForecast {
  CarbonTrace trace;       // hourly from the hour of `now`, `hours` long
  bool fell_back = false;  // the provider failed: `trace` is the forecaster's
  std::string note;        // what happened, for the log and the report ("" when all went well)
};

// `hours` of hourly intensity from the hour of `now_unix`: the provider's forecast; when it fails,
// is stale or does not reach that far, the forecaster (forecaster.h) over `history` at the same
// moment of its year, with a note saying why. Without `history` the provider's failure is thrown,
// with what to pass.
LiveForecast ForecastOrFallBack(CarbonProvider& provider, const CarbonTrace* history,
                                double now_unix, int hours, const ForecastOptions& options = {});

}  // namespace cdt::green
