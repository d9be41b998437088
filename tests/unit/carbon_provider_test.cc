// The live carbon providers (green/carbon_provider.h) against a local HTTP server playing each
// one's API (tests/common/fake_etcd.h serves whatever a test sets per path): the formats and
// units, the token and zone on the wire, the cache, and the fallback to the forecaster when the
// provider fails, is stale or is silent.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <thread>

#include "cdt/error.h"
#include "fake_etcd.h"
#include "green/carbon_provider.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"

namespace cdt::green {
namespace {

using testing::FakeEtcd;

const double kNow = *ParseIsoTime("2026-12-07T10:20:00Z");

std::string Url(const FakeEtcd& server) {
  return "http://127.0.0.1:" + std::to_string(server.port());
}

CarbonProviderOptions Options(CarbonProviderKind kind, const FakeEtcd& server) {
  CarbonProviderOptions o;
  o.kind = kind;
  o.base_url = Url(server);
  o.zone = "DE";
  o.token = "secret-token";
  o.timeout = std::chrono::milliseconds(2000);
  return o;
}

// Hourly points from 10:00 for `hours`, 300 + 10 h g/kWh, Electricity Maps' shape.
std::string ElectricityMapsBody(int hours,
                                const std::string& updated = "2026-12-07T09:56:35.963Z") {
  std::string points;
  for (int h = 0; h < hours; ++h) {
    if (h) points += ",";
    points += R"({"carbonIntensity":)" + std::to_string(300 + 10 * h) + R"(,"datetime":")" +
              FormatIsoTime(kNow - 20 * 60 + 3600.0 * h) + R"("})";
  }
  return R"({"zone":"DE","forecast":[)" + points + R"(],"updatedAt":")" + updated + R"("})";
}

std::function<double()> FixedClock(double* t) {
  return [t] { return *t; };
}

TEST(CarbonProvider, ElectricityMapsForecastWithItsTokenAndZone) {
  FakeEtcd server;
  std::string token, zone, horizon;
  server.On("/v3/carbon-intensity/forecast",
            [&](const httplib::Request& req, httplib::Response& res) {
              token = req.get_header_value("auth-token");
              zone = req.get_param_value("zone");
              horizon = req.get_param_value("horizonHours");
              res.set_content(ElectricityMapsBody(72), "application/json");
            });
  double clock = kNow;
  auto p = MakeHttpCarbonProvider(Options(CarbonProviderKind::kElectricityMaps, server),
                                  FixedClock(&clock));
  const LiveForecast f = ForecastOrFallBack(*p, nullptr, kNow, 48);
  EXPECT_EQ(token, "secret-token");
  EXPECT_EQ(zone, "DE");
  EXPECT_EQ(horizon, "72");
  EXPECT_FALSE(f.fell_back) << f.note;
  EXPECT_EQ(f.trace.start_unix(), kNow - 20 * 60);
  const std::vector<double> hourly = f.trace.Hourly(f.trace.start_unix(), 48);
  ASSERT_EQ(hourly.size(), 48u);
  EXPECT_DOUBLE_EQ(hourly[0], 300);
  EXPECT_DOUBLE_EQ(hourly[47], 300 + 470);
  EXPECT_EQ(f.trace.region(), "DE");
  // A second ask within the cache's 15 minutes does not reach the server.
  clock += 600;
  ForecastOrFallBack(*p, nullptr, kNow + 600, 48);
  EXPECT_EQ(server.Requests("/v3/carbon-intensity/forecast"), 1);
  clock += 900;
  ForecastOrFallBack(*p, nullptr, kNow + 600, 48);
  EXPECT_EQ(server.Requests("/v3/carbon-intensity/forecast"), 2);
}

TEST(CarbonProvider, WattTimeMarginalSignalInPoundsPerMegawattHour) {
  FakeEtcd server;
  std::string auth;
  server.On("/v3/forecast", [&](const httplib::Request& req, httplib::Response& res) {
    auth = req.get_header_value("Authorization");
    EXPECT_EQ(req.get_param_value("signal_type"), "co2_moer");
    std::string data;
    for (int i = 0; i < 24 * 12; ++i)  // 5-minute points for 24 h from 10:00
      data += std::string(i ? "," : "") + R"({"point_time":")" +
              FormatIsoTime(kNow - 20 * 60 + 300.0 * i) + R"(","value":1000.0})";
    res.set_content(R"({"data":[)" + data +
                        R"(],"meta":{"region":"CAISO_NORTH","signal_type":"co2_moer",)"
                        R"("units":"lbs_co2_per_mwh","data_point_period_seconds":300,)"
                        R"("generated_at":"2026-12-07T10:15:00+00:00"}})",
                    "application/json");
  });
  auto p = MakeHttpCarbonProvider(Options(CarbonProviderKind::kWattTime, server));
  const LiveForecast f = ForecastOrFallBack(*p, nullptr, kNow, 24);
  EXPECT_EQ(auth, "Bearer secret-token");
  EXPECT_FALSE(f.fell_back) << f.note;
  EXPECT_NEAR(f.trace.IntensityAt(kNow + 3600), 453.592, 1e-9);  // 1,000 lbs/MWh in g/kWh
  EXPECT_EQ(f.trace.region(), "CAISO_NORTH");
}

TEST(CarbonProvider, CarbonAwareSdkForecastInMinutes) {
  FakeEtcd server;
  server.On("/emissions/forecasts/current",
            [&](const httplib::Request& req, httplib::Response& res) {
              EXPECT_EQ(req.get_param_value("location"), "eastus");
              std::string data;
              for (int i = 0; i < 6 * 30; ++i)  // 10-minute points for 30 h from 10:00
                data += std::string(i ? "," : "") + R"({"location":"eastus","timestamp":")" +
                        FormatIsoTime(kNow - 20 * 60 + 600.0 * i) + R"(","duration":10,"value":)" +
                        std::to_string(i < 6 ? 200 : 400) + "}";
              res.set_content(
                  R"([{"generatedAt":"2026-12-07T10:00:00Z","location":"eastus","forecastData":[)" +
                      data + "]}]",
                  "application/json");
            });
  CarbonProviderOptions o = Options(CarbonProviderKind::kCarbonAwareSdk, server);
  o.zone = "eastus";
  auto p = MakeHttpCarbonProvider(o);
  const LiveForecast f = ForecastOrFallBack(*p, nullptr, kNow, 24);
  EXPECT_FALSE(f.fell_back) << f.note;
  const std::vector<double> hourly = f.trace.Hourly(f.trace.start_unix(), 2);
  EXPECT_DOUBLE_EQ(hourly[0], 200);
  EXPECT_DOUBLE_EQ(hourly[1], 400);
  EXPECT_EQ(f.trace.region(), "eastus");
}

// Each way a provider fails falls back to the forecaster over the trace file, saying why; without
// a trace the failure is the error, naming what to pass.
TEST(CarbonProvider, AFailingStaleOrSilentProviderFallsBackWithAWarning) {
  const CarbonTrace history =
      ReadCarbonTrace(std::string(CDT_KNOWLEDGE_BASE) + "/carbon_traces/CISO_2022.csv");
  struct Case {
    const char* what;
    FakeEtcd::Handler handler;
    const char* says;
  };
  std::atomic<bool> stop{false};
  const std::vector<Case> cases = {
      {"HTTP 401", FakeEtcd::Answer(R"({"error":"unauthorized"})", 401), "answered HTTP 401"},
      {"not its format", FakeEtcd::Answer(R"({"status":"ok"})"), "no `forecast`"},
      {"stale", FakeEtcd::Answer(ElectricityMapsBody(72, "2026-12-06T22:00:00Z")), "stale"},
      {"too short", FakeEtcd::Answer(ElectricityMapsBody(6)), "its forecast covers"},
      {"silent",
       [&](const httplib::Request&, httplib::Response& res) {
         for (int i = 0; i < 300 && !stop; ++i)
           std::this_thread::sleep_for(std::chrono::milliseconds(10));
         res.set_content(ElectricityMapsBody(72), "application/json");
       },
       "no answer"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    stop = false;  // the silent handler answers once the case is over (set below)
    FakeEtcd server;
    server.On("/v3/carbon-intensity/forecast", c.handler);
    CarbonProviderOptions o = Options(CarbonProviderKind::kElectricityMaps, server);
    o.timeout = std::chrono::milliseconds(std::string(c.what) == "silent" ? 300 : 5000);
    auto p = MakeHttpCarbonProvider(o);
    const LiveForecast f = ForecastOrFallBack(*p, &history, kNow, 24);
    EXPECT_TRUE(f.fell_back);
    EXPECT_NE(f.note.find(c.says), std::string::npos) << f.note;
    EXPECT_NE(f.note.find("planned on the forecaster over"), std::string::npos) << f.note;
    EXPECT_EQ(f.trace.start_unix(), std::floor(kNow / 3600) * 3600);
    EXPECT_EQ(f.trace.Hourly(f.trace.start_unix(), 24).size(), 24u);
    try {
      ForecastOrFallBack(*p, nullptr, kNow, 24);
      ADD_FAILURE() << "no fallback, yet no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("pass --trace FILE"), std::string::npos) << e.what();
    }
    stop = true;
  }
}

// A forecast whose first point is the next hour lends it to the current one, saying so; members
// of the wrong type are the provider's format error (and so a fallback), not a crash.
TEST(CarbonProvider, AForecastFromTheNextHourAndWrongTypedMembers) {
  FakeEtcd server;
  std::string points;
  for (int h = 1; h <= 30; ++h)
    points += std::string(h > 1 ? "," : "") + R"({"carbonIntensity":)" + std::to_string(100 * h) +
              R"(,"datetime":")" + FormatIsoTime(std::floor(kNow / 3600) * 3600 + 3600.0 * h) +
              R"("})";
  server.On("/v3/carbon-intensity/forecast",
            FakeEtcd::Answer(R"({"zone":7,"forecast":[)" + points + R"(],"updatedAt":")" +
                             FormatIsoTime(kNow) + R"("})"));
  auto p = MakeHttpCarbonProvider(Options(CarbonProviderKind::kElectricityMaps, server));
  const LiveForecast f = ForecastOrFallBack(*p, nullptr, kNow, 24);
  EXPECT_FALSE(f.fell_back);
  EXPECT_NE(f.note.find("its first value stands for the hour before"), std::string::npos) << f.note;
  const std::vector<double> hourly = f.trace.Hourly(f.trace.start_unix(), 3);
  EXPECT_DOUBLE_EQ(hourly[0], 100);
  EXPECT_DOUBLE_EQ(hourly[1], 100);
  EXPECT_DOUBLE_EQ(hourly[2], 200);
  double generated = 0;
  for (const char* body :
       {R"({"forecast":"soon"})",
        R"({"forecast":[{"carbonIntensity":"3","datetime":"2026-12-07T10:00:00Z"}]})",
        R"({"data":[],"meta":{"units":"lbs_co2_per_mwh","data_point_period_seconds":"300"}})"}) {
    for (CarbonProviderKind kind :
         {CarbonProviderKind::kElectricityMaps, CarbonProviderKind::kWattTime}) {
      try {
        ParseProviderForecast(kind, body, "p", &generated);
        ADD_FAILURE() << body;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
      }
    }
  }
  CarbonProviderOptions o = Options(CarbonProviderKind::kElectricityMaps, server);
  o.base_url = "ftp://127.0.0.1:1";
  try {
    MakeHttpCarbonProvider(o)->Forecast(kNow);
    ADD_FAILURE() << "ftp accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CDT_CARBON_URL"), std::string::npos) << e.what();
  }
}

TEST(CarbonProvider, BadOptionsAndBodiesAreNamed) {
  EXPECT_THROW(ParseCarbonProviderKind("wattime"), Error);
  CarbonProviderOptions o;
  o.kind = CarbonProviderKind::kCarbonAwareSdk;
  o.zone = "eastus";
  EXPECT_THROW(MakeHttpCarbonProvider(o), Error);  // the SDK has no public URL
  o.kind = CarbonProviderKind::kElectricityMaps;
  o.zone = "";
  EXPECT_THROW(MakeHttpCarbonProvider(o), Error);
  double generated = 0;
  for (const char* body :
       {"", "[]", R"({"forecast":[{"carbonIntensity":-3,"datetime":"2026-12-07T10:00:00Z"}]})",
        R"({"forecast":[{"carbonIntensity":3,"datetime":"yesterday"}]})",
        R"({"forecast":[{"carbonIntensity":3,"datetime":"2026-12-07T10:00:00Z"},)"
        R"({"carbonIntensity":3,"datetime":"2026-12-07T09:00:00Z"}]})"}) {
    try {
      ParseProviderForecast(CarbonProviderKind::kElectricityMaps, body, "em", &generated);
      ADD_FAILURE() << body;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kProtocol) << e.what();
    }
  }
  try {
    ParseProviderForecast(CarbonProviderKind::kWattTime,
                          R"({"data":[],"meta":{"units":"percent"}})", "wt", &generated);
    ADD_FAILURE() << "percent accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("free plan"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace cdt::green
