#include "green/carbon_provider.h"

#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "cdt/error.h"
#include "common/printable.h"
#include "common/unix_time.h"
#include "green/iso_time.h"

namespace cdt::green {
namespace {

// WattTime's marginal emissions are in pounds of CO2 per MWh: 453.592 g per lb over 1,000 kWh.
constexpr double kGramsPerKwhPerLbsPerMwh = 0.453592;

[[noreturn]] void Bad(const std::string& source, const std::string& what) {
  throw Error(ErrorCode::kProtocol, source + ": " + what);
}

struct Point {
  double t = 0;
  double value = 0;
};

// The member `key` of `obj`, or a kProtocol error naming what was expected.
const nlohmann::json& Member(const nlohmann::json& obj, const char* key, const std::string& source,
                             const std::string& where) {
  if (!obj.is_object() || !obj.contains(key))
    Bad(source, where + ": no `" + key + "` (not this provider's format, or an error body)");
  return obj[key];
}

// A string member that only names things (a zone, a region): "" when missing or not a string.
std::string NameOr(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return "";
  return obj[key].get<std::string>();
}

double TimeOf(const nlohmann::json& v, const std::string& source, const std::string& where) {
  const std::optional<double> t = v.is_string() ? ParseIsoTime(v.get<std::string>()) : std::nullopt;
  if (!t) Bad(source, where + ": '" + Printable(v.dump()) + "' is not an ISO 8601 time");
  return *t;
}

double NumberOf(const nlohmann::json& v, const std::string& source, const std::string& where) {
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0)
    Bad(source, where + ": '" + Printable(v.dump()) + "' is not an intensity (a number >= 0)");
  return v.get<double>();
}

// Each point holds until the next one; the last for `period` seconds (the median spacing when 0).
CarbonTrace TraceOf(std::vector<Point> points, double period, const std::string& source,
                    const std::string& region) {
  if (points.empty()) Bad(source, "the forecast holds no points");
  for (size_t i = 1; i < points.size(); ++i)
    if (!(points[i].t > points[i - 1].t))
      Bad(source, "point " + std::to_string(i) + " (" + FormatIsoTime(points[i].t) +
                      ") is not after the one before it");
  if (!(period > 0)) {
    std::vector<double> d;
    for (size_t i = 1; i < points.size(); ++i) d.push_back(points[i].t - points[i - 1].t);
    std::sort(d.begin(), d.end());
    period = d.empty() ? 3600 : d[d.size() / 2];
  }
  std::vector<CarbonInterval> intervals;
  for (size_t i = 0; i < points.size(); ++i) {
    const double end = i + 1 < points.size() ? points[i + 1].t : points[i].t + period;
    intervals.push_back({points[i].t, end, points[i].value, -1});
  }
  return CarbonTrace(source, region, std::move(intervals));
}

// {"zone": "DE", "forecast": [{"carbonIntensity": 302, "datetime": "…"}, …], "updatedAt": "…"}
CarbonTrace ParseElectricityMaps(const nlohmann::json& doc, const std::string& source,
                                 double* generated) {
  const nlohmann::json& forecast = Member(doc, "forecast", source, "the body");
  if (!forecast.is_array()) Bad(source, "`forecast` is not an array");
  std::vector<Point> points;
  for (size_t i = 0; i < forecast.size(); ++i) {
    const std::string where = "forecast[" + std::to_string(i) + "]";
    points.push_back(
        {TimeOf(Member(forecast[i], "datetime", source, where), source, where),
         NumberOf(Member(forecast[i], "carbonIntensity", source, where), source, where)});
  }
  *generated = doc.contains("updatedAt") ? TimeOf(doc["updatedAt"], source, "updatedAt")
                                         : (points.empty() ? 0 : points[0].t);
  return TraceOf(std::move(points), 0, source, NameOr(doc, "zone"));
}

// {"data": [{"point_time": "…", "value": 870.2}, …], "meta": {"units": "lbs_co2_per_mwh",
//  "data_point_period_seconds": 300, "generated_at": "…", "region": "CAISO_NORTH"}}
CarbonTrace ParseWattTime(const nlohmann::json& doc, const std::string& source, double* generated) {
  const nlohmann::json& data = Member(doc, "data", source, "the body");
  const nlohmann::json& meta = Member(doc, "meta", source, "the body");
  if (!data.is_array()) Bad(source, "`data` is not an array");
  const nlohmann::json& units = Member(meta, "units", source, "meta");
  double scale = 0;
  if (units == "lbs_co2_per_mwh")
    scale = kGramsPerKwhPerLbsPerMwh;
  else if (units == "g_co2_per_kwh" || units == "kg_co2_per_mwh")
    scale = 1;
  else
    Bad(source, "meta.units " + Printable(units.dump()) +
                    " is not an intensity (lbs_co2_per_mwh, g_co2_per_kwh); `percent` is the "
                    "relative signal of WattTime's free plan, which a carbon account cannot use");
  std::vector<Point> points;
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string where = "data[" + std::to_string(i) + "]";
    points.push_back({TimeOf(Member(data[i], "point_time", source, where), source, where),
                      scale * NumberOf(Member(data[i], "value", source, where), source, where)});
  }
  *generated = meta.contains("generated_at") ? TimeOf(meta["generated_at"], source, "generated_at")
                                             : (points.empty() ? 0 : points[0].t);
  const nlohmann::json* period =
      meta.contains("data_point_period_seconds") ? &meta["data_point_period_seconds"] : nullptr;
  return TraceOf(std::move(points),
                 period ? NumberOf(*period, source, "meta.data_point_period_seconds") : 0, source,
                 NameOr(meta, "region"));
}

// [{"generatedAt": "…", "location": "eastus", "forecastData": [{"timestamp": "…",
//   "duration": 5, "value": 448.4}, …]}]   (duration in minutes)
CarbonTrace ParseCarbonAwareSdk(const nlohmann::json& doc, const std::string& source,
                                double* generated) {
  if (!doc.is_array() || doc.empty())
    Bad(source,
        "expected an array of forecasts (EmissionsForecast), got " + Printable(doc.dump(), 60));
  const nlohmann::json& f = doc[0];
  const nlohmann::json& data = Member(f, "forecastData", source, "forecast 0");
  if (!data.is_array()) Bad(source, "`forecastData` is not an array");
  std::vector<Point> points;
  double period = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string where = "forecastData[" + std::to_string(i) + "]";
    points.push_back({TimeOf(Member(data[i], "timestamp", source, where), source, where),
                      NumberOf(Member(data[i], "value", source, where), source, where)});
    if (data[i].contains("duration"))
      period = 60 * NumberOf(data[i]["duration"], source, where + ".duration");
  }
  *generated = f.contains("generatedAt") ? TimeOf(f["generatedAt"], source, "generatedAt")
                                         : (points.empty() ? 0 : points[0].t);
  return TraceOf(std::move(points), period, source, NameOr(f, "location"));
}

class HttpCarbonProvider : public CarbonProvider {
 public:
  HttpCarbonProvider(CarbonProviderOptions o, std::function<double()> now)
      : o_(std::move(o)), now_(now ? std::move(now) : [] { return UnixSeconds(); }) {
    if (o_.zone.empty())
      throw Error(ErrorCode::kInvalidArgument, std::string(CarbonProviderName(o_.kind)) +
                                                   ": no zone (--zone: " + ZoneWord() + ")");
    if (o_.base_url.empty()) {
      if (o_.kind == CarbonProviderKind::kCarbonAwareSdk)
        throw Error(ErrorCode::kInvalidArgument,
                    "carbon-aware-sdk: no URL (CDT_CARBON_URL=http://host:port of your Carbon "
                    "Aware SDK web API; it has no public one)");
      o_.base_url = o_.kind == CarbonProviderKind::kElectricityMaps
                        ? "https://api.electricitymap.org"
                        : "https://api.watttime.org";
    }
  }

  std::string name() const override {
    return std::string(CarbonProviderName(o_.kind)) + " " + o_.zone + " (" + o_.base_url + ")";
  }

  CarbonTrace Forecast(double now_unix) override {
    if (!cached_ || now_() - fetched_at_ >= o_.cache_seconds) {
      double generated = 0;
      CarbonTrace trace = ParseProviderForecast(o_.kind, Fetch(), name(), &generated);
      cached_ = std::move(trace);
      generated_ = generated;
      fetched_at_ = now_();
    }
    const double age_h = (now_unix - generated_) / 3600;
    if (age_h > o_.max_age_hours)
      throw Error(ErrorCode::kTimeout,
                  name() + ": its forecast was made at " + FormatIsoTime(generated_) + ", " +
                      std::to_string(static_cast<int>(age_h)) + " h ago (stale beyond " +
                      std::to_string(o_.max_age_hours) + " h)");
    return *cached_;
  }

 private:
  std::string ZoneWord() const {
    switch (o_.kind) {
      case CarbonProviderKind::kElectricityMaps:
        return "an Electricity Maps zone such as DE or US-CAL-CISO";
      case CarbonProviderKind::kWattTime:
        return "a WattTime region such as CAISO_NORTH";
      case CarbonProviderKind::kCarbonAwareSdk:
        return "a Carbon Aware SDK location such as eastus";
    }
    return "";
  }

  std::string Fetch() {
    std::unique_ptr<httplib::Client> made;
    try {
      made = std::make_unique<httplib::Client>(o_.base_url);
    } catch (const std::exception& e) {  // a scheme other than http and https
      throw Error(ErrorCode::kInvalidArgument,
                  name() + ": CDT_CARBON_URL is not http(s)://host[:port] (" + e.what() + ")");
    }
    httplib::Client& client = *made;
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(o_.timeout);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(o_.timeout - seconds);
    client.set_connection_timeout(seconds.count(), micros.count());
    client.set_read_timeout(seconds.count(), micros.count());
    client.set_write_timeout(seconds.count(), micros.count());
    httplib::Headers headers;
    httplib::Params params;
    std::string path;
    switch (o_.kind) {
      case CarbonProviderKind::kElectricityMaps:  // 72 h, the longest it gives (24 by default)
        path = "/v3/carbon-intensity/forecast";
        params = {{"zone", o_.zone}, {"horizonHours", "72"}};
        if (!o_.token.empty()) headers.emplace("auth-token", o_.token);
        break;
      case CarbonProviderKind::kWattTime:
        path = "/v3/forecast";
        params = {{"region", o_.zone}, {"signal_type", "co2_moer"}, {"horizon_hours", "72"}};
        break;
      case CarbonProviderKind::kCarbonAwareSdk:
        path = "/emissions/forecasts/current";
        params = {{"location", o_.zone}};
        break;
    }
    if (o_.kind != CarbonProviderKind::kElectricityMaps && !o_.token.empty())
      headers.emplace("Authorization", "Bearer " + o_.token);
    const httplib::Result r = client.Get(path, params, headers);  // never throws (error codes)
    if (!r)
      throw Error(ErrorCode::kIo, name() + ": no answer to GET " + path + " (" +
                                      httplib::to_string(r.error()) + ")");
    if (r->status != 200)
      throw Error(
          ErrorCode::kIo,
          name() + ": GET " + path + " answered HTTP " + std::to_string(r->status) +
              (r->status == 401 || r->status == 403 ? " (the token, CDT_CARBON_TOKEN, was refused)"
                                                    : "") +
              ": " + Printable(r->body, 120));
    return r->body;
  }

  CarbonProviderOptions o_;
  std::function<double()> now_;
  std::optional<CarbonTrace> cached_;
  double generated_ = 0, fetched_at_ = 0;
};

// `values` (hourly) as a trace from `start`.
CarbonTrace HourlyTrace(const std::vector<double>& values, double start, const std::string& source,
                        const std::string& region) {
  std::vector<CarbonInterval> intervals;
  for (size_t h = 0; h < values.size(); ++h)
    intervals.push_back({start + 3600.0 * h, start + 3600.0 * (h + 1), values[h], -1});
  return CarbonTrace(source, region, std::move(intervals));
}

}  // namespace

CarbonProviderKind ParseCarbonProviderKind(const std::string& name) {
  if (name == "electricitymaps") return CarbonProviderKind::kElectricityMaps;
  if (name == "watttime") return CarbonProviderKind::kWattTime;
  if (name == "carbon-aware-sdk") return CarbonProviderKind::kCarbonAwareSdk;
  throw Error(ErrorCode::kInvalidArgument, "carbon provider '" + Printable(name) +
                                               "': say electricitymaps, watttime or "
                                               "carbon-aware-sdk");
}

const char* CarbonProviderName(CarbonProviderKind kind) {
  switch (kind) {
    case CarbonProviderKind::kElectricityMaps:
      return "electricitymaps";
    case CarbonProviderKind::kWattTime:
      return "watttime";
    case CarbonProviderKind::kCarbonAwareSdk:
      return "carbon-aware-sdk";
  }
  return "?";
}

CarbonTrace ParseProviderForecast(CarbonProviderKind kind, const std::string& body,
                                  const std::string& source, double* generated_unix) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    Bad(source, "the body is not JSON (" + std::string(e.what()) + "): " + Printable(body, 60));
  }
  try {
    switch (kind) {
      case CarbonProviderKind::kElectricityMaps:
        return ParseElectricityMaps(doc, source, generated_unix);
      case CarbonProviderKind::kWattTime:
        return ParseWattTime(doc, source, generated_unix);
      case CarbonProviderKind::kCarbonAwareSdk:
        return ParseCarbonAwareSdk(doc, source, generated_unix);
    }
  } catch (const nlohmann::json::exception& e) {  // a member of another type than the format's
    Bad(source, std::string("the body is not this provider's format: ") + e.what());
  }
  Bad(source, "unknown provider");
}

std::unique_ptr<CarbonProvider> MakeHttpCarbonProvider(const CarbonProviderOptions& options,
                                                       std::function<double()> now) {
  return std::make_unique<HttpCarbonProvider>(options, std::move(now));
}

LiveForecast ForecastOrFallBack(CarbonProvider& provider, const CarbonTrace* history,
                                double now_unix, int hours, const ForecastOptions& options) {
  const double hour0 = std::floor(now_unix / 3600) * 3600;
  const double until = hour0 + 3600.0 * hours;
  LiveForecast out;
  try {
    const CarbonTrace f = provider.Forecast(now_unix);
    if (f.start_unix() > hour0 + 3600 || f.end_unix() < until)
      throw Error(ErrorCode::kInvalidArgument,
                  provider.name() + ": its forecast covers " + FormatIsoTime(f.start_unix()) +
                      " .. " + FormatIsoTime(f.end_unix()) + ", not " + FormatIsoTime(hour0) +
                      " .. " + FormatIsoTime(until) + " (" + std::to_string(hours) + " h)");
    std::vector<double> values;
    for (int h = 0; h < hours; ++h) {
      // The hour's mean over what the forecast covers; a forecast that begins at the next hour
      // lends its first point to this one (noted).
      const double a = std::max(hour0 + 3600.0 * h, f.start_unix());
      const double b = hour0 + 3600.0 * (h + 1);
      if (b <= a) {
        values.push_back(f.IntensityAt(f.start_unix()));
        out.note = provider.name() + ": the forecast begins at " + FormatIsoTime(f.start_unix()) +
                   "; its first value stands for the hour before";
        continue;
      }
      values.push_back(f.GramsPerKw(a, b) / ((b - a) / 3600));
    }
    out.trace = HourlyTrace(values, hour0, provider.name(), f.region());
    return out;
  } catch (const Error& e) {
    if (!history)
      throw Error(e.code(), std::string(e.what()) +
                                "; pass --trace FILE of the region for the forecaster to stand in");
    const double then = std::floor(history->SameMomentOfYear(now_unix) / 3600) * 3600;
    out.trace = HourlyTrace(ForecastHourly(*history, then, hours, options), hour0,
                            "forecaster over " + history->source(), history->region());
    out.fell_back = true;
    out.note = std::string(e.what()) + ": planned on the forecaster over " + history->source() +
               " from " + FormatIsoTime(then) + " (this hour in the trace's year) instead";
    return out;
  }
}

}  // namespace cdt::green
