// The planning study of docs/benchmarks.md ("Green: carbon-aware planning on nine grids"): on each
// of the nine 2022 EIA traces, 20 start times spread over the year, one job (24 h on the base
// worker count, 72 h deadline): carbon of carbon-agnostic, suspend-resume and elastic plans, the
// reduction of each against agnostic, whether elastic >= suspend-resume on every case, the
// forecaster's MAPE, and the reduction lost when planning on the forecast instead of the trace.
//   build/bin/green_study [--kb knowledge_base] [--json FILE] [--job-hours 24] [--deadline 72]
//                         [--base 4 --min 1 --max 8 --efficiency 0.9]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/median.h"
#include "green/carbon_sources.h"
#include "green/forecaster.h"
#include "green/iso_time.h"
#include "green/planner.h"

using namespace cdt::green;

using cdt::Median;

namespace {}  // namespace

int main(int argc, char** argv) {
  std::string kb = "knowledge_base", json_path;
  double job_hours = 24, efficiency = 0.9;
  int deadline = 72, base = 4, min_w = 1, max_w = 8, starts = 20;
  ForecastOptions fo;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--kb")
      kb = v;
    else if (a == "--json")
      json_path = v;
    else if (a == "--job-hours")
      job_hours = std::atof(v.c_str());
    else if (a == "--deadline")
      deadline = std::atoi(v.c_str());
    else if (a == "--base")
      base = std::atoi(v.c_str());
    else if (a == "--min")
      min_w = std::atoi(v.c_str());
    else if (a == "--max")
      max_w = std::atoi(v.c_str());
    else if (a == "--efficiency")
      efficiency = std::atof(v.c_str());
    else if (a == "--starts")
      starts = std::atoi(v.c_str());
    else if (a == "--history-days")
      fo.history_days = std::atoi(v.c_str());
    else if (a == "--persistence-hours")
      fo.persistence_hours = std::atof(v.c_str());
    else {
      std::fprintf(stderr, "green_study: unknown option %s\n", a.c_str());
      return 2;
    }
  }
  JobSpec job;
  job.base_workers = base;
  job.deadline_hours = deadline;
  job.scaling =
      ScalingCurve(min_w, max_w, base, 1.0, 0.0003 * base, efficiency);  // 300 W per worker
  job.work = job_hours;  // units: hours on the base count
  std::printf(
      "job: %.0f h on %d workers, deadline %d h, elastic %d..%d workers, %.2f efficiency per "
      "doubling; "
      "%d starts per trace\n",
      job_hours, base, deadline, min_w, max_w, efficiency, starts);
  std::printf("%-5s %6s %5s | %9s %9s %9s | %8s %6s | %7s %9s %9s\n", "grid", "meanCI", "cv",
              "SR red.", "elastic", "el>=SR", "MAPE72h", "", "fc SR", "fc elast.", "loss pts");
  nlohmann::json out = nlohmann::json::array();
  bool all_ok = true;
  std::vector<double> all_loss_sr, all_loss_el;
  for (const char* ba : {"AZPS", "BPAT", "CISO", "ERCO", "MISO", "NYIS", "PJM", "SOCO", "WAAT"}) {
    TraceReadOptions o;
    const CarbonTrace trace =
        ReadCarbonTrace(kb + "/carbon_traces/" + std::string(ba) + "_2022.csv", o);
    double mean = 0, sq = 0;
    for (const CarbonInterval& c : trace.intervals()) mean += c.gco2_per_kwh;
    mean /= static_cast<double>(trace.intervals().size());
    for (const CarbonInterval& c : trace.intervals())
      sq += (c.gco2_per_kwh - mean) * (c.gco2_per_kwh - mean);
    const double cv = std::sqrt(sq / static_cast<double>(trace.intervals().size())) / mean;
    // Starts from day 8 (a week of history for the forecaster) to the last 72 h window.
    const double first = trace.start_unix() + 8 * 86400.0;
    const double span = trace.end_unix() - 3600.0 * deadline - first;
    std::vector<double> red_sr, red_el, red_fsr, red_fel, loss;
    int el_ge_sr = 0;
    double mape_sum = 0;
    nlohmann::json cases = nlohmann::json::array();
    for (int i = 0; i < starts; ++i) {
      const double start =
          first + std::floor(span / starts * i / 3600.0) * 3600.0 + 3600.0 * ((i * 7) % 24);
      const std::vector<double> I = trace.Hourly(start, deadline);
      const Plan ag = MakePlan(Strategy::kAgnostic, job, I);
      const Plan sr = MakePlan(Strategy::kSuspendResume, job, I);
      const Plan el = MakePlan(Strategy::kElastic, job, I);
      const std::vector<double> F = ForecastHourly(trace, start, deadline, fo);
      const Plan fsr = Reprice(MakePlan(Strategy::kSuspendResume, job, F), job, I);
      const Plan fel = Reprice(MakePlan(Strategy::kElastic, job, F), job, I);
      double err = 0;
      for (int h = 0; h < deadline; ++h)
        err += std::abs(F[static_cast<size_t>(h)] - I[static_cast<size_t>(h)]) /
               I[static_cast<size_t>(h)];
      mape_sum += 100 * err / deadline;
      red_sr.push_back(1 - sr.carbon_kg / ag.carbon_kg);
      red_el.push_back(1 - el.carbon_kg / ag.carbon_kg);
      red_fsr.push_back(1 - fsr.carbon_kg / ag.carbon_kg);
      red_fel.push_back(1 - fel.carbon_kg / ag.carbon_kg);
      loss.push_back(100 * (fsr.carbon_kg - sr.carbon_kg) / ag.carbon_kg);
      all_loss_sr.push_back(loss.back());
      all_loss_el.push_back(100 * (fel.carbon_kg - el.carbon_kg) / ag.carbon_kg);
      if (el.carbon_kg <= sr.carbon_kg * (1 + 1e-12)) ++el_ge_sr;
      cases.push_back({{"start", FormatIsoTime(start)},
                       {"agnostic_kg", ag.carbon_kg},
                       {"suspend_resume_kg", sr.carbon_kg},
                       {"elastic_kg", el.carbon_kg},
                       {"forecast_suspend_resume_kg", fsr.carbon_kg},
                       {"forecast_elastic_kg", fel.carbon_kg},
                       {"elastic_note", el.note}});
    }
    all_ok &= el_ge_sr == starts;
    const double mape = mape_sum / starts;
    std::printf(
        "%-5s %6.0f %5.2f | %8.1f%% %8.1f%% %6d/%-2d | %7.1f%% %6s | %6.1f%% %8.1f%% %9.2f\n", ba,
        mean, cv, 100 * Median(red_sr), 100 * Median(red_el), el_ge_sr, starts, mape, "",
        100 * Median(red_fsr), 100 * Median(red_fel), Median(loss));
    out.push_back({{"grid", ba},
                   {"mean_gco2_per_kwh", mean},
                   {"cv", cv},
                   {"median_reduction_suspend_resume", Median(red_sr)},
                   {"median_reduction_elastic", Median(red_el)},
                   {"elastic_ge_suspend_resume", el_ge_sr},
                   {"starts", starts},
                   {"forecast_mape_pct", mape},
                   {"median_reduction_forecast_suspend_resume", Median(red_fsr)},
                   {"median_reduction_forecast_elastic", Median(red_fel)},
                   {"median_forecast_loss_points_suspend_resume", Median(loss)},
                   {"cases", cases}});
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << nlohmann::json{{"median_forecast_loss_points_suspend_resume", Median(all_loss_sr)},
                        {"median_forecast_loss_points_elastic", Median(all_loss_el)},
                        {"elastic_ge_suspend_resume_everywhere", all_ok},
                        {"job_hours", job_hours},
                        {"deadline_hours", deadline},
                        {"base_workers", base},
                        {"min_workers", min_w},
                        {"max_workers", max_w},
                        {"efficiency_per_doubling", efficiency},
                        {"grids", out}}
             .dump(1)
      << "\n";
  }
  std::printf(
      "reduction points lost planning on the forecast, median of all cases: suspend-resume %.2f, "
      "elastic %.2f\n",
      Median(all_loss_sr), Median(all_loss_el));
  std::printf("elastic >= suspend-resume on every case: %s\n", all_ok ? "yes" : "NO");
  return all_ok ? 0 : 1;
}
