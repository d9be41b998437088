#include "cli/predict_command.h"

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/file_system.h"
#include "green/carbon_sources.h"
#include "green/iso_time.h"
#include "sim/assessment.h"
#include "sim/run_simulator.h"

namespace cdt::cli {
namespace {

namespace fs = std::filesystem;

// A profile given as a file, or by name from the knowledge base's folder.
std::string ResolveProfile(const std::string& given, const std::string& folder, const char* what) {
  if (fs::exists(given)) return given;
  const std::string named = folder + "/" + given + ".json";
  if (fs::exists(named)) return named;
  std::string names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".json")
      names += (names.empty() ? "" : ", ") + e.path().stem().string();
  throw Error(ErrorCode::kInvalidArgument, std::string("predict: ") + what + " '" + given +
                                               "' is neither a file nor a name in " + folder +
                                               (names.empty() ? "" : " (" + names + ")"));
}

std::string ReadText(const std::string& path, const char* what) {
  return LocalFileSystem().Read(path, kMaxTextFileBytes, what);
}

std::string Si(double v) {  // 5.67M, 187k
  char b[32];
  if (v >= 1e9)
    std::snprintf(b, sizeof b, "%.2fG", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(b, sizeof b, "%.2fM", v / 1e6);
  else if (v >= 1e3)
    std::snprintf(b, sizeof b, "%.1fk", v / 1e3);
  else
    std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

void PrintStep(const sim::RunPrediction& p, const sim::ModelProfile& m,
               const sim::ClusterProfile& c, const sim::StepConfig& s) {
  const sim::StepPrediction& t = p.step;
  std::printf(
      "prediction: %s on %s (%d rank(s) on %d node(s), %s), batch %d per rank, "
      "compression %s\n",
      m.model.c_str(), c.name.c_str(), c.world(), c.nodes(), c.device.c_str(), s.batch,
      s.compress.c_str());
  std::printf(
      "  step %.4f s = compute %.4f s + waiting %.4f s (sync wait %.1f%%, of it "
      "stragglers %.1f ms); communication %.4f s per step, overlap %.2f\n",
      t.step_s, t.compute_s, t.exposed_s, 100 * t.sync_wait_fraction, 1e3 * t.straggler_s, t.comm_s,
      t.overlap);
  std::printf(
      "  throughput %.1f samples/s = %s samples/h; scaling efficiency %.3f (one rank "
      "alone: %.1f samples/s)\n",
      t.samples_per_s, Si(p.samples_per_hour).c_str(), p.scaling_efficiency,
      p.single_rank_samples_per_s);
  std::string algos;
  for (const sim::BucketTiming& b : t.buckets)
    algos += (algos.empty() ? "" : ", ") + Si(b.wire_bytes) + "B " + b.algorithm;
  if (c.world() > 1) std::printf("  buckets (backward order): %s\n", algos.c_str());
}

void PrintRun(const sim::RunPrediction& p, const sim::RunConfig& r) {
  std::printf("  run: %.3f h without failures", p.ideal_hours);
  if (p.system_mtbf_hours > 0) {
    std::printf("; system MTBF %.2f h, %.2f failure(s) expected\n", p.system_mtbf_hours,
                p.expected_failures);
    for (const sim::RecoveryPrediction* x : {&p.ours, &p.restart})
      std::printf(
          "    %s: RTO %.2f s (a dead worker %.3f s, a hung one %.2f s), %.1f s of work "
          "redone per failure%s, run %.3f h (p90 %.3f h), %.3f h lost\n",
          x->strategy.c_str(), x->rto_s, x->rto_crash_s, x->rto_hang_s, x->lost_work_s,
          x->checkpoint_interval_s > 0
              ? (", checkpoint every " + std::to_string(int(x->checkpoint_interval_s)) +
                 " s (Young/Daly), " + std::to_string(x->checkpoint_overhead * 100).substr(0, 4) +
                 "% of the time")
                    .c_str()
              : "",
          x->expected_hours, x->p90_hours, x->lost_hours);
    std::printf("    fault prediction at recall %.0f%%, precision %.0f%%: saves %.4f h\n",
                100 * r.fault_prediction_recall, 100 * r.fault_prediction_precision,
                p.prediction_saved_hours);
  } else {
    std::printf("; no failures modelled (no MTBF: --mtbf-hours or the cluster's \"faults\")\n");
  }
  std::printf("  energy %.3f kWh (facility)", p.energy_kwh);
  if (r.carbon) {
    std::printf(", carbon %.3f kg starting %s", p.carbon_kg,
                green::FormatIsoTime(r.start_unix).c_str());
    if (r.deadline_hours > 0)
      std::printf("; %.3f kg starting %s (best start within %.0f h: %.1f%% less)", p.carbon_best_kg,
                  green::FormatIsoTime(p.best_start_unix).c_str(), r.deadline_hours,
                  p.carbon_kg > 0 ? 100 * (1 - p.carbon_best_kg / p.carbon_kg) : 0.0);
  }
  if (!p.cost_basis.empty()) std::printf("; cost %.2f (%s)", p.cost, p.cost_basis.c_str());
  std::printf("\n");
}

}  // namespace

void AddPredictCommand(CLI::App& app, PredictOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "predict",
      "predict throughput, failures, energy, carbon and cost of a job (docs/predict.md)");
  cmd->add_option("--model", o->model,
                  "model profile: a file, or a name in knowledge_base/model_profiles")
      ->required();
  cmd->add_option("--cluster", o->cluster,
                  "cluster profile: a file, or a name in knowledge_base/cluster_profiles")
      ->required();
  cmd->add_option("--batch-size", o->batch,
                  "samples per rank per step (0 = the profile's largest)");
  cmd->add_option("--compress", o->compress,
                  "a compressor the model profile has costs for, or none")
      ->capture_default_str();
  cmd->add_flag("--overlap-next-forward,!--no-overlap-next-forward", o->overlap_next_forward,
                "updates applied just before the next forward uses them (the trainer's default)");
  cmd->add_option("--algorithm", o->algorithm,
                  "auto (the planner's choice per bucket) or one of ring, rd, rhd, tree, hier")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "samples to train (0 = one hour's worth)");
  cmd->add_option("--mtbf-hours", o->mtbf_hours, "node MTBF in hours (default: the cluster's)");
  cmd->add_option("--trace", o->trace, "carbon-intensity trace (CSV or JSON, docs/green.md)");
  cmd->add_option("--start", o->start, "the run's start on the trace's clock (default: its start)");
  cmd->add_option("--deadline", o->deadline_hours, "hours from --start the run must end by");
  cmd->add_option("--price-trace", o->price_trace,
                  "hourly energy price: CSV timestamp,price_per_kwh");
  cmd->add_option("--fault-recall", o->fault_recall,
                  "share of failures the health monitor announces")
      ->capture_default_str();
  cmd->add_option("--fault-precision", o->fault_precision, "share of its warnings that are real")
      ->capture_default_str();
  cmd->add_option("--trials", o->trials, "Monte Carlo runs of the failure process")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the prediction here");
}

int RunPredict(const PredictOptions& o, const Environment& env) {
  const auto t0 = std::chrono::steady_clock::now();
  const sim::KnowledgeBase kb = sim::LoadKnowledgeBase(env.knowledge_base);
  const std::string mpath =
      ResolveProfile(o.model, env.knowledge_base + "/model_profiles", "--model");
  const std::string cpath =
      ResolveProfile(o.cluster, env.knowledge_base + "/cluster_profiles", "--cluster");
  const sim::ModelProfile model = sim::ParseModelProfile(ReadText(mpath, "model profile"), mpath);
  sim::ClusterProfile cluster =
      sim::ParseClusterProfile(ReadText(cpath, "cluster profile"), cpath, kb);
  if (o.mtbf_hours >= 0) {
    cluster.node_mtbf_hours = o.mtbf_hours;
    cluster.mtbf_source = "--mtbf-hours";
  }
  if (o.fault_recall < 0 || o.fault_recall > 1 || o.fault_precision <= 0 || o.fault_precision > 1)
    throw Error(ErrorCode::kInvalidArgument,
                "predict: --fault-recall must be in [0, 1] and --fault-precision in (0, 1]");
  if (o.trials < 1 || o.trials > 100000)
    throw Error(ErrorCode::kInvalidArgument, "predict: --trials must be 1..100000");
  sim::StepConfig step;
  step.compress = o.compress;
  step.overlap_next_forward = o.overlap_next_forward;
  step.algorithm = o.algorithm;
  step.batch = o.batch;
  if (step.batch <= 0)
    for (const sim::ComputePoint& c : model.compute) step.batch = std::max(step.batch, c.batch);

  sim::RunConfig run;
  run.samples = o.samples;
  run.trials = o.trials;
  run.deadline_hours = o.deadline_hours;
  run.fault_prediction_recall = o.fault_recall;
  run.fault_prediction_precision = o.fault_precision;
  green::CarbonTrace carbon, price;
  if (!o.trace.empty()) {
    carbon = green::ReadCarbonTrace(o.trace);
    run.carbon = &carbon;
    run.start_unix = carbon.start_unix();
    if (!o.start.empty()) {
      const std::optional<double> s = green::ParseIsoTime(o.start);
      if (!s)
        throw Error(ErrorCode::kInvalidArgument,
                    "predict: --start '" + o.start + "' is not ISO 8601");
      run.start_unix = *s;
    }
  } else if (o.deadline_hours > 0 || !o.start.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "predict: --start and --deadline need --trace");
  }
  if (!o.price_trace.empty()) {
    green::TraceReadOptions po;
    po.value_column = "price_per_kwh";
    price = green::ReadCarbonTrace(o.price_trace, po);
    run.price = &price;
    if (!run.carbon) run.start_unix = price.start_unix();
  }
  const sim::RunPrediction p = sim::SimulateRun(model, cluster, step, run);
  PrintStep(p, model, cluster, step);
  PrintRun(p, run);
  std::printf("assumptions:\n");
  for (const std::string& a : p.assumptions) std::printf("  - %s\n", a.c_str());
  std::printf("# predicted in %.2f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!o.json.empty()) WriteFileAtomically(o.json, sim::RunPredictionJson(p, model, cluster, step));
  return 0;
}

void AddAssessCommand(CLI::App& app, AssessOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "assess", "a finished job's maturity level and Green Distributed Index (standards/)");
  cmd->add_option("job", o->job, "the job's JSON (train or elastic --json)")->required();
  cmd->add_option("--green-report", o->green_report, "its green_report.json (green --report-dir)");
  cmd->add_option("--baseline", o->baseline, "a one-rank run of the same model (train --json)");
  cmd->add_option("--json", o->json, "write the assessment here");
}

int RunAssess(const AssessOptions& o) {
  sim::AssessInputs in;
  in.job_json = ReadText(o.job, "job result");
  in.job_where = o.job;
  if (!o.green_report.empty()) {
    in.green_json = ReadText(o.green_report, "carbon report");
    in.green_where = o.green_report;
  }
  if (!o.baseline.empty()) {
    in.baseline_json = ReadText(o.baseline, "baseline result");
    in.baseline_where = o.baseline;
  }
  const sim::Assessment a = sim::Assess(in);
  std::printf("%s: level L%d (standards/DISTRIBUTED_TRAINING_STANDARD.md)\n", o.job.c_str(),
              a.level);
  for (const sim::Criterion& c : a.criteria)
    std::printf("  L%d %s %s: %s\n", c.level, c.met ? "met    " : "not met", c.name.c_str(),
                c.evidence.c_str());
  std::printf(
      "Green Distributed Index %.3f = scaling efficiency %.3f x fault tolerance %.3f x "
      "carbon reduction %.3f\n",
      a.green_distributed_index, a.scaling_efficiency, a.fault_tolerance, a.carbon_reduction);
  std::printf("  scaling efficiency: %s\n  fault tolerance: %s\n  carbon reduction: %s\n",
              a.scaling_basis.c_str(), a.fault_basis.c_str(), a.carbon_basis.c_str());
  if (!o.json.empty()) WriteFileAtomically(o.json, sim::AssessmentJson(a));
  return 0;
}

}  // namespace cdt::cli
