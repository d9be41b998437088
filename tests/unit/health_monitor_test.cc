// Health monitor (src/elastic/health_monitor.h): each rule fires on the degradation it is for
// and stays quiet on noise; the /proc and /sys readers parse the kernel's formats (given as fake
// files: the outside world) and say when a source is absent.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "elastic/health_monitor.h"

namespace cdt::elastic {
namespace {

namespace fs = std::filesystem;

std::vector<HealthWarning> Feed(FailurePredictor& p, const std::vector<HealthSample>& samples) {
  std::vector<HealthWarning> out;
  for (const auto& s : samples)
    if (auto w = p.Observe(s)) out.push_back(*w);
  return out;
}

// 300 s of a healthy worker: jittered steps, a few 3x pauses, background retransmissions with
// one burst, memory flat after warm-up.
std::vector<HealthSample> Healthy(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<HealthSample> v;
  double retrans = 0;
  for (int t = 0; t < 300; ++t) {
    HealthSample s;
    s.t = t;
    s.step_time_s = 0.1 * (0.9 + 0.2 * u(rng)) * (t % 97 == 50 ? 3 : 1);
    s.rss_bytes = 2e9 + 10e6 * u(rng);
    retrans += 2 + (t == 120 ? 150 : 0);
    s.tcp_retrans = retrans;
    v.push_back(s);
  }
  return v;
}

PredictorOptions WithMemoryLimit() {
  PredictorOptions o;
  o.memory_limit_bytes = 8e9;
  return o;
}

TEST(HealthMonitor, NoiseRaisesNothing) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    FailurePredictor p(WithMemoryLimit());
    EXPECT_TRUE(Feed(p, Healthy(seed)).empty()) << "seed " << seed;
  }
}

TEST(HealthMonitor, EachRuleFiresOnItsDegradation) {
  auto trace = Healthy(7);
  {
    auto slow = trace;
    for (int t = 200; t < 300; ++t)
      slow[static_cast<size_t>(t)].step_time_s *= 1 + (t - 200) / 25.0;
    FailurePredictor p(WithMemoryLimit());
    auto w = Feed(p, slow);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].rule, "slowdown");
    EXPECT_GT(w[0].t, 200);
  }
  {
    auto leak = trace;  // 2 GB + 50 MB/s: the 8 GB limit at t = 320
    for (int t = 200; t < 300; ++t) leak[static_cast<size_t>(t)].rss_bytes = 2e9 + 50e6 * (t - 200);
    FailurePredictor p(WithMemoryLimit());
    auto w = Feed(p, leak);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].rule, "memory");
    EXPECT_LT(w[0].t, 300);  // before the limit is reached
  }
  {
    auto flap = trace;
    double extra = 0;
    for (int t = 200; t < 300; ++t) {
      if (t % 10 < 5) extra += 300;
      flap[static_cast<size_t>(t)].tcp_retrans += extra;
    }
    FailurePredictor p(WithMemoryLimit());
    auto w = Feed(p, flap);
    ASSERT_EQ(w.size(), 1u);  // fires once while the condition lasts and flaps
    EXPECT_EQ(w[0].rule, "network");
  }
}

TEST(HealthMonitor, ReadersParseTheKernelsFormats) {
  const fs::path dir = fs::temp_directory_path() / ("cdt-health-" + std::to_string(::getpid()));
  fs::create_directories(dir / "1234");
  std::ofstream(dir / "snmp")
      << "Ip: Forwarding DefaultTTL\nIp: 1 64\n"
         "Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails "
         "EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts\n"
         "Tcp: 1 200 120000 -1 10 5 0 0 3 1000 900 42 0 7\n";
  std::ofstream(dir / "1234" / "statm") << "1000 250 100 10 0 200 0\n";
  std::ofstream(dir / "diskstats") << "   7       0 loop0 1 0 2 0 0 0 0 0 0 999 0\n"
                                      "   8       0 sda 100 0 200 10 50 0 80 20 0 35 30\n"
                                      "   8       1 sda1 90 0 180 9 40 0 70 18 0 30 27\n";
  EXPECT_EQ(ReadTcpRetransSegs((dir / "snmp").string()), 42.0);
  EXPECT_EQ(ReadResidentBytes(1234, dir.string()), 250.0 * 4096);
  EXPECT_EQ(ReadDiskBusyMs((dir / "diskstats").string()), 35.0);
  EXPECT_FALSE(ReadMaxTemperatureC((dir / "no-thermal").string()));
  fs::create_directories(dir / "thermal" / "thermal_zone0");
  fs::create_directories(dir / "thermal" / "thermal_zone1");
  std::ofstream(dir / "thermal" / "thermal_zone0" / "temp") << "41000\n";
  std::ofstream(dir / "thermal" / "thermal_zone1" / "temp") << "67500\n";
  EXPECT_EQ(ReadMaxTemperatureC((dir / "thermal").string()), 67.5);
  EXPECT_FALSE(ReadTcpRetransSegs((dir / "missing").string()));
  fs::remove_all(dir);
  // This machine's own counters: snmp exists on every Linux; thermal zones may not.
  EXPECT_TRUE(ReadTcpRetransSegs());
  EXPECT_TRUE(ReadResidentBytes(::getpid()));
}

TEST(HealthMonitor, ScoringCountsWarningsAgainstFailures) {
  PredictionScore s;
  ScoreTrace({{100, "slowdown", ""}}, 150, 60, &s);  // true, lead 50
  ScoreTrace({{10, "network", ""}}, 150, 60, &s);    // too early: false
  ScoreTrace({}, 150, 60, &s);                       // missed
  ScoreTrace({{5, "memory", ""}}, -1, 60, &s);       // healthy trace: false
  EXPECT_EQ(s.failures, 3);
  EXPECT_EQ(s.predicted_failures, 1);
  EXPECT_EQ(s.true_warnings, 1);
  EXPECT_EQ(s.false_warnings, 2);
  EXPECT_DOUBLE_EQ(s.lead_times_s.at(0), 50);
  EXPECT_NEAR(s.precision(), 1.0 / 3, 1e-12);
}

}  // namespace
}  // namespace cdt::elastic
