// src/green: accounting, trace readers, forecaster, planner, batch control, meters (on fake sysfs
// and /proc trees, with a fake clock — the outside world only), certificates.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cdt/error.h"
#include "elastic/health_monitor.h"
#include "green/accounting.h"
#include "green/batch_controller.h"
#include "green/carbon_sources.h"
#include "green/certificate.h"
#include "green/energy_meter.h"
#include "green/forecaster.h"
#include "green/iso_time.h"
#include "green/planner.h"
#include "green/report.h"

namespace cdt::green {
namespace {

namespace fs = std::filesystem;

const std::string kKb = CDT_KNOWLEDGE_BASE;

std::string TempDir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("cdt_green_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(IsoTime, ParsesTheFormsTracesUse) {
  EXPECT_EQ(*ParseIsoTime("2022-03-14T05:00:00Z"), 1647234000);
  EXPECT_EQ(*ParseIsoTime("2022-03-14 05:00:00+00:00"), 1647234000);
  EXPECT_EQ(*ParseIsoTime("2022-03-14T07:00:00+02:00"), 1647234000);
  EXPECT_EQ(*ParseIsoTime("2022-03-14T05:00Z"), 1647234000);
  EXPECT_EQ(*ParseIsoTime("2022-03-14"), 1647216000);
  EXPECT_FALSE(ParseIsoTime("14/03/2022"));
  EXPECT_FALSE(ParseIsoTime("2022-13-01T00:00:00Z"));
  EXPECT_FALSE(ParseIsoTime("2022-03-14T05:00:00Zjunk"));
  EXPECT_EQ(FormatIsoTime(1647234000), "2022-03-14T05:00:00Z");
}

TEST(Accounting, ConstantPowerTimesSteppedIntensityMatchesHandComputedKg) {
  // 100, 300, 50 g/kWh in three hours; 2 kW from 0:30 to 2:45.
  const double t0 = *ParseIsoTime("2022-01-01T00:00:00Z");
  CarbonTrace trace("test", "X",
                    {{t0, t0 + 3600, 100, 0.5},
                     {t0 + 3600, t0 + 7200, 300, 0.1},
                     {t0 + 7200, t0 + 10800, 50, 0.9}});
  std::vector<EnergySample> s;
  for (double t = t0 + 1800; t <= t0 + 9900 + 1e-9; t += 450)
    s.push_back({t, 2000.0 * (t - (t0 + 1800))});
  const CarbonAccount a = Account(trace, s);
  // 0.5 h x 2 kW x 100 + 1 h x 2 kW x 300 + 0.75 h x 2 kW x 50 = 100 + 600 + 75 = 775 g.
  EXPECT_NEAR(a.carbon_kg, 0.775, 0.775 * 1e-3);
  EXPECT_NEAR(a.energy_kwh, 4.5, 4.5 * 1e-3);
  EXPECT_NEAR(a.carbon_free_kwh, 1 * 0.5 + 2 * 0.1 + 1.5 * 0.9, 1e-9);
  // Samples that straddle the interval boundaries integrate the same.
  const CarbonAccount b = Account(trace, {{t0 + 1800, 0}, {t0 + 9900, 2000.0 * 8100}});
  EXPECT_NEAR(b.carbon_kg, 0.775, 0.775 * 1e-3);
  EXPECT_NE(ErrorOf([&] {
              Account(trace, {{t0, 0}, {t0 + 20000, 1}});
            }).find("outside"),
            std::string::npos);
}

TEST(CarbonSources, ReadsDcRlWithCarbonFreeShareAndInterpolatesLoggedGaps) {
  const std::string text =
      "timestamp,WND,SUN,WAT,OIL,NG,COL,NUC,OTH,avg_CI\n"
      "2022-01-01 00:00:00+00:00,10,0,10,0,60,0,20,0,300\n"
      "2022-01-01 01:00:00+00:00,10,0,10,0,60,0,20,0,\n"
      "2022-01-01 02:00:00+00:00,10,0,10,0,60,0,20,0,200\n"
      "2022-01-01 04:00:00+00:00,10,0,10,0,60,0,20,0,100\n";
  std::vector<std::string> logged;
  TraceReadOptions o;
  o.log = [&](const std::string& s) { logged.push_back(s); };
  const CarbonTrace t = ParseCarbonTrace(text, "dir/CISO_2022.csv", o);
  EXPECT_EQ(t.region(), "CISO");
  ASSERT_EQ(t.intervals().size(), 5u);
  EXPECT_DOUBLE_EQ(t.intervals()[1].gco2_per_kwh, 250);  // interpolated
  EXPECT_DOUBLE_EQ(t.intervals()[3].gco2_per_kwh, 150);  // a missing row, interpolated
  EXPECT_DOUBLE_EQ(t.intervals()[0].carbon_free_share, 0.4);
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_NE(logged[0].find("dir/CISO_2022.csv:3"), std::string::npos) << logged[0];
  o.gaps = GapPolicy::kHoldPrevious;
  EXPECT_DOUBLE_EQ(ParseCarbonTrace(text, "x.csv", o).intervals()[1].gco2_per_kwh, 300);
  o.gaps = GapPolicy::kFail;
  EXPECT_NE(ErrorOf([&] { ParseCarbonTrace(text, "x.csv", o); }).find("x.csv:3"),
            std::string::npos);
}

TEST(CarbonSources, BadInputNamesFileAndLine) {
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("time,foo\n2022-01-01,3\n", "a.csv");
            }).find("a.csv:1: missing column"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace(
                  "timestamp,gco2_per_kwh\n2022-01-01T00:00Z,3\n2022-01-01T01:00Z,-1\n", "b.csv");
            }).find("b.csv:3: negative"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("timestamp,gco2_per_kwh\n2022-01-01T01:00Z,3\n2022-01-01T00:00Z,4\n",
                               "c.csv");
            }).find("c.csv:3: timestamp"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("timestamp,gco2_per_kwh\n2022-01-01T01:00Z,3\n2022-01-01T01:00Z,4\n",
                               "d.csv");
            }).find("d.csv:3: duplicate"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("timestamp,gco2_per_kwh\nyesterday,3\n", "e.csv");
            }).find("e.csv:2"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("timestamp,gco2_per_kwh\n2022-01-01T01:00Z,abc\n", "f.csv");
            }).find("f.csv:2"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseCarbonTrace("[{\"time\": 3}]", "g.json"); }).find("g.json"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseCarbonTrace("", "h.csv"); }).find("h.csv"), std::string::npos);
  // Durations that are not numbers (found by fuzz_carbon_json: std::stod threw past the reader).
  for (const char* duration : {"PT.H", "PT1..5M",
                               "PT99999999999999999999999999999999999999999999"
                               "9999999999999999999999999999999999999999999999"
                               "9999999999999999999999999999999999999999999999"
                               "9999999999999999999999999999999999999999999999"
                               "9999999999999999999999999999999999999999999999"
                               "9999999999999999999999999999999999999999999999"
                               "99999999999999999999999999999H"})
    EXPECT_NE(ErrorOf([&] {
                ParseCarbonTrace(std::string("[{\"time\": \"2022-06-01T00:00:00Z\", \"rating\": 3, "
                                             "\"duration\": \"") +
                                     duration + "\"}]",
                                 "i.json");
              }).find("is neither hh:mm:ss nor PT#H#M#S"),
              std::string::npos)
        << duration;
  EXPECT_NE(
      ErrorOf([] { ReadCarbonTrace("/nonexistent/trace.csv"); }).find("/nonexistent/trace.csv"),
      std::string::npos);
}

// Resident memory of this process in bytes.
size_t ResidentBytes() {
  return static_cast<size_t>(elastic::ReadResidentBytes(::getpid()).value_or(0));
}

// A gap of 8,000 years used to be filled hour by hour (70 million rows, gigabytes); a last line
// cut short said only that it had too few fields.
TEST(CarbonSources, LongGapsAndACutLastLineAreRefusedByLine) {
  const size_t before = ResidentBytes();
  const std::string gap = ErrorOf([] {
    ParseCarbonTrace(
        "timestamp,gco2_per_kwh\n1000-01-01T00:00Z,3\n1000-01-01T01:00Z,3\n9000-01-01T00:00Z,4\n",
        "gap.csv");
  });
  EXPECT_NE(gap.find("gap.csv:4: nothing from"), std::string::npos) << gap;
  EXPECT_NE(gap.find("longer than the 7 days"), std::string::npos) << gap;
  EXPECT_LT(ResidentBytes(), before + (size_t{100} << 20));
  // Eight days of hourly intervals missing: refused too; six are filled by the policy.
  EXPECT_NE(ErrorOf([] {
              ParseCarbonTrace("timestamp,gco2_per_kwh\n2022-01-01T00:00Z,3\n2022-01-09T00:00Z,4\n",
                               "week.csv");
            }).find("week.csv:3"),
            std::string::npos);
  EXPECT_EQ(ParseCarbonTrace("timestamp,gco2_per_kwh\n2022-01-01T00:00Z,3\n2022-01-01T01:00Z,3\n"
                             "2022-01-01T02:00Z,3\n2022-01-01T03:00Z,3\n2022-01-07T03:00Z,4\n",
                             "six-days.csv")
                .intervals()
                .size(),
            4u + 143u + 1u);
  const std::string cut = ErrorOf([] {
    ParseCarbonTrace("time,a,gco2_per_kwh\n2022-01-01T00:00Z,1,3\n2022-01-01T01:00Z,", "cut.csv");
  });
  EXPECT_NE(cut.find("cut.csv:3"), std::string::npos) << cut;
  EXPECT_NE(cut.find("cut short"), std::string::npos) << cut;
}

TEST(CarbonSources, ReadsGenericCsvCarbonAwareJsonAndTheAnnualTable) {
  const CarbonTrace g = ParseCarbonTrace(
      "timestamp,gco2_per_kwh\n2022-01-01T00:00:00Z,10\n2022-01-01T00:30:00Z,20\n", "g.csv");
  EXPECT_DOUBLE_EQ(g.end_unix() - g.start_unix(), 3600);
  EXPECT_DOUBLE_EQ(g.IntensityAt(g.start_unix() + 2000), 20);
  const CarbonTrace j = ParseCarbonTrace(
      R"([{"Location":"eastus","Time":"2022-01-01T00:00:00Z","Rating":100.5,"Duration":"01:00:00"},
          {"location":"eastus","time":"2022-01-01T01:00:00Z","rating":200,"duration":"PT1H"}])",
      "sdk.json");
  EXPECT_EQ(j.region(), "eastus");
  EXPECT_DOUBLE_EQ(j.IntensityAt(j.start_unix() + 4000), 200);
  EXPECT_DOUBLE_EQ(j.end_unix() - j.start_unix(), 7200);
  const CarbonTrace c = ConstantCarbonTrace("fra", kKb + "/carbon_profiles/annual_average.json");
  EXPECT_TRUE(c.constant());
  EXPECT_GT(c.IntensityAt(1e9), 0);
  EXPECT_NE(ErrorOf([] {
              ConstantCarbonTrace("ATLANTIS", kKb + "/carbon_profiles/annual_average.json");
            }).find("ATLANTIS"),
            std::string::npos);
}

TEST(CarbonSources, TheNineShippedTracesLoadWithTheirGapsLogged) {
  for (const char* ba : {"AZPS", "BPAT", "CISO", "ERCO", "MISO", "NYIS", "PJM", "SOCO", "WAAT"}) {
    std::vector<std::string> logged;
    TraceReadOptions o;
    o.log = [&](const std::string& s) { logged.push_back(s); };
    const CarbonTrace t =
        ReadCarbonTrace(kKb + "/carbon_traces/" + std::string(ba) + "_2022.csv", o);
    EXPECT_EQ(t.intervals().size(), 8760u) << ba;
    EXPECT_EQ(t.notes.size(), logged.size());
    if (std::string(ba) == "PJM") {
      EXPECT_GT(logged.size(), 0u);
    }
  }
}

TEST(Forecaster, ExactOnAPurelyDailyTraceAndMeasuredOnRealOnes) {
  std::vector<CarbonInterval> v;
  const double t0 = *ParseIsoTime("2022-01-01T00:00:00Z");
  for (int h = 0; h < 24 * 20; ++h)
    v.push_back({t0 + 3600.0 * h, t0 + 3600.0 * (h + 1), 200 + 100 * std::sin(h * M_PI / 12), -1});
  const CarbonTrace t("daily", "X", v);
  EXPECT_LT(ForecastMape(t, t0 + 8 * 86400, 10, 24, 48), 1e-6);
  const CarbonTrace ciso = ReadCarbonTrace(kKb + "/carbon_traces/CISO_2022.csv");
  const double mape = ForecastMape(ciso, ciso.start_unix() + 8 * 86400, 20, 24 * 17, 72);
  EXPECT_GT(mape, 0);
  EXPECT_LT(mape, 100);
}

double BruteForceSuspendResume(const std::vector<double>& I, int deadline, double hours) {
  // Every set of ceil(hours) hours, with the partial hour on each of them in turn.
  const int n = static_cast<int>(std::ceil(hours - 1e-12));
  const double part = hours - (n - 1);
  double best = 1e300;
  for (int mask = 0; mask < (1 << deadline); ++mask) {
    if (__builtin_popcount(mask) != n) continue;
    double full = 0;
    for (int h = 0; h < deadline; ++h)
      if (mask >> h & 1) full += I[static_cast<size_t>(h)];
    for (int h = 0; h < deadline; ++h)
      if (mask >> h & 1) best = std::min(best, full - I[static_cast<size_t>(h)] * (1 - part));
  }
  return best;
}

TEST(Planner, SuspendResumeEqualsTheBruteForceOptimumOnRandomInstances) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int deadline = 1 + static_cast<int>(rng() % 10);
    std::vector<double> I(static_cast<size_t>(deadline));
    for (double& x : I) x = static_cast<double>(rng() % 500);
    const double hours = std::max(0.1, std::uniform_real_distribution<double>(0.1, deadline)(rng));
    JobSpec job;
    job.work = hours * 3;         // 3 units per hour at the base count
    job.scaling = {{2, 3, 1.0}};  // 2 workers, 1 kW
    job.base_workers = 2;
    job.deadline_hours = deadline;
    const Plan p = MakePlan(Strategy::kSuspendResume, job, I);
    ASSERT_TRUE(p.feasible) << p.reason;
    EXPECT_NEAR(p.work, job.work, 1e-9);
    EXPECT_NEAR(p.carbon_kg * 1000, BruteForceSuspendResume(I, deadline, hours), 1e-6)
        << "trial " << trial;
    EXPECT_LE(p.finish_hours, deadline + 1e-9);
  }
}

TEST(Planner, ContiguousPartialHourJoinsAStretch) {
  JobSpec job;
  job.scaling = {{1, 1, 1.0}};
  job.work = 2.5;
  job.deadline_hours = 7;
  PlanOptions o;
  o.contiguous_partial = true;
  // Cheapest: hours 1 and 2 (full); the cheapest remaining hour overall is 5, but the partial
  // goes next to the stretch: hour 0 (before it, at the end of the hour) or 3 — 0 is cheaper.
  const std::vector<double> I = {20, 10, 10, 40, 90, 15, 95};
  EXPECT_EQ(MakePlan(Strategy::kSuspendResume, job, I).slots.back().hour, 5);
  const Plan p = MakePlan(Strategy::kSuspendResume, job, I, o);
  ASSERT_EQ(p.slots.size(), 3u);
  EXPECT_EQ(p.slots[0].hour, 0);
  EXPECT_DOUBLE_EQ(p.slots[0].offset, 0.5);
  EXPECT_NEAR(p.work, 2.5, 1e-12);
  EXPECT_NEAR(p.finish_hours, 3, 1e-12);
}

TEST(Planner, APartialHourRunsAloneInACleanHourWhenItsRestartCostsLess) {
  // Hour 1 is clean and taken whole; 0.9 h are left. Next to it: hours 0 and 2 (600). Alone: hour
  // 3 (100), which costs a restart of 0.05 h: (0.9 + 0.05) x 100 < 0.9 x 600.
  JobSpec job;
  job.scaling = {{1, 1, 1.0}};
  job.work = 1.9;
  job.deadline_hours = 5;
  job.restart_work = 0.05;
  PlanOptions o;
  o.contiguous_partial = true;
  const std::vector<double> I = {900, 100, 600, 100, 600};
  Plan p = MakePlan(Strategy::kSuspendResume, job, I, o);
  ASSERT_EQ(p.slots.size(), 2u);
  EXPECT_EQ(p.slots[0].hour, 1);
  EXPECT_EQ(p.slots[1].hour, 3);
  EXPECT_DOUBLE_EQ(p.slots[1].offset, 0);
  EXPECT_NEAR(p.slots[1].fraction, 0.95, 1e-12);  // the second stretch carries its restart
  EXPECT_NEAR(p.work, 1.95, 1e-12);
  // A restart that does not fit with the partial in the clean hour: hour 3 whole (0.8 h of work
  // in it), the last 0.1 h next to hour 1 — not 0.9 h in the dirty hour.
  job.restart_work = 0.2;
  p = MakePlan(Strategy::kSuspendResume, job, I, o);
  ASSERT_EQ(p.slots.size(), 3u);
  EXPECT_EQ(p.slots[1].hour, 2);
  EXPECT_NEAR(p.slots[1].fraction, 0.1, 1e-12);
  EXPECT_EQ(p.slots[2].hour, 3);
  EXPECT_NEAR(p.carbon_kg * 1000, 100 + 60 + 100, 1e-9);
  // Unknown: the partial joins the stretch.
  job.restart_work = -1;
  p = MakePlan(Strategy::kSuspendResume, job, I, o);
  EXPECT_EQ(p.slots.back().hour, 2);
  // A restart dearer than the difference: (0.9 + 0.5) x 100 > 0.9 x 150.
  job.work = 1.5;
  job.restart_work = 0.5;
  p = MakePlan(Strategy::kSuspendResume, job, {900, 100, 150, 100, 600}, o);
  EXPECT_EQ(p.slots.back().hour, 2);
}

TEST(Planner, ElasticIsNeverWorseThanSuspendResumeAndUsesCleanHoursHarder) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int deadline = 6 + static_cast<int>(rng() % 30);
    std::vector<double> I(static_cast<size_t>(deadline));
    for (double& x : I) x = 50 + static_cast<double>(rng() % 500);
    JobSpec job;
    job.base_workers = 2;
    job.scaling = ScalingCurve(1, 4, 2, 1.0, 0.4, 0.9);
    job.work = std::uniform_real_distribution<double>(1, deadline / 2.0)(rng);
    job.deadline_hours = deadline;
    const Plan sr = MakePlan(Strategy::kSuspendResume, job, I);
    const Plan el = MakePlan(Strategy::kElastic, job, I);
    ASSERT_TRUE(el.feasible) << el.reason;
    EXPECT_NEAR(el.work, job.work, 1e-9);
    EXPECT_LE(el.carbon_kg, sr.carbon_kg * (1 + 1e-12)) << "trial " << trial;
  }
  // One clean hour among dirty ones: elastic runs it on the most workers.
  JobSpec job;
  job.base_workers = 1;
  job.scaling = ScalingCurve(1, 4, 1, 1.0, 0.1, 0.95);
  job.work = 3;
  job.deadline_hours = 4;
  const Plan el = MakePlan(Strategy::kElastic, job, {500, 10, 500, 500});
  int most = 0;
  for (const PlanSlot& s : el.slots) {
    EXPECT_EQ(s.hour, 1);  // 3 workers' worth of work fits in the clean hour on 4 workers
    most = std::max(most, s.workers);
  }
  EXPECT_EQ(most, 4);
}

TEST(Planner, InfeasibleDeadlinesAndCapsAreReportedWithTheBestAchievable) {
  JobSpec job;
  job.scaling = {{1, 1, 1.0}};
  job.work = 10;
  job.deadline_hours = 8;
  const std::vector<double> I(20, 100);
  const Plan sr = MakePlan(Strategy::kSuspendResume, job, I);
  EXPECT_FALSE(sr.feasible);
  EXPECT_NE(sr.reason.find("80"), std::string::npos) << sr.reason;  // 80% of the work by then
  EXPECT_FALSE(MakePlan(Strategy::kAgnostic, job, I).feasible);
  job.deadline_hours = 12;
  job.carbon_cap_kg = 0.5;  // needs 1 kg
  const Plan capped = MakePlan(Strategy::kSuspendResume, job, I);
  EXPECT_FALSE(capped.feasible);
  EXPECT_NE(capped.reason.find("cap"), std::string::npos);
  EXPECT_NEAR(capped.carbon_kg, 1.0, 1e-9);
  EXPECT_NE(ErrorOf([&] {
              MakePlan(Strategy::kElastic, job, std::vector<double>(3, 1));
            }).find("deadline"),
            std::string::npos);
}

TEST(Planner, WeightedTradesEfficiencyAgainstCarbon) {
  JobSpec job;
  job.base_workers = 1;
  job.scaling = ScalingCurve(1, 4, 1, 1.0, 0.1, 0.7);
  job.work = 4;
  job.deadline_hours = 8;
  const std::vector<double> I = {400, 100, 400, 400, 400, 400, 400, 400};
  PlanOptions carbon_only;
  carbon_only.weights = {0, 1, 0};
  PlanOptions efficiency_only;
  efficiency_only.weights = {1, 0, 0};
  const Plan c = MakePlan(Strategy::kWeighted, job, I, carbon_only);
  const Plan e = MakePlan(Strategy::kWeighted, job, I, efficiency_only);
  EXPECT_LE(c.carbon_kg, e.carbon_kg);
  EXPECT_LE(e.energy_kwh, c.energy_kwh);
  for (const PlanSlot& s : e.slots) EXPECT_EQ(s.workers, 1);  // no scaling loss at all
}

TEST(BatchController, FollowsTheSeedRule) {
  BatchControlConfig c;
  c.carbon_cap_kg = 1.0;
  c.min_batch = 32;
  c.max_batch = 512;
  // 1000 samples left at 1 Wh each = 1 kWh for the 1 kg left: threshold 1000 g/kWh.
  BatchDecision d = DecideBatch(c, 128, 0, 1000, 0.001, 1400);
  EXPECT_DOUBLE_EQ(d.threshold_gco2, 1000);
  EXPECT_EQ(d.batch, 96);
  EXPECT_DOUBLE_EQ(d.lr_scale, 0.75);
  EXPECT_TRUE(d.alert);  // projected 1.4 kg
  d = DecideBatch(c, 128, 0, 1000, 0.001, 600);
  EXPECT_EQ(d.batch, 160);
  EXPECT_FALSE(d.alert);
  EXPECT_EQ(DecideBatch(c, 128, 0, 1000, 0.001, 1000).batch, 128);
  EXPECT_EQ(DecideBatch(c, 500, 0, 1000, 0.001, 100).batch, 512);  // clamped
  EXPECT_TRUE(DecideBatch(c, 128, 0.9, 100, 0.001, 500).alert);    // 0.95 of the cap projected
  EXPECT_NE(ErrorOf([&] { DecideBatch(BatchControlConfig{}, 128, 0, 1, 1, 1); }).find("cap"),
            std::string::npos);
}

TEST(EnergyMeters, RaplHandlesCounterWrapAroundOnAFakeSysfsTree) {
  const std::string root = TempDir("rapl");
  Write(root + "/intel-rapl:0/name", "package-0\n");
  Write(root + "/intel-rapl:0/max_energy_range_uj", "1000000\n");
  Write(root + "/intel-rapl:0/energy_uj", "900000\n");
  Write(root + "/intel-rapl:0/intel-rapl:0:0/name", "core\n");
  Write(root + "/intel-rapl:0:0/name", "core\n");
  Write(root + "/intel-rapl:0:0/max_energy_range_uj", "1000000\n");
  Write(root + "/intel-rapl:0:0/energy_uj", "5\n");
  Write(root + "/intel-rapl:0:1/name", "dram\n");
  Write(root + "/intel-rapl:0:1/max_energy_range_uj", "1000000\n");
  Write(root + "/intel-rapl:0:1/energy_uj", "0\n");
  auto m = OpenRaplMeter(root);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->covers_ram());
  EXPECT_FALSE(m->modelled());
  Write(root + "/intel-rapl:0/energy_uj", "100000\n");  // wrapped: +200000 uJ
  Write(root + "/intel-rapl:0:1/energy_uj", "50000\n");
  EnergyReading r = m->Read();
  EXPECT_DOUBLE_EQ(r.cpu_j, 0.2);
  EXPECT_DOUBLE_EQ(r.ram_j, 0.05);
  Write(root + "/intel-rapl:0/energy_uj", "400000\n");
  EXPECT_DOUBLE_EQ(m->Read().cpu_j, 0.5);
  EXPECT_FALSE(OpenRaplMeter(root + "/missing"));
  fs::remove_all(root);
}

TEST(EnergyMeters, ModelMeterScalesTheProfileByMeasuredUtilisation) {
  const std::string proc = TempDir("proc");
  auto stat = [&](long busy, long idle) {
    Write(proc + "/stat", "cpu  " + std::to_string(busy) + " 0 0 " + std::to_string(idle) +
                              " 0 0 0 0 0 0\ncpu0 1 0 0 1\ncpu1 1 0 0 1\nintr 0\n");
  };
  stat(0, 0);
  Write(proc + "/meminfo", "MemTotal:       4194304 kB\nMemAvailable:   2097152 kB\n");
  ModelMeterOptions o;
  o.proc_root = proc;
  o.cpu = {"test cpu", "cpu", {}, 100, 20, 8, ""};  // 2 of 8 threads: a quarter of the package
  double now = 0;
  o.clock = [&] { return now; };
  auto m = OpenModelMeter(o);
  EXPECT_TRUE(m->modelled());
  EXPECT_NE(m->measures().find("modelled"), std::string::npos);
  stat(300, 100);  // 75% busy over 10 s
  now = 10;
  EnergyReading r = m->Read();
  EXPECT_DOUBLE_EQ(r.cpu_j, 0.25 * (20 + 80 * 0.75) * 10);
  EXPECT_DOUBLE_EQ(r.ram_j, 2 * 0.375 * 10);  // 2 GiB in use
  EXPECT_EQ(ParseNpuSmiPower("        Power Dissipation(W)           : 71.5\n"), 71.5);
  EXPECT_LT(ParseNpuSmiPower("no such card"), 0);
  fs::remove_all(proc);
}

TEST(EnergyMeters, ThisMachineFallsBackToTheModelAndSaysSo) {
  MeterSetOptions o;
  o.profiles_path = kKb + "/hardware_profiles/devices.json";
  o.powercap_root = "/nonexistent/powercap";  // as on this VM, whatever the host has
  MeterSet set(o);
  EXPECT_TRUE(set.any_modelled());
  EXPECT_NE(set.Describe().find("model"), std::string::npos);
  const EnergyReading a = set.Read();
  const EnergyReading b = set.Read();
  EXPECT_GE(b.total(), a.total());
}

TEST(Certificate, VerifyFailsOnAOneByteChangeAndPassesOnTheOriginal) {
  const std::string dir = TempDir("cert");
  const std::string key = dir + "/signing.key";
  const std::string pk = EnsureSigningKey(key);
  struct stat st;
  ASSERT_EQ(stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(EnsureSigningKey(key), pk);  // the same key the second time
  GreenReport r;
  r.run_id = "t1";
  r.carbon_kg = 0.123;
  const std::string report = ReportJson(r);
  const std::string cert = IssueCertificate(report, "report.json", key);
  EXPECT_NE(cert.find("not a certification"), std::string::npos);
  EXPECT_TRUE(VerifyCertificate(report, cert).ok);
  EXPECT_FALSE(VerifyCertificate(report, cert).trusted);  // valid, but nobody vouched for the key
  EXPECT_TRUE(VerifyCertificate(report, cert, {pk}).ok);
  EXPECT_TRUE(VerifyCertificate(report, cert, {pk}).trusted);
  for (size_t at : {size_t{0}, report.size() / 2, report.size() - 1}) {
    std::string changed = report;
    changed[at] = static_cast<char>(changed[at] ^ 1);
    const Verification v = VerifyCertificate(changed, cert);
    EXPECT_FALSE(v.ok);
    EXPECT_NE(v.why.find("changed"), std::string::npos) << v.why;
  }
  EXPECT_FALSE(VerifyCertificate(report, cert, {"AAAA"}).trusted);
  // A trusted-keys file: keys and comments; a line that is not a key is named by file:line.
  Write(dir + "/trusted", "# our signers\n" + pk + "  # the lab's key\n\n");
  EXPECT_EQ(ReadTrustedKeys(dir + "/trusted"), std::vector<std::string>{pk});
  EXPECT_TRUE(ReadTrustedKeys(dir + "/missing").empty());
  Write(dir + "/bad", pk + "\nnot-a-key\n");
  EXPECT_NE(ErrorOf([&] { ReadTrustedKeys(dir + "/bad"); }).find("/bad:2"), std::string::npos);
  EXPECT_EQ(PublicKeyOfExistingKey(key), pk);
  EXPECT_EQ(PublicKeyOfExistingKey(dir + "/no.key"), "");
  EXPECT_FALSE(fs::exists(dir + "/no.key"));
  std::string forged = cert;
  forged[forged.find("\"signature\": \"") + 14] ^= 1;
  EXPECT_FALSE(VerifyCertificate(report, forged).ok);
  EXPECT_FALSE(VerifyCertificate(report, "garbage").ok);
  fs::remove_all(dir);
}

TEST(Report, EmissionsCsvHasCodeCarbonColumnsAndAppends) {
  const std::string dir = TempDir("csv");
  GreenReport r;
  r.run_id = "run,1";
  r.duration_s = 3600;
  r.cpu_kwh = 0.01;
  r.energy_kwh = 0.0158;
  r.carbon_kg = 0.004;
  AppendEmissionsCsv(dir + "/emissions.csv", r);
  AppendEmissionsCsv(dir + "/emissions.csv", r);
  std::ifstream in(dir + "/emissions.csv");
  std::string header, row1, row2, extra;
  std::getline(in, header);
  std::getline(in, row1);
  std::getline(in, row2);
  EXPECT_FALSE(std::getline(in, extra));
  for (const char* col :
       {"timestamp", "project_name", "run_id", "duration", "emissions", "emissions_rate",
        "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy",
        "energy_consumed", "country_iso_code", "region", "pue"})
    EXPECT_NE(header.find(col), std::string::npos) << col;
  EXPECT_NE(row1.find("\"run,1\""), std::string::npos);
  EXPECT_EQ(row1, row2);
  EXPECT_NE(row1.find(",10,"), std::string::npos) << row1;  // cpu_power 10 W
  const std::string html = ReportHtml(r);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);  // self-contained, nothing fetched
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cdt::green
