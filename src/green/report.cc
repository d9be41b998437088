#include "green/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "green/iso_time.h"

namespace cdt::green {
namespace {

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

double Reduction(const GreenReport& r) {
  return r.baseline_carbon_kg > 0 ? 1 - r.carbon_kg / r.baseline_carbon_kg : 0;
}

double SciGramsPerSample(const GreenReport& r) {
  if (r.samples <= 0) return 0;
  const double m = r.lifetime_hours > 0 ? r.embodied_kg * r.reserved_hours / r.lifetime_hours : 0;
  return (r.carbon_kg + m) * 1000.0 / r.samples;
}

std::string ReportJson(const GreenReport& r) {
  using nlohmann::json;
  json j;
  j["report"] =
      "self-attested carbon report following GSF SCI (ISO/IEC 21031:2024) and ISO 14064-style "
      "accounting; not a third-party certification";
  j["project_name"] = r.project_name;
  j["run_id"] = r.run_id;
  j["region"] = r.region;
  j["trace"] = r.trace_source;
  j["trace_start"] = FormatIsoTime(r.trace_start_unix);
  j["time_scale_s_per_hour"] = r.time_scale_s_per_hour;
  j["wall_s"] = r.wall_s;
  j["duration_s"] = r.duration_s;
  j["meter"] = r.meter;
  j["energy_modelled"] = r.modelled;
  j["pue"] = r.pue;
  j["cpu_energy_kwh"] = r.cpu_kwh;
  j["gpu_energy_kwh"] = r.gpu_kwh;
  j["ram_energy_kwh"] = r.ram_kwh;
  j["energy_kwh"] = r.energy_kwh;
  j["carbon_kg"] = r.carbon_kg;
  j["baseline_carbon_kg"] = r.baseline_carbon_kg;
  j["reduction"] = Reduction(r);
  j["carbon_free_energy_ratio"] =
      r.carbon_free_energy_ratio < 0 ? json(nullptr) : json(r.carbon_free_energy_ratio);
  j["samples"] = r.samples;
  j["samples_per_kwh"] = r.energy_kwh > 0 ? r.samples / r.energy_kwh : 0;
  j["sci"] = {{"g_per_sample", SciGramsPerSample(r)},
              {"functional_unit", "one training sample"},
              {"embodied_kg", r.embodied_kg},
              {"lifetime_hours", r.lifetime_hours},
              {"reserved_hours", r.reserved_hours}};
  j["final_test_accuracy"] = r.final_test_accuracy;
  json plan = json::array();
  for (const PlanSlot& s : r.plan.slots)
    plan.push_back({{"start", FormatIsoTime(r.trace_start_unix + 3600.0 * (s.hour + s.offset))},
                    {"hours", s.fraction},
                    {"workers", s.workers},
                    {"energy_kwh", s.energy_kwh},
                    {"carbon_kg", s.carbon_kg}});
  j["plan"] = {{"strategy", r.plan.strategy},
               {"slots", plan},
               {"carbon_kg", r.plan_carbon_kg},
               {"energy_kwh", r.plan.energy_kwh},
               {"feasible", r.plan.feasible}};
  json actual = json::array();
  for (const RunInterval& a : r.actual)
    actual.push_back({{"start", FormatIsoTime(a.start_unix)},
                      {"hours", (a.end_unix - a.start_unix) / 3600.0},
                      {"workers", a.workers},
                      {"energy_kwh", a.energy_kwh},
                      {"carbon_kg", a.carbon_kg}});
  j["actual"] = actual;
  j["plan_vs_actual"] = {
      {"plan_carbon_kg", r.plan_carbon_kg},
      {"actual_carbon_kg", r.carbon_kg},
      {"deviation", r.plan_carbon_kg > 0 ? r.carbon_kg / r.plan_carbon_kg - 1 : 0}};
  j["notes"] = r.notes;
  return j.dump(1) + "\n";
}

std::string EmissionsCsvHeader() {
  return "timestamp,project_name,run_id,duration,emissions,emissions_rate,cpu_power,gpu_power,ram_"
         "power,"
         "cpu_energy,gpu_energy,ram_energy,energy_consumed,country_name,country_iso_code,region,"
         "cloud_provider,"
         "cloud_region,os,python_version,codecarbon_version,cpu_count,cpu_model,gpu_count,gpu_"
         "model,longitude,"
         "latitude,ram_total_size,tracking_mode,on_cloud,pue\n";
}

void AppendEmissionsCsv(const std::string& path, const GreenReport& r) {
  bool fresh = true;
  {
    std::ifstream in(path);
    fresh = !in || in.peek() == std::ifstream::traits_type::eof();
  }
  std::ofstream out(path, std::ios::app);
  if (!out) throw Error(ErrorCode::kIo, "cannot write " + path);
  if (fresh) out << EmissionsCsvHeader();
  // CodeCarbon's units: duration s, emissions kg, emissions_rate kg/s, power W, energy kWh (the
  // components before PUE, energy_consumed after it, as CodeCarbon applies PUE to the total).
  const double h = r.duration_s / 3600.0;
  auto w = [&](double kwh) { return h > 0 ? kwh * 1000.0 / h : 0; };
  std::ostringstream row;
  row.precision(10);
  row << FormatIsoTime(r.timestamp_unix > 0 ? r.timestamp_unix : r.trace_start_unix) << "," << CsvField(r.project_name) << ","
      << CsvField(r.run_id) << "," << r.duration_s << "," << r.carbon_kg << ","
      << (r.duration_s > 0 ? r.carbon_kg / r.duration_s : 0) << "," << w(r.cpu_kwh) << ","
      << w(r.gpu_kwh) << "," << w(r.ram_kwh) << "," << r.cpu_kwh << "," << r.gpu_kwh << ","
      << r.ram_kwh << "," << r.energy_kwh << ",," << CsvField(r.country_iso_code) << ","
      << CsvField(r.region) << ",,,linux,,cann-dist-train,,,,,,,,"
      << (r.modelled ? "machine (modelled)" : "machine") << ",N," << r.pue << "\n";
  out << row.str();
  if (!out.flush()) throw Error(ErrorCode::kIo, "cannot write " + path);
}

std::string ReportHtml(const GreenReport& r) {
  // One SVG: intensity as a step line, plan slots as green bands at the bottom, the actual run as
  // blue bands above them. x = trace hours from the start.
  const double W = 900, H = 300, pad = 40;
  double t0 = r.trace_start_unix, t1 = t0 + 3600;
  for (auto& p : r.intensity) t1 = std::max(t1, p.first + 3600);
  for (auto& a : r.actual) t1 = std::max(t1, a.end_unix);
  double maxi = 1;
  for (auto& p : r.intensity) maxi = std::max(maxi, p.second);
  auto X = [&](double t) { return pad + (W - 2 * pad) * (t - t0) / (t1 - t0); };
  auto Y = [&](double g) { return H - pad - (H - 2 * pad - 40) * g / maxi; };
  std::ostringstream svg;
  svg.precision(6);
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "'>";
  svg << "<rect x='0' y='0' width='" << W << "' height='" << H << "' fill='white'/>";
  for (const PlanSlot& s : r.plan.slots) {
    const double a = t0 + 3600 * (s.hour + s.offset), b = a + 3600 * s.fraction;
    svg << "<rect x='" << X(a) << "' y='" << H - pad + 4 << "' width='"
        << std::max(0.5, X(b) - X(a)) << "' height='10' fill='#2a9d8f'><title>plan: " << s.workers
        << " worker(s)</title></rect>";
  }
  for (const RunInterval& a : r.actual)
    svg << "<rect x='" << X(a.start_unix) << "' y='" << H - pad + 16 << "' width='"
        << std::max(0.5, X(a.end_unix) - X(a.start_unix))
        << "' height='10' fill='#264653'><title>ran: " << a.workers << " worker(s), "
        << a.carbon_kg * 1000 << " g</title></rect>";
  svg << "<polyline fill='none' stroke='#e76f51' stroke-width='1.5' points='";
  for (auto& p : r.intensity)
    svg << X(p.first) << "," << Y(p.second) << " " << X(p.first + 3600) << "," << Y(p.second)
        << " ";
  svg << "'/>";
  svg << "<text x='" << pad << "' y='20' font-size='12'>carbon intensity (gCO2/kWh, max " << maxi
      << "); bands: plan (green), actual run (dark)</text>";
  svg << "<text x='" << pad << "' y='" << H - 4 << "' font-size='11'>" << FormatIsoTime(t0)
      << "</text>";
  svg << "<text x='" << W - pad - 140 << "' y='" << H - 4 << "' font-size='11'>"
      << FormatIsoTime(t1) << "</text>";
  svg << "</svg>";
  std::ostringstream html;
  html << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>cann-dist-train carbon report "
       << Escape(r.run_id)
       << "</title><style>body{font-family:sans-serif;margin:2em}td{padding:2px "
          "10px}</style></head><body>";
  html << "<h1>Carbon report: " << Escape(r.project_name) << " / " << Escape(r.run_id) << "</h1>";
  html << "<p>Self-attested report following GSF SCI (ISO/IEC 21031:2024) and ISO 14064-style "
          "accounting. "
          "It is not a certification by any third party.</p>";
  html << svg.str();
  html << "<table>";
  auto row = [&](const std::string& k, const std::string& v) {
    html << "<tr><td>" << Escape(k) << "</td><td>" << Escape(v) << "</td></tr>";
  };
  char buf[64];
  auto num = [&](double v, const char* fmt) {
    std::snprintf(buf, sizeof buf, fmt, v);
    return std::string(buf);
  };
  row("region / trace", r.region + " / " + r.trace_source);
  row("energy (facility, PUE " + num(r.pue, "%.2f") + ")",
      num(r.energy_kwh * 1000, "%.4f") + " Wh");
  row("meter", r.meter);
  row("carbon", num(r.carbon_kg * 1000, "%.4f") + " g");
  row("carbon-agnostic baseline", num(r.baseline_carbon_kg * 1000, "%.4f") + " g");
  row("reduction", num(100 * Reduction(r), "%.1f") + " %");
  row("plan (" + r.plan.strategy + ")", num(r.plan_carbon_kg * 1000, "%.4f") + " g");
  row("carbon-free energy", r.carbon_free_energy_ratio < 0
                                ? "unknown"
                                : num(100 * r.carbon_free_energy_ratio, "%.1f") + " %");
  row("SCI per sample", num(SciGramsPerSample(r), "%.6g") + " g");
  if (r.final_test_accuracy >= 0)
    row("final test accuracy", num(100 * r.final_test_accuracy, "%.2f") + " %");
  html << "</table>";
  for (const std::string& n : r.notes) html << "<p>" << Escape(n) << "</p>";
  html << "</body></html>\n";
  return html.str();
}

}  // namespace cdt::green
