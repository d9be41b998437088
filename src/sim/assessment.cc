#include "sim/assessment.h"

#include <algorithm>
#include <cstdio>
#include <memory>

#include "sim/json_read.h"

namespace cdt::sim {
namespace {

std::string Fixed(double v, int digits = 3) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

// A job's ranks: an integer, bounded as the simulator bounds a cluster (100,000 nodes of 1,024).
int WorldSize(const JsonReader& job) {
  return static_cast<int>(job.Integer("world_size", 1, 102400000, 1, true));
}

bool Bool(const JsonReader& r, const char* key) {
  return r.Has(key) && r.json().at(key).is_boolean() && r.json().at(key).get<bool>();
}

void AddCriteria(const JsonReader& job, const JsonReader* green, Assessment* a) {
  const int world = WorldSize(job);
  const bool consistent = Bool(job, "params_consistent");
  a->criteria.push_back({1, "data parallel on >= 2 ranks, replicas identical at the end",
                         world >= 2 && consistent,
                         "world_size " + std::to_string(world) + ", params_consistent " +
                             (consistent ? "true" : "false")});
  const std::string sel = job.String("allreduce_selection", "");
  a->criteria.push_back({2, "allreduce algorithm per message size from the measured topology",
                         sel == "topology-planner",
                         sel.empty() ? "allreduce_selection missing (a run before this field)"
                                     : "allreduce_selection \"" + sel + "\""});
  std::string compressor = "none";
  size_t phases = 0;
  if (job.Has("compression")) {
    const JsonReader c = job.Object("compression");
    compressor = c.String("compressor", "none");
    c.Each("phases", [&](const JsonReader&, const nlohmann::json&) { ++phases; });
  }
  const double overlap = job.Has("comm") ? job.Object("comm").Number("overlap_ratio", 0, 0) : 0;
  a->criteria.push_back({3, "adaptive gradient compression, overlapped with backward",
                         compressor == "adaptive" && phases > 0 && overlap > 0,
                         "compressor " + compressor + ", " + std::to_string(phases) +
                             " phase(s), overlap_ratio " + Fixed(overlap)});
  int recovered = 0;
  job.Each("recoveries", [&](const JsonReader&, const nlohmann::json&) { ++recovered; });
  const bool elastic = Bool(job, "elastic");
  const double written =
      job.Has("checkpoints") ? job.Object("checkpoints").Number("written", 0, 0) : 0;
  a->criteria.push_back(
      {4, "elastic: failures recovered in process, checkpoints written", elastic && written >= 1,
       std::string("elastic ") + (elastic ? "true" : "false") + ", " + std::to_string(recovered) +
           " recovery(ies), " + std::to_string(int(written)) + " checkpoint(s) written"});
  const double energy = job.Has("energy") ? job.Object("energy").Number("joules", 0, 0) : 0;
  const double reduction = green ? green->Number("reduction", -1e9, 0) : 0;
  a->criteria.push_back(
      {5, "green: energy measured per step and carbon cut by planning against a grid trace",
       energy > 0 && green && reduction > 0,
       "energy " + Fixed(energy, 1) + " J" +
           (green ? ", carbon reduction " + Fixed(100 * reduction, 1) + " %"
                  : ", no carbon report (--green-report)")});
}

}  // namespace

Assessment Assess(const AssessInputs& in) {
  Assessment a;
  const nlohmann::json job_doc = JsonReader::Parse(in.job_json, in.job_where);
  const JsonReader job(job_doc, in.job_where);
  nlohmann::json green_doc, base_doc;
  std::unique_ptr<JsonReader> green;
  if (!in.green_json.empty()) {
    green_doc = JsonReader::Parse(in.green_json, in.green_where);
    green = std::make_unique<JsonReader>(green_doc, in.green_where);
    green->Number("carbon_kg", 0, 0, true);
    green->Number("baseline_carbon_kg", 0, 0, true);
  }
  AddCriteria(job, green.get(), &a);
  for (const Criterion& c : a.criteria) {
    if (!c.met) break;
    a.level = c.level;
  }

  // Scaling efficiency.
  const double sps = job.Number("samples_per_s", 0, 0, true);
  const int world = WorldSize(job);
  if (!in.baseline_json.empty()) {
    base_doc = JsonReader::Parse(in.baseline_json, in.baseline_where);
    const JsonReader base(base_doc, in.baseline_where);
    if (base.Number("world_size", 1, 1, true) != 1)
      base.Fail("world_size", "the baseline must be a one-rank run of the same model");
    if (base.String("model", "") != job.String("model", ""))
      base.Fail("model", "the baseline trained '" + base.String("model", "") + "', the job '" +
                             job.String("model", "") + "'");
    const double one = base.Number("samples_per_s", 1e-12, 0, true);
    a.scaling_efficiency = std::min(1.0, sps / (world * one));
    a.scaling_basis = "samples_per_s " + Fixed(sps, 1) + " / (" + std::to_string(world) +
                      " x one rank's " + Fixed(one, 1) + ")";
  } else {
    const double wait = job.Number("sync_wait_fraction", 0, 0);
    a.scaling_efficiency = std::clamp(1 - wait, 0.0, 1.0);
    a.scaling_basis = "1 - sync_wait_fraction " + Fixed(wait) +
                      " (no one-rank baseline given: the share of step time not spent waiting "
                      "for communication)";
  }

  // Fault tolerance.
  if (!Bool(job, "elastic")) {
    a.fault_tolerance = 0;
    a.fault_basis = "not elastic: a failure ends the run";
  } else {
    double lost = 0;
    int n = 0;
    job.Each("recoveries", [&](const JsonReader& r, const nlohmann::json&) {
      lost += r.Number("rto_s", 0, 0, true);
      ++n;
    });
    const double wall = job.Number("wall_s", 1e-9, 0, true);
    a.fault_tolerance = std::clamp(1 - lost / wall, 0.0, 1.0);
    a.fault_basis = "1 - recovery time " + Fixed(lost) + " s over " + std::to_string(n) +
                    " failure(s) / wall " + Fixed(wall, 1) + " s";
  }

  // Carbon reduction.
  if (green) {
    a.carbon_reduction = std::clamp(green->Number("reduction", -1e9, 0), 0.0, 1.0);
    a.carbon_basis = "1 - carbon_kg / baseline_carbon_kg of " + in.green_where;
  } else {
    a.carbon_basis = "no carbon report: 0";
  }
  a.green_distributed_index = a.scaling_efficiency * a.fault_tolerance * a.carbon_reduction;
  return a;
}

std::string AssessmentJson(const Assessment& a) {
  nlohmann::json crit = nlohmann::json::array();
  for (const Criterion& c : a.criteria)
    crit.push_back(
        {{"level", c.level}, {"name", c.name}, {"met", c.met}, {"evidence", c.evidence}});
  nlohmann::json j = {{"format", "cdt-assessment"},
                      {"version", 1},
                      {"level", a.level},
                      {"criteria", crit},
                      {"scaling_efficiency", a.scaling_efficiency},
                      {"scaling_basis", a.scaling_basis},
                      {"fault_tolerance", a.fault_tolerance},
                      {"fault_basis", a.fault_basis},
                      {"carbon_reduction", a.carbon_reduction},
                      {"carbon_basis", a.carbon_basis},
                      {"green_distributed_index", a.green_distributed_index}};
  return j.dump(1) + "\n";
}

}  // namespace cdt::sim
