// Re-planning on the newest forecast (docs/benchmarks.md, "Green: re-planning every hour"): the
// carbon-aware runner itself (src/green/carbon_aware_runner.h) follows a job of --job-hours of
// stepping under a --deadline on each of the nine 2022 EIA traces from --starts start times spread
// over the year, on a simulated clock (tests/common/simulated_job.h: steps advance the clock, no
// training), three ways:
//   once    planned once on the forecast made at the start (green --forecast --replan-every 0)
//   hourly  re-planned every trace hour while paused and after each run, on the forecast made
//           then (green --forecast --replan-every 1)
//   oracle  planned once on the trace itself (what a perfect forecast would allow)
// Carbon is priced on the trace over the hours the job actually ran (grams per kW, so the meter's
// power cancels out), against the carbon-agnostic job (the same running hours from the start).
// Prints each way's median reduction and the share of the oracle's reduction it reaches.
//   build/bin/replan_study [--kb knowledge_base] [--job-hours 8] [--deadline 24] [--starts 12]
//                          [--json FILE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/median.h"
#include "green/carbon_aware_runner.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"
#include "green/trace_plan.h"
#include "simulated_job.h"

using namespace cdt::green;

using cdt::Median;

namespace {

struct Outcome {
  double grams_per_kw = 0, baseline_grams_per_kw = 0;
  int replans = 0;
};

// One run of the runner on `trace` from `start`; `forecast`: plan on the forecaster,
// `replan_hours` > 0: revise the plan that often.
Outcome Follow(const CarbonTrace& trace, double start, double job_hours, int deadline,
               bool forecast, double replan_hours, const std::string& kb) {
  cdt::testing::FakeClock clock;
  constexpr double kStepS = 3.6;  // 1,000 steps per trace hour at --time-scale 3600
  cdt::testing::SimulatedJob job(clock, static_cast<int64_t>(job_hours * 1000), kStepS);
  MeterSetOptions mo;
  mo.profiles_path = kb + "/hardware_profiles/devices.json";
  mo.try_hardware = false;
  MeterSet meter(mo);
  CarbonAwareOptions o;
  o.start_unix = start;
  o.deadline_hours = deadline;
  o.calibrate_steps = 30;
  o.replan_hours = replan_hours;
  o.run_id = "replan-study";
  TracePlanOptions t;
  t.forecast = forecast;
  t.plan.contiguous_partial = true;
  Outcome out;
  const GreenReport r =
      RunCarbonAware(job, trace, meter, clock, o, [&](const JobSpec& spec, double from) {
        if (from != start) ++out.replans;
        return PlanOnTrace(trace, from, spec, t);
      });
  double hours = 0;
  for (const RunInterval& a : r.actual) {
    out.grams_per_kw += trace.GramsPerKw(a.start_unix, a.end_unix);
    hours += (a.end_unix - a.start_unix) / 3600;
  }
  out.baseline_grams_per_kw = trace.GramsPerKw(start, start + hours * 3600);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kb = "knowledge_base", json;
  double job_hours = 8;
  int deadline = 24, starts = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--kb"))
      kb = argv[i + 1];
    else if (!std::strcmp(argv[i], "--job-hours"))
      job_hours = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--deadline"))
      deadline = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--starts"))
      starts = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--json"))
      json = argv[i + 1];
    else {
      std::fprintf(stderr, "replan_study: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const char* grids[] = {"AZPS", "BPAT", "CISO", "ERCO", "MISO", "NYIS", "PJM", "SOCO", "WAAT"};
  std::printf(
      "# %g h of work, %d h deadline, %d starts per grid; reduction against the "
      "carbon-agnostic job, median over the starts\n",
      job_hours, deadline, starts);
  std::printf("%-5s %9s %9s %9s %14s %14s %8s\n", "grid", "once", "hourly", "oracle", "once/oracle",
              "hourly/oracle", "replans");
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> all_once, all_hourly, all_oracle;
  for (const char* grid : grids) {
    const CarbonTrace trace = ReadCarbonTrace(kb + "/carbon_traces/" + grid + "_2022.csv");
    std::vector<double> once, hourly, oracle, replans;
    for (int k = 0; k < starts; ++k) {
      // Whole hours spread over the year, past the forecaster's 14 days of history.
      const double span = trace.end_unix() - trace.start_unix() - (20 + deadline / 24.0) * 86400;
      const double start =
          std::floor((trace.start_unix() + 15 * 86400 + span * k / starts) / 3600) * 3600;
      const Outcome a = Follow(trace, start, job_hours, deadline, true, 0, kb);
      const Outcome b = Follow(trace, start, job_hours, deadline, true, 1, kb);
      const Outcome c = Follow(trace, start, job_hours, deadline, false, 0, kb);
      once.push_back(1 - a.grams_per_kw / a.baseline_grams_per_kw);
      hourly.push_back(1 - b.grams_per_kw / b.baseline_grams_per_kw);
      oracle.push_back(1 - c.grams_per_kw / c.baseline_grams_per_kw);
      replans.push_back(b.replans);
    }
    const double mo = Median(once), mh = Median(hourly), mr = Median(oracle);
    all_once.insert(all_once.end(), once.begin(), once.end());
    all_hourly.insert(all_hourly.end(), hourly.begin(), hourly.end());
    all_oracle.insert(all_oracle.end(), oracle.begin(), oracle.end());
    std::printf("%-5s %8.1f%% %8.1f%% %8.1f%% %14.2f %14.2f %8.0f\n", grid, 100 * mo, 100 * mh,
                100 * mr, mr > 0 ? mo / mr : 0, mr > 0 ? mh / mr : 0, Median(replans));
    rows.push_back({{"grid", grid}, {"once", once}, {"hourly", hourly}, {"oracle", oracle}});
  }
  const double mo = Median(all_once), mh = Median(all_hourly), mr = Median(all_oracle);
  std::printf("%-5s %8.1f%% %8.1f%% %8.1f%% %14.2f %14.2f\n", "all", 100 * mo, 100 * mh, 100 * mr,
              mr > 0 ? mo / mr : 0, mr > 0 ? mh / mr : 0);
  if (!json.empty()) {
    std::ofstream(json) << nlohmann::json{{"job_hours", job_hours},
                                          {"deadline", deadline},
                                          {"starts", starts},
                                          {"grids", rows}}
                               .dump(1)
                        << "\n";
  }
  return 0;
}
