#include "cli/green_common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/unix_time.h"
#include "green/carbon_provider.h"
#include "green/carbon_sources.h"
#include "green/forecaster.h"
#include "green/iso_time.h"
#include "green/trace_plan.h"

namespace cdt::cli {

namespace {

// --carbon-provider: the provider's forecast from this hour for the deadline's hours (--trace, if
// given, is the forecaster's history when the provider fails; the warning says so).
green::CarbonTrace LoadLiveForecast(const GreenOptions& o, const Environment& env) {
  if (!o.region.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "green: give --carbon-provider or --region, not both (--trace may go with "
                "--carbon-provider: the forecaster over it stands in when the provider fails)");
  if (!o.start.empty())
    throw Error(ErrorCode::kInvalidArgument,
                "green: --carbon-provider plans from now; --start belongs to a trace's past");
  green::CarbonProviderOptions p;
  p.kind = green::ParseCarbonProviderKind(o.carbon_provider);
  p.zone = o.zone;
  p.base_url = env.carbon_url.value_or("");
  p.token = env.carbon_token.value_or("");
  std::optional<green::CarbonTrace> history;
  if (!o.trace.empty()) {
    green::TraceReadOptions r;
    r.gaps = green::ParseGapPolicy(o.gap_policy);
    history = green::ReadCarbonTrace(o.trace, r);
  }
  const int hours = static_cast<int>(std::ceil(o.deadline > 0 ? o.deadline : 3 * o.job_hours));
  if (hours < 1)
    throw Error(ErrorCode::kInvalidArgument,
                "green: --carbon-provider needs --deadline or --job-hours");
  auto provider = green::MakeHttpCarbonProvider(p);
  green::LiveForecast f =
      green::ForecastOrFallBack(*provider, history ? &*history : nullptr, UnixSeconds(), hours);
  if (f.fell_back) {
    std::fprintf(stderr, "cann-dist-train green: warning: %s\n", f.note.c_str());
    f.trace.notes.push_back(f.note);
  }
  return f.trace;
}

}  // namespace

green::CarbonTrace LoadGreenTrace(const GreenOptions& o, const Environment& env) {
  if (!o.carbon_provider.empty()) return LoadLiveForecast(o, env);
  if (!o.trace.empty() && !o.region.empty())
    throw Error(ErrorCode::kInvalidArgument, "green: give --trace or --region, not both");
  if (!o.region.empty())
    return green::ConstantCarbonTrace(o.region,
                                      env.knowledge_base + "/carbon_profiles/annual_average.json");
  if (o.trace.empty())
    throw Error(ErrorCode::kInvalidArgument, "green needs --trace FILE (e.g. " +
                                                 env.knowledge_base +
                                                 "/carbon_traces/CISO_2022.csv) or --region CODE");
  green::TraceReadOptions r;
  r.gaps = green::ParseGapPolicy(o.gap_policy);
  green::CarbonTrace trace = green::ReadCarbonTrace(o.trace, r);
  // The first gaps in full, then how many more (all of them are in the report's notes).
  const size_t shown = std::min<size_t>(trace.notes.size(), 2);
  for (size_t i = 0; i < shown; ++i)
    std::fprintf(stderr, "cann-dist-train green: %s\n", trace.notes[i].c_str());
  if (trace.notes.size() > shown)
    std::fprintf(stderr, "cann-dist-train green: ... and %zu more gap note(s) in %s\n",
                 trace.notes.size() - shown, o.trace.c_str());
  return trace;
}

double GreenStart(const GreenOptions& o, const green::CarbonTrace& trace) {
  if (!o.carbon_provider.empty()) return trace.start_unix();  // this hour: the forecast's first
  if (o.start.empty()) {
    if (trace.constant()) return std::floor(UnixSeconds() / 3600) * 3600;
    // A past year's trace: this hour of that year (the default the journey commands rely on).
    const double start = std::floor(trace.SameMomentOfYear(UnixSeconds()) / 3600) * 3600;
    std::printf(
        "cann-dist-train green: defaults used: --start %s (this hour in the trace's "
        "year; the trace covers %s .. %s)\n",
        green::FormatIsoTime(start).c_str(), green::FormatIsoTime(trace.start_unix()).c_str(),
        green::FormatIsoTime(trace.end_unix()).c_str());
    std::fflush(stdout);
    return start;
  }
  const std::optional<double> t = green::ParseIsoTime(o.start);
  if (!t)
    throw Error(ErrorCode::kInvalidArgument,
                "--start '" + o.start + "' is not an ISO 8601 time like 2022-03-14T05:00:00Z");
  trace.IntensityAt(*t);  // throws with the trace's range when outside
  return *t;
}

GreenJob MakeGreenJob(const GreenOptions& o, double job_hours, double power_kw, int deadline) {
  GreenJob j;
  const int base = o.workers > 0 ? o.workers : (o.min_workers > 0 ? o.min_workers : 1);
  const int lo = o.min_workers > 0 ? o.min_workers : base;
  const int hi = o.max_workers > 0 ? o.max_workers : base;
  j.power_assumed = !(power_kw > 0);
  j.power_kw = power_kw > 0 ? power_kw : 0.3 * base;
  j.spec.base_workers = base;
  j.spec.deadline_hours = deadline;
  j.spec.carbon_cap_kg = o.carbon_cap_kg;
  j.spec.work = job_hours;
  j.spec.scaling = green::ScalingCurve(lo, hi, base, 1.0, j.power_kw, o.scaling_efficiency);
  return j;
}

GreenPlans PlanGreenJob(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                        const green::JobSpec& job) {
  green::TracePlanOptions t;
  t.strategy = green::ParseStrategy(o.strategy);
  t.forecast = o.forecast;
  t.plan.contiguous_partial = o.carbon_aware;  // every running stretch costs a restart at run time
  t.plan.weights = {o.weights.at(0), o.weights.at(1), o.weights.at(2)};
  if (!o.price_trace.empty()) {
    green::TraceReadOptions r;
    r.value_column = "price_per_kwh";
    t.plan.price_per_kwh =
        green::ReadCarbonTrace(o.price_trace, r).Hourly(start, job.deadline_hours);
  }
  try {
    return green::PlanOnTrace(trace, start, job, t);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw Error(e.code(), std::string(e.what()) + " (--start, --deadline)");
  }
}

void PrintGreenPlan(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                    const GreenJob& job, const GreenPlans& p) {
  std::printf(
      "carbon-aware plan (%s%s) on %s [%s], from %s, deadline %d h: %.2f h of work on %d worker(s) "
      "at %.3f kW%s\n",
      p.plan.strategy.c_str(), o.forecast ? ", planned on the forecast" : "",
      trace.source().c_str(), trace.region().c_str(), green::FormatIsoTime(start).c_str(),
      job.spec.deadline_hours, job.spec.work, job.spec.base_workers, job.power_kw,
      job.power_assumed ? " (assumed: pass --power-kw)" : "");
  for (const Stretch& s : Stretches(p.plan))
    std::printf("  run %s  %6.2f h  %2d worker(s)  %8.3f kg\n",
                green::FormatIsoTime(start + 3600 * s.start_h).c_str(), s.hours, s.workers,
                s.carbon_kg);
  const double reduction =
      p.baseline.carbon_kg > 0 ? 1 - p.plan.carbon_kg / p.baseline.carbon_kg : 0;
  std::printf(
      "carbon %.3f kg (%.3f kWh, finishes %.1f h after the start); carbon-agnostic %.3f kg: %.1f%% "
      "less\n",
      p.plan.carbon_kg, p.plan.energy_kwh, p.plan.finish_hours, p.baseline.carbon_kg,
      100 * reduction);
  if (p.forecast_carbon_kg >= 0)
    std::printf("the forecast expected %.3f kg; priced on what the trace says happened: %.3f kg\n",
                p.forecast_carbon_kg, p.plan.carbon_kg);
  if (!p.plan.note.empty()) std::printf("note: %s\n", p.plan.note.c_str());
  if (!p.plan.feasible) std::printf("INFEASIBLE: %s\n", p.plan.reason.c_str());
}

nlohmann::json GreenPlanJson(const GreenOptions& o, const green::CarbonTrace& trace, double start,
                             const GreenJob& job, const GreenPlans& p) {
  nlohmann::json plan = nlohmann::json::array();
  for (const Stretch& s : Stretches(p.plan))
    plan.push_back({{"start", green::FormatIsoTime(start + 3600 * s.start_h)},
                    {"hours", s.hours},
                    {"workers", s.workers},
                    {"carbon_kg", s.carbon_kg},
                    {"energy_kwh", s.energy_kwh}});
  nlohmann::json hourly = nlohmann::json::array();
  for (double x : p.intensity) hourly.push_back(x);
  return {
      {"strategy", p.plan.strategy},
      {"trace", trace.source()},
      {"region", trace.region()},
      {"start", green::FormatIsoTime(start)},
      {"job_hours", job.spec.work},
      {"deadline_hours", job.spec.deadline_hours},
      {"workers", job.spec.base_workers},
      {"power_kw", job.power_kw},
      {"power_assumed", job.power_assumed},
      {"plan", plan},
      {"carbon_kg", p.plan.carbon_kg},
      {"energy_kwh", p.plan.energy_kwh},
      {"baseline_carbon_kg", p.baseline.carbon_kg},
      {"reduction", p.baseline.carbon_kg > 0 ? 1 - p.plan.carbon_kg / p.baseline.carbon_kg : 0.0},
      {"feasible", p.plan.feasible},
      {"reason", p.plan.reason},
      {"note", p.plan.note},
      {"finish_hours", p.plan.finish_hours},
      {"forecast", o.forecast},
      {"forecast_carbon_kg",
       p.forecast_carbon_kg < 0 ? nlohmann::json(nullptr) : nlohmann::json(p.forecast_carbon_kg)},
      {"intensity_gco2_per_kwh", hourly}};
}

void WriteJsonFile(const std::string& path, const nlohmann::json& j) {
  WriteFileAtomically(path, j.dump(1) + "\n");
}

}  // namespace cdt::cli
