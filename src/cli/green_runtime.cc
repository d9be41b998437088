// `green --carbon-aware`: the carbon-aware runner (green/carbon_aware_runner.h) driving `train`
// child processes, one per run: the job interface implemented by this program itself.
#include "cli/green_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/child_process.h"
#include "cli/green_common.h"
#include "common/clock.h"
#include "common/file_io.h"
#include "common/file_system.h"
#include "common/unix_time.h"
#include "green/carbon_aware_runner.h"
#include "green/certificate.h"
#include "green/report.h"

namespace cdt::cli {
namespace {

namespace fs = std::filesystem;

// The train options without `flag VALUE` / `flag=VALUE`; *value gets the last value given.
std::vector<std::string> Without(const std::vector<std::string>& args, const std::string& flag,
                                 std::string* value) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) {
      *value = args[++i];
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      *value = args[i].substr(flag.size() + 1);
    } else {
      out.push_back(args[i]);
    }
  }
  return out;
}

void CheckTrainArgs(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const char* owned :
         {"--checkpoint-dir", "--resume", "--stop-after", "--json", "--elastic"})
      if (a == owned || a.rfind(std::string(owned) + "=", 0) == 0)
        throw Error(ErrorCode::kInvalidArgument,
                    std::string("green --carbon-aware sets ") + owned +
                        " of the training runs itself: drop it from the train options");
}

// The job as `train` child processes of this program: each run is `train <the user's train
// options> --nproc-per-node W --batch-size B --checkpoint-dir ... [--resume] [--stop-after N]
// --json ...`, whose JSON result is read back. The runner's requests are typed; they become
// arguments only here.
class ChildProcessJob : public green::CarbonAwareJob {
 public:
  ChildProcessJob(std::string exe, std::vector<std::string> train, fs::path work)
      : exe_(std::move(exe)), train_(std::move(train)), work_(std::move(work)) {}

  green::RunResult Run(const green::RunRequest& r, const std::function<void()>& tick) override {
    const std::string json = (work_ / (r.tag + ".json")).string();
    std::vector<std::string> args = {"train"};
    args.insert(args.end(), train_.begin(), train_.end());
    const std::string dir = r.calibration ? (work_ / r.tag).string() : checkpoint_location();
    for (const std::string& a :
         {std::string("--nproc-per-node"), std::to_string(r.workers), std::string("--batch-size"),
          std::to_string(r.batch), std::string("--checkpoint-dir"), dir})
      args.push_back(a);
    if (r.calibration) {
      args.insert(args.end(), {"--stop-after", std::to_string(r.stop_after), "--eval-every",
                               std::to_string(r.eval_every), "--json", json, "--no-progress"});
    } else {
      args.insert(args.end(), {"--json", json});
      if (r.resume) args.push_back("--resume");
      if (r.stop_after > 0) args.insert(args.end(), {"--stop-after", std::to_string(r.stop_after)});
    }
    if (const int rc = RunMetered(args, tick); rc != 0)
      throw Error(ErrorCode::kIo,
                  r.calibration ? "green: the calibration run on " + std::to_string(r.workers) +
                                      " worker(s) failed (exit " + std::to_string(rc) +
                                      "); its output is above"
                                : "green: training " + RunName(r.tag) + " failed (exit " +
                                      std::to_string(rc) + "); the checkpoint in " +
                                      checkpoint_location() + " holds the last completed run");
    return ReadResult(json);
  }
  std::string checkpoint_location() const override { return (work_ / "checkpoints").string(); }

 private:
  static std::string RunName(const std::string& tag) {  // "run-2" -> "run 2"
    std::string s = tag;
    std::replace(s.begin(), s.end(), '-', ' ');
    return s;
  }
  int RunMetered(const std::vector<std::string>& args, const std::function<void()>& tick) {
    return RunChild(exe_, args, tick, "green");
  }
  static green::RunResult ReadResult(const std::string& path) {
    const std::optional<std::string> text = LocalFileSystem().ReadIfExists(path, kMaxTextFileBytes);
    if (!text) throw Error(ErrorCode::kIo, "green: the training run wrote no " + path);
    const nlohmann::json j = nlohmann::json::parse(*text);
    green::RunResult r;
    r.first_step = j.at("first_step").get<int64_t>();
    r.steps = j.at("steps").get<int64_t>();
    r.total_steps = j.at("total_steps").get<int64_t>();
    r.samples = j.at("samples").get<double>();
    r.wall_s = j.at("wall_s").get<double>();
    r.eval_s = j.value("eval_s", 0.0);
    r.started_unix = j.value("started_unix", 0.0);
    r.test_accuracy = j["test_accuracy"].is_number() ? j["test_accuracy"].get<double>() : -1;
    return r;
  }

  std::string exe_;
  std::vector<std::string> train_;
  fs::path work_;
};

void WriteReports(const GreenOptions& o, const Environment& env, const green::GreenReport& r) {
  const fs::path dir = o.report_dir;
  const std::string report_json = (dir / "green_report.json").string();
  const std::string report_text = green::ReportJson(r);
  WriteFileAtomically(report_json, report_text);
  WriteFileAtomically((dir / "green_report.html").string(), green::ReportHtml(r));
  green::AppendEmissionsCsv((dir / "emissions.csv").string(), r);
  if (!o.json.empty()) fs::copy_file(report_json, o.json, fs::copy_options::overwrite_existing);
  std::printf(
      "cann-dist-train green: %.4f kWh, %.3f g CO2 (plan %.3f g, %+.1f%%); carbon-agnostic %.3f g: "
      "%.1f%% less; test accuracy %s\n",
      r.energy_kwh, r.carbon_kg * 1000, r.plan_carbon_kg * 1000,
      r.plan_carbon_kg > 0 ? 100 * (r.carbon_kg / r.plan_carbon_kg - 1) : 0.0,
      r.baseline_carbon_kg * 1000, 100 * green::Reduction(r),
      r.final_test_accuracy >= 0 ? std::to_string(r.final_test_accuracy).c_str() : "not evaluated");
  std::printf(
      "cann-dist-train green: reports in %s (green_report.json, green_report.html, "
      "emissions.csv)\n",
      dir.string().c_str());
  if (!o.certify) return;
  const fs::path key_dir = fs::path(env.signing_key).parent_path();
  if (!key_dir.empty()) fs::create_directories(key_dir);
  const std::string pk = green::EnsureSigningKey(env.signing_key);
  // The bytes written above, not what a read of the file returns (an empty string, once, when
  // the read failed).
  WriteFileAtomically(report_json + ".cert",
                      green::IssueCertificate(report_text, "green_report.json", env.signing_key));
  std::printf(
      "cann-dist-train green: signed %s.cert (Ed25519, key %s); a self-attested report, not a "
      "certification\n",
      report_json.c_str(), pk.c_str());
}

}  // namespace

int RunCarbonAware(const GreenOptions& o, const Environment& env) {
  green::ParseStrategy(o.strategy);
  if (o.train_args.empty())
    throw Error(ErrorCode::kInvalidArgument, "green --carbon-aware needs train options after --");
  CheckTrainArgs(o.train_args);
  // The runner owns the worker count and the batch of each run.
  std::string nproc = "1", batch_text = "64", nnodes = "1";
  std::vector<std::string> train =
      Without(Without(o.train_args, "--nproc-per-node", &nproc), "--batch-size", &batch_text);
  Without(train, "--nnodes", &nnodes);
  green::CarbonAwareOptions co;
  co.base_workers = std::atoi(nproc.c_str());
  co.batch = std::atoi(batch_text.c_str());
  co.min_workers = o.min_workers > 0 ? o.min_workers : co.base_workers;
  co.max_workers = o.max_workers > 0 ? o.max_workers : co.base_workers;
  co.calibrate_steps = o.calibrate_steps;
  co.time_scale = o.time_scale;
  co.pue = o.pue;
  co.deadline_hours = o.deadline;
  co.green_priority = o.green_priority;
  co.carbon_cap_kg = o.carbon_cap_kg;
  co.min_batch = o.min_batch;
  co.max_batch = o.max_batch;
  co.embodied_kg = o.embodied_kg;
  co.lifetime_years = o.lifetime_years;
  co.replan_hours = o.replan_hours;
  green::ValidateCarbonAwareOptions(co);
  if (nnodes != "1" && (co.min_workers != co.base_workers || co.max_workers != co.base_workers))
    throw Error(ErrorCode::kInvalidArgument,
                "green --carbon-aware resizes jobs on one node (--nproc-per-node); "
                "this one has --nnodes " +
                    nnodes);
  const green::CarbonTrace trace = LoadGreenTrace(o, env);
  co.start_unix = GreenStart(o, trace);
  co.run_id = !o.run_id.empty() ? o.run_id
                                : "green-" + std::to_string(static_cast<long long>(UnixSeconds())) +
                                      "-" + std::to_string(getpid());
  const fs::path work = fs::path(o.report_dir) / co.run_id;
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec)
    throw Error(ErrorCode::kIo, "green: cannot create " + work.string() + " (" + ec.message() +
                                    "); pass another --report-dir");

  green::MeterSetOptions mo;
  mo.profiles_path = env.knowledge_base + "/hardware_profiles/devices.json";
  green::MeterSet meter(mo);
  std::printf("cann-dist-train green: energy meter: %s\n", meter.Describe().c_str());

  GreenOptions po = o;  // what the planning helpers read
  po.workers = co.base_workers;
  po.min_workers = co.min_workers;
  po.max_workers = co.max_workers;
  co.say = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  co.show_plan = [&](const green::JobSpec& spec, double power_kw, const green::Plans& plans) {
    PrintGreenPlan(po, trace, co.start_unix, GreenJob{spec, power_kw, !(power_kw > 0)}, plans);
  };
  ChildProcessJob job(env.self_exe, train, work);
  SystemClock clock;
  const green::GreenReport r = green::RunCarbonAware(job, trace, meter, clock, co,
                                                     [&](const green::JobSpec& spec, double start) {
                                                       return PlanGreenJob(po, trace, start, spec);
                                                     });
  WriteReports(o, env, r);
  return 0;
}

}  // namespace cdt::cli
