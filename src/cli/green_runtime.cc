// `green --carbon-aware`: calibrate, plan, follow the plan run by run, account, report.
#include "cli/green_runtime.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/green_common.h"
#include "common/die_with_parent.h"
#include "common/file_io.h"
#include "common/unix_time.h"
#include "green/accounting.h"
#include "green/batch_controller.h"
#include "green/certificate.h"
#include "green/energy_meter.h"
#include "green/iso_time.h"
#include "green/report.h"
#include "green/text.h"

namespace cdt::cli {
namespace {

namespace fs = std::filesystem;

struct Metering {
  green::MeterSet* meter = nullptr;
  green::Timebase tb;
  double pue = 1;
  std::vector<green::EnergySample> samples;  // trace clock, facility joules scaled to real time
  green::EnergyReading it_total;             // IT joules in wall time, by component
  green::EnergyReading last;
  bool running = false;

  void Sample() {
    const green::EnergyReading r = meter->Read();
    if (running) {
      it_total.cpu_j += r.cpu_j - last.cpu_j;
      it_total.gpu_j += r.gpu_j - last.gpu_j;
      it_total.ram_j += r.ram_j - last.ram_j;
    }
    last = r;
    samples.push_back({tb.ToTrace(SteadySeconds()), it_total.total() * pue * tb.Stretch()});
  }
};

// Runs `exe args...`, sampling the meter every 200 ms while it runs. Returns the exit status.
int RunMetered(const std::string& exe, const std::vector<std::string>& args, Metering* m) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  m->Sample();  // a pause ends here: no energy since the last sample
  m->running = true;
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, "green: fork failed");
  if (pid == 0) {
    DieWithParent(parent);  // the workload goes with the meter, however green ends
    execv(exe.c_str(), argv.data());
    std::fprintf(stderr, "cann-dist-train green: cannot run %s\n", exe.c_str());
    _exit(127);
  }
  int status = 0;
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0) throw Error(ErrorCode::kIo, "green: waitpid failed");
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    m->Sample();
  }
  m->Sample();
  m->running = false;
  return WIFEXITED(status) ? WEXITSTATUS(status)
                           : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Cumulative joules at trace time t, interpolated between samples.
double JoulesAt(const std::vector<green::EnergySample>& s, double t) {
  if (s.empty() || t <= s.front().unix_s) return s.empty() ? 0 : s.front().joules;
  for (size_t i = 1; i < s.size(); ++i)
    if (t <= s[i].unix_s) {
      const double f = (t - s[i - 1].unix_s) / std::max(1e-12, s[i].unix_s - s[i - 1].unix_s);
      return s[i - 1].joules + f * (s[i].joules - s[i - 1].joules);
    }
  return s.back().joules;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorCode::kIo, "green: the training run wrote no " + path);
  return nlohmann::json::parse(in);
}

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

// What a short metered run of the job on `workers` workers says.
struct Calibration {
  int workers = 1;
  double step_s = 0, samples_per_step = 0, train_w = 0;          // stepping
  double startup_s = 0, exit_s = 0, eval_s = 0, overhead_w = 0;  // around it
  int64_t total_steps = 0;
  double facility_kwh = 0;  // what the calibration itself used
};

Calibration Calibrate(const std::string& exe, const std::vector<std::string>& train, int workers,
                      int batch, int steps, const fs::path& work, green::MeterSet* meter,
                      double pue) {
  Metering cal;
  cal.meter = meter;
  cal.tb.wall_start = SteadySeconds();
  const std::string tag = "calibration-" + std::to_string(workers);
  const std::string json = (work / (tag + ".json")).string();
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), train.begin(), train.end());
  for (const std::string& a :
       {std::string("--nproc-per-node"), std::to_string(workers), std::string("--batch-size"),
        std::to_string(batch), std::string("--checkpoint-dir"), (work / tag).string(),
        std::string("--stop-after"), std::to_string(steps), std::string("--eval-every"),
        std::to_string(steps), std::string("--json"), json, std::string("--no-progress")})
    args.push_back(a);
  std::printf("cann-dist-train green: calibrating on %d worker(s): %d steps\n", workers, steps);
  std::fflush(stdout);
  const double t0 = SteadySeconds(), t0_unix = UnixSeconds();
  if (const int rc = RunMetered(exe, args, &cal); rc != 0)
    throw Error(ErrorCode::kIo, "green: the calibration run on " + std::to_string(workers) +
                                    " worker(s) failed (exit " + std::to_string(rc) +
                                    "); its output is above");
  const double wall = SteadySeconds() - t0;
  const nlohmann::json j = ReadJson(json);
  Calibration c;
  c.workers = workers;
  const double ran = std::max(1.0, j.at("steps").get<double>()),
               train_wall = j.at("wall_s").get<double>();
  c.step_s = train_wall / ran;
  c.samples_per_step = j.at("samples").get<double>() / ran;
  c.total_steps = j.at("total_steps").get<int64_t>();
  c.eval_s = j.value("eval_s", 0.0);
  // Start-up (processes, libraries, data) comes before the first step: runs are launched that
  // much ahead of their planned start so that training itself starts on time.
  c.startup_s = std::clamp(j.value("started_unix", t0_unix) - t0_unix, 0.0, wall);
  c.exit_s = std::max(0.0, wall - c.startup_s - train_wall - c.eval_s);
  const double a = cal.tb.ToTrace(t0 + c.startup_s);
  const double loop_j = JoulesAt(cal.samples, a + train_wall) - JoulesAt(cal.samples, a);
  const double all_j = cal.samples.empty() ? 0 : cal.samples.back().joules;
  c.train_w = loop_j / std::max(1e-9, train_wall);
  const double around = c.startup_s + c.exit_s + c.eval_s;
  c.overhead_w = around > 0 ? std::max(0.0, all_j - loop_j) / around : c.train_w;
  c.facility_kwh = all_j * pue / 3.6e6;
  std::printf(
      "cann-dist-train green: %d worker(s): %.4f s per step (%.0f samples) at %.1f W (IT); per run "
      "%.2f s "
      "start-up and %.2f s exit, %.2f s evaluation at the end, at %.1f W\n",
      workers, c.step_s, c.samples_per_step, c.train_w, c.startup_s, c.exit_s, c.eval_s,
      c.overhead_w);
  return c;
}

}  // namespace

int RunCarbonAware(const GreenOptions& o, const Environment& env) {
  if (!(o.time_scale > 0))
    throw Error(ErrorCode::kInvalidArgument, "--time-scale must be > 0 seconds per trace hour");
  green::ParseStrategy(o.strategy);
  if (o.train_args.empty())
    throw Error(ErrorCode::kInvalidArgument, "green --carbon-aware needs train options after --");
  CheckTrainArgs(o.train_args);
  // The runtime owns the worker count and the batch of each run.
  std::string nproc = "1", batch_text = "64", nnodes = "1";
  std::vector<std::string> train =
      Without(Without(o.train_args, "--nproc-per-node", &nproc), "--batch-size", &batch_text);
  Without(train, "--nnodes", &nnodes);
  const int base = std::atoi(nproc.c_str()), batch0 = std::atoi(batch_text.c_str());
  const int lo = o.min_workers > 0 ? o.min_workers : base,
            hi = o.max_workers > 0 ? o.max_workers : base;
  if (base < 1 || batch0 < 1 || lo < 1 || lo > base || hi < base)
    throw Error(ErrorCode::kInvalidArgument,
                "green: --min-workers <= --nproc-per-node (" + nproc +
                    ") <= --max-workers, and --batch-size >= 1, are needed");
  if (nnodes != "1" && (lo != base || hi != base))
    throw Error(ErrorCode::kInvalidArgument,
                "green --carbon-aware resizes jobs on one node (--nproc-per-node); "
                "this one has --nnodes " +
                    nnodes);
  const green::CarbonTrace trace = LoadGreenTrace(o, env);
  const double start = GreenStart(o, trace);
  const std::string run_id =
      !o.run_id.empty() ? o.run_id
                        : "green-" + std::to_string(static_cast<long long>(UnixSeconds())) + "-" +
                              std::to_string(getpid());
  const fs::path dir = o.report_dir;
  const fs::path work = dir / run_id;
  std::error_code ec;
  fs::create_directories(work, ec);
  if (ec)
    throw Error(ErrorCode::kIo, "green: cannot create " + work.string() + " (" + ec.message() +
                                    "); pass another --report-dir");

  green::MeterSetOptions mo;
  mo.profiles_path = env.knowledge_base + "/hardware_profiles/devices.json";
  green::MeterSet meter(mo);
  std::printf("cann-dist-train green: energy meter: %s\n", meter.Describe().c_str());

  // 1. Calibrate every worker count the plan may use.
  std::map<int, Calibration> cal;
  double cal_kwh = 0;
  cal[base] = Calibrate(env.self_exe, train, base, batch0, o.calibrate_steps, work, &meter, o.pue);
  for (int w = lo; w <= hi; ++w)
    if (!cal.count(w))
      cal[w] = Calibrate(env.self_exe, train, w, batch0, o.calibrate_steps, work, &meter, o.pue);
  for (auto& [w, c] : cal) cal_kwh += c.facility_kwh;
  const Calibration& b = cal.at(base);

  // 2. The plan. Each running stretch is one more start-up and exit: plan, count the stretches,
  // re-plan with their time and energy until the count settles. Work is in hours on `base`.
  GreenOptions po = o;
  po.workers = base;
  po.min_workers = lo;
  po.max_workers = hi;
  const double stepping_s = static_cast<double>(b.total_steps) * b.step_s;
  const double run_overhead_s = b.startup_s + b.exit_s;
  GreenJob job;
  GreenPlans plans;
  size_t runs = 1;
  for (int round = 0; round < 4; ++round) {
    const double extra_s = static_cast<double>(runs) * run_overhead_s + b.eval_s;
    const double share = extra_s / (stepping_s + extra_s);  // of the job's time spent around steps
    auto kw = [&](const Calibration& c) {
      return ((1 - share) * c.train_w + share * c.overhead_w) * o.pue / 1000;
    };
    const double job_hours = (stepping_s + extra_s) / o.time_scale;
    const int deadline = static_cast<int>(std::ceil(o.deadline > 0 ? o.deadline : 3 * job_hours));
    job = MakeGreenJob(po, job_hours, kw(b), std::max(1, deadline));
    job.spec.scaling.clear();  // measured, not modelled: samples per second relative to `base`
    for (const auto& [w, c] : cal)
      job.spec.scaling.push_back(
          {w, (c.samples_per_step / c.step_s) / (b.samples_per_step / b.step_s), kw(c)});
    plans = PlanGreenJob(po, trace, start, job.spec);
    const size_t n = std::max<size_t>(1, Stretches(plans.plan).size());
    if (n == runs) break;
    runs = n;
  }
  std::vector<std::string> notes;
  std::printf(
      "cann-dist-train green: the job's %lld steps = %.2f trace hours on %d worker(s), planned in "
      "%zu run(s) "
      "at --time-scale %g\n",
      static_cast<long long>(b.total_steps), job.spec.work, base, runs, o.time_scale);
  if (!plans.plan.feasible && !o.green_priority && plans.baseline.feasible) {
    notes.push_back(
        "the " + plans.plan.strategy + " plan is infeasible (" + plans.plan.reason +
        "); running without pauses instead (--green-priority follows the cleanest plan anyway)");
    std::printf("cann-dist-train green: %s\n", notes.back().c_str());
    plans.plan = plans.baseline;
  }
  PrintGreenPlan(po, trace, start, job, plans);

  // 3. Follow it: one training run per stretch; the checkpoint carries the job across pauses and
  // worker counts (the sampler's global position re-partitions the remaining samples).
  Metering m;
  m.meter = &meter;
  m.pue = o.pue;
  m.tb.wall_start = SteadySeconds();
  m.tb.trace_start = start;
  m.tb.seconds_per_hour = o.time_scale;
  std::vector<green::RunInterval> actual;
  const std::vector<Stretch> stretches = Stretches(plans.plan);
  int64_t step = 0, total_steps = b.total_steps;
  int batch = batch0;
  double job_samples = 0;
  nlohmann::json last_run;
  green::BatchControlConfig bc;
  bc.carbon_cap_kg = o.carbon_cap_kg;
  bc.min_batch = o.min_batch > 0 ? o.min_batch : std::max(1, batch0 / 4);
  bc.max_batch = o.max_batch > 0 ? o.max_batch : batch0 * 4;
  const bool control_batch = o.carbon_cap_kg > 0;
  for (size_t i = 0; step < total_steps; ++i) {
    const bool planned = i < stretches.size();
    const bool last = i + 1 >= stretches.size();
    const int workers = planned ? stretches[i].workers : base;
    const Calibration& c = cal.count(workers) ? cal.at(workers) : b;
    if (planned) {
      const double begin = m.tb.ToWall(start + 3600 * stretches[i].start_h) - c.startup_s;
      if (begin > SteadySeconds()) {
        std::printf(
            "cann-dist-train green: paused (checkpoint at step %lld on disk) until %s, %.1f s\n",
            static_cast<long long>(step),
            green::FormatIsoTime(start + 3600 * stretches[i].start_h).c_str(),
            begin - SteadySeconds());
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(begin - SteadySeconds()));
      }
    } else {
      notes.push_back("the plan's stretches ended at step " + std::to_string(step) +
                      " (the job ran slower than calibrated); ran on to the end at once");
    }
    const double now_trace = m.tb.ToTrace(SteadySeconds());
    if (control_batch) {  // the seed's rule, once per run (docs/green.md)
      const double spent = green::Account(trace, m.samples).carbon_kg;
      const double kwh_per_sample =
          c.train_w * o.pue * c.step_s / c.samples_per_step / 3.6e6 * m.tb.Stretch();
      const double remaining =
          static_cast<double>(total_steps - step) * c.samples_per_step * batch / batch0;
      const green::BatchDecision d = green::DecideBatch(bc, batch, spent, remaining, kwh_per_sample,
                                                        trace.IntensityAt(now_trace));
      if (d.batch != batch || d.alert) {
        notes.push_back("run " + std::to_string(i) + ": batch " + std::to_string(batch) + " -> " +
                        std::to_string(d.batch) + " (" + d.reason + ", threshold " +
                        std::to_string(d.threshold_gco2) + " g/kWh)" +
                        (d.alert ? "; ALERT: projected " + std::to_string(d.projected_kg) +
                                       " kg reaches 95% of the cap"
                                 : std::string()));
        std::printf("cann-dist-train green: %s\n", notes.back().c_str());
      }
      batch = d.batch;
    }
    // Steps for this stretch on `workers` at `batch` (the step time scales with the batch).
    const double step_s = c.step_s * batch / batch0;
    int64_t stop = total_steps;
    if (planned && !last) {
      const double stepping = stretches[i].hours * o.time_scale - (c.startup_s + c.exit_s);
      stop = std::min(total_steps, step + std::max<int64_t>(1, std::llround(stepping / step_s)));
    }
    std::vector<std::string> run = {"train"};
    run.insert(run.end(), train.begin(), train.end());
    const std::string run_json = (work / ("run-" + std::to_string(i) + ".json")).string();
    for (const std::string& a :
         {std::string("--nproc-per-node"), std::to_string(workers), std::string("--batch-size"),
          std::to_string(batch), std::string("--checkpoint-dir"), (work / "checkpoints").string(),
          std::string("--json"), run_json})
      run.push_back(a);
    if (step > 0) run.push_back("--resume");
    if (stop < total_steps) {
      run.push_back("--stop-after");
      run.push_back(std::to_string(stop));
    }
    const double j0 = m.samples.empty() ? 0 : m.samples.back().joules;
    std::printf(
        "cann-dist-train green: running steps %lld..%lld on %d worker(s) at %s (trace time)\n",
        static_cast<long long>(step), static_cast<long long>(stop - 1), workers,
        green::FormatIsoTime(now_trace).c_str());
    std::fflush(stdout);
    if (const int rc = RunMetered(env.self_exe, run, &m); rc != 0)
      throw Error(ErrorCode::kIo, "green: training run " + std::to_string(i) + " failed (exit " +
                                      std::to_string(rc) + "); the checkpoint in " +
                                      (work / "checkpoints").string() +
                                      " holds the last completed run");
    last_run = ReadJson(run_json);
    // What this run measured replaces the calibration for the stretches still to come.
    if (const double ran = last_run.at("steps").get<double>(); ran >= 20 && cal.count(workers))
      cal[workers].step_s = last_run.at("wall_s").get<double>() / ran * batch0 / batch;
    step = last_run.at("first_step").get<int64_t>() + last_run.at("steps").get<int64_t>();
    total_steps = last_run.at("total_steps").get<int64_t>();  // changes with the global batch
    job_samples += last_run.at("samples").get<double>();
    green::RunInterval ri;
    ri.start_unix = now_trace;
    ri.end_unix = m.samples.back().unix_s;
    ri.workers = workers;
    ri.energy_kwh = (m.samples.back().joules - j0) / 3.6e6;
    actual.push_back(ri);
  }

  // 4. Account and report.
  const green::CarbonAccount acc = green::Account(trace, m.samples);
  green::GreenReport r;
  r.run_id = run_id;
  r.region = trace.region();
  r.trace_source = trace.source();
  r.trace_start_unix = start;
  r.time_scale_s_per_hour = o.time_scale;
  r.wall_s = SteadySeconds() - m.tb.wall_start;
  r.pue = o.pue;
  r.cpu_kwh = m.it_total.cpu_j * m.tb.Stretch() / 3.6e6;
  r.gpu_kwh = m.it_total.gpu_j * m.tb.Stretch() / 3.6e6;
  r.ram_kwh = m.it_total.ram_j * m.tb.Stretch() / 3.6e6;
  r.energy_kwh = acc.energy_kwh;
  r.carbon_kg = acc.carbon_kg;
  r.carbon_free_energy_ratio =
      acc.carbon_free_known && acc.energy_kwh > 0 ? acc.carbon_free_kwh / acc.energy_kwh : -1;
  double run_hours = 0;
  for (green::RunInterval& a : actual) {
    run_hours += (a.end_unix - a.start_unix) / 3600.0;
    std::vector<green::EnergySample> inside;
    for (const green::EnergySample& s : m.samples)
      if (s.unix_s >= a.start_unix - 1e-6 && s.unix_s <= a.end_unix + 1e-6) inside.push_back(s);
    a.carbon_kg = green::Account(trace, inside).carbon_kg;
  }
  r.duration_s = run_hours * 3600;
  // The carbon-agnostic baseline: the same energy over the same running time, from the start.
  r.baseline_carbon_kg =
      run_hours > 0
          ? acc.energy_kwh / run_hours * trace.GramsPerKw(start, start + run_hours * 3600) / 1000
          : 0;
  r.plan_carbon_kg = plans.plan.carbon_kg;
  r.samples = job_samples;
  r.reserved_hours = run_hours;
  r.embodied_kg = o.embodied_kg;
  r.lifetime_hours = o.lifetime_years * 8760;
  r.meter = meter.Describe();
  r.modelled = meter.any_modelled();
  r.plan = plans.plan;
  r.actual = actual;
  for (int h = 0; h < static_cast<int>(plans.intensity.size()); ++h)
    r.intensity.push_back({start + 3600.0 * h, plans.intensity[static_cast<size_t>(h)]});
  r.final_test_accuracy =
      last_run["test_accuracy"].is_number() ? last_run["test_accuracy"].get<double>() : -1;
  notes.push_back("calibration (not in the totals): " + std::to_string(cal.size()) + " run(s) of " +
                  std::to_string(o.calibrate_steps) + " steps, " + std::to_string(cal_kwh * 1000) +
                  " Wh facility energy in wall time");
  notes.push_back(std::string("energy is ") +
                  (r.modelled ? "modelled (no hardware counter here): " : "measured: ") + r.meter);
  if (o.time_scale != 3600)
    notes.push_back("time-scaled run: one trace hour lasted " + std::to_string(o.time_scale) +
                    " s; energy scaled by " + std::to_string(3600 / o.time_scale) +
                    " to real time");
  for (const std::string& n : trace.notes) notes.push_back(n);
  r.notes = notes;
  if (r.embodied_kg <= 0)
    r.notes.push_back("SCI without embodied emissions: pass --embodied-kg to include M");

  const std::string report_json = (dir / "green_report.json").string();
  const std::string report_text = green::ReportJson(r);
  WriteFileAtomically(report_json, report_text);
  WriteFileAtomically((dir / "green_report.html").string(), green::ReportHtml(r));
  green::AppendEmissionsCsv((dir / "emissions.csv").string(), r);
  if (!o.json.empty()) fs::copy_file(report_json, o.json, fs::copy_options::overwrite_existing);
  std::printf(
      "cann-dist-train green: %.4f kWh, %.3f g CO2 (plan %.3f g, %+.1f%%); carbon-agnostic %.3f g: "
      "%.1f%% less; "
      "test accuracy %s\n",
      r.energy_kwh, r.carbon_kg * 1000, r.plan_carbon_kg * 1000,
      r.plan_carbon_kg > 0 ? 100 * (r.carbon_kg / r.plan_carbon_kg - 1) : 0.0,
      r.baseline_carbon_kg * 1000, 100 * green::Reduction(r),
      r.final_test_accuracy >= 0 ? std::to_string(r.final_test_accuracy).c_str() : "not evaluated");
  std::printf(
      "cann-dist-train green: reports in %s (green_report.json, green_report.html, "
      "emissions.csv)\n",
      dir.string().c_str());
  if (o.certify) {
    const fs::path key_dir = fs::path(env.signing_key).parent_path();
    if (!key_dir.empty()) fs::create_directories(key_dir);
    const std::string pk = green::EnsureSigningKey(env.signing_key);
    // The bytes written above, not what a read of the file returns (an empty string, once,
    // when the read failed).
    WriteFileAtomically(report_json + ".cert",
                        green::IssueCertificate(report_text, "green_report.json", env.signing_key));
    std::printf(
        "cann-dist-train green: signed %s.cert (Ed25519, key %s); a self-attested report, not a "
        "certification\n",
        report_json.c_str(), pk.c_str());
  }
  return 0;
}

}  // namespace cdt::cli
