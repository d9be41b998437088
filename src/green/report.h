// What a green run reports (docs/green.md): CodeCarbon-compatible emissions.csv rows, a JSON
// report (energy, carbon, the carbon-agnostic baseline, carbon-free share, samples per kWh, GSF
// SCI per sample, plan vs actual) and a self-contained HTML page with the carbon-intensity
// timeline and the plan and the actual run drawn on it. A self-attested report, not a
// certification: certificate.h signs it so that changes show.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "green/planner.h"

namespace cdt::green {

struct RunInterval {  // a stretch the job actually ran, on the trace's clock
  double start_unix = 0, end_unix = 0;
  int workers = 0;
  double energy_kwh = 0, carbon_kg = 0;
};

struct GreenReport {
  std::string project_name = "cann-dist-train", run_id, region, country_iso_code, trace_source;
  double trace_start_unix = 0;          // the plan's hour 0
  double timestamp_unix = 0;            // emissions.csv's timestamp (0 = trace_start_unix)
  double time_scale_s_per_hour = 3600;  // 3600 = real time
  double wall_s = 0;                    // wall time of the whole run
  double duration_s = 0;                // trace-time duration that was accounted
  double pue = 1.0;
  // IT energy by component (kWh, before PUE), and the facility total (after PUE).
  double cpu_kwh = 0, gpu_kwh = 0, ram_kwh = 0, energy_kwh = 0;
  double carbon_kg = 0, baseline_carbon_kg = 0, plan_carbon_kg = 0;
  double carbon_free_energy_ratio = -1;  // -1 = the trace does not say
  double samples = 0;
  // GSF SCI = (E * I + M) per R, R = one sample. M = embodied_kg * reserved_hours / lifetime_hours.
  double embodied_kg = 0, lifetime_hours = 4 * 8760, reserved_hours = 0;
  std::string meter;  // MeterSet::Describe()
  bool modelled = false;
  Plan plan;
  std::vector<RunInterval> actual;
  std::vector<std::pair<double, double>> intensity;  // (unix, gCO2/kWh) hourly, for the timeline
  std::vector<std::string> notes;
  double final_test_accuracy = -1;
};

double Reduction(const GreenReport& r);          // 1 - carbon / baseline (0 without a baseline)
double SciGramsPerSample(const GreenReport& r);  // (E*I + M) / R in grams; 0 without samples

std::string ReportJson(const GreenReport& r);
std::string ReportHtml(const GreenReport& r);
// Appends one row to `path` (writing the header first when the file is new or empty), as
// CodeCarbon does; throws cdt::Error(kIo) naming the file on failure.
void AppendEmissionsCsv(const std::string& path, const GreenReport& r);
std::string EmissionsCsvHeader();

}  // namespace cdt::green
