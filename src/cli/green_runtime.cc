// `green --carbon-aware`: calibrate, plan, follow the plan segment by segment, account, report.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/green_common.h"
#include "common/unix_time.h"
#include "green/accounting.h"
#include "green/certificate.h"
#include "green/energy_meter.h"
#include "green/iso_time.h"
#include "green/report.h"

namespace cdt::cli {
namespace {

namespace fs = std::filesystem;

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct Metering {
  green::MeterSet* meter = nullptr;
  green::Timebase tb;
  double pue = 1;
  std::vector<green::EnergySample> samples;   // trace clock, facility joules scaled to real time
  green::EnergyReading it_total;              // IT joules in wall time, by component
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
    samples.push_back({tb.ToTrace(Now()), it_total.total() * pue * tb.Stretch()});
  }
};

// Runs `exe args...`, sampling the meter every 200 ms while it runs. Returns the exit status.
int RunMetered(const std::string& exe, const std::vector<std::string>& args, Metering* m) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(exe.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  m->Sample();   // a pause ends here: no energy since the last sample
  m->running = true;
  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorCode::kIo, "green: fork failed");
  if (pid == 0) {
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
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
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

void CheckTrainArgs(const std::vector<std::string>& args) {
  for (const std::string& a : args)
    for (const char* owned : {"--checkpoint-dir", "--resume", "--stop-after", "--json", "--elastic"})
      if (a == owned || a.rfind(std::string(owned) + "=", 0) == 0)
        throw Error(ErrorCode::kInvalidArgument, std::string("green --carbon-aware sets ") + owned +
                                                     " of the training runs itself: drop it from the train options");
}

}  // namespace

int RunCarbonAware(const GreenOptions& o, const Environment& env) {
  if (!(o.time_scale > 0)) throw Error(ErrorCode::kInvalidArgument, "--time-scale must be > 0 seconds per trace hour");
  if (o.strategy != "suspend-resume" && o.strategy != "agnostic")
    throw Error(ErrorCode::kInvalidArgument,
                "green --carbon-aware follows agnostic and suspend-resume plans; resizing a running job to an "
                "elastic or weighted plan is not implemented yet (see those plans with --plan-only)");
  if (o.train_args.empty()) throw Error(ErrorCode::kInvalidArgument, "green --carbon-aware needs train options after --");
  CheckTrainArgs(o.train_args);
  const green::CarbonTrace trace = LoadGreenTrace(o, env);
  const double start = GreenStart(o, trace);
  const std::string run_id = !o.run_id.empty() ? o.run_id
                                               : "green-" + std::to_string(static_cast<long long>(UnixSeconds())) + "-" +
                                                     std::to_string(getpid());
  const fs::path dir = o.report_dir;
  const fs::path work = dir / run_id;
  fs::create_directories(work);

  green::MeterSetOptions mo;
  mo.profiles_path = env.knowledge_base + "/hardware_profiles/devices.json";
  green::MeterSet meter(mo);
  std::printf("cann-dist-train green: energy meter: %s\n", meter.Describe().c_str());

  // 1. Calibration: a short run of the same training, metered.
  Metering cal;
  cal.meter = &meter;
  cal.tb.wall_start = Now();
  cal.tb.trace_start = start;
  std::vector<std::string> args = {"train"};
  args.insert(args.end(), o.train_args.begin(), o.train_args.end());
  const std::string cal_json = (work / "calibration.json").string();
  std::vector<std::string> cal_args = args;
  for (const std::string& a : {std::string("--checkpoint-dir"), (work / "calibration-checkpoints").string(),
                               std::string("--stop-after"), std::to_string(o.calibrate_steps),
                               std::string("--eval-every"), std::to_string(o.calibrate_steps), std::string("--json"),
                               cal_json, std::string("--no-progress")})
    cal_args.push_back(a);
  std::printf("cann-dist-train green: calibrating: %d steps\n", o.calibrate_steps);
  const double cal_t0 = Now(), cal_t0_unix = UnixSeconds();
  if (const int rc = RunMetered(env.self_exe, cal_args, &cal); rc != 0)
    throw Error(ErrorCode::kIo, "green: the calibration run failed (exit " + std::to_string(rc) + "); its output is above");
  const double cal_wall = Now() - cal_t0;
  const nlohmann::json cj = ReadJson(cal_json);
  const double steps = cj.at("steps").get<double>(), train_wall = cj.at("wall_s").get<double>();
  const int64_t total_steps = cj.at("total_steps").get<int64_t>();
  const int world = cj.at("world_size").get<int>();
  const double step_s = train_wall / std::max(1.0, steps);
  // Start-up (processes, libraries, data) comes before the first step: segments are launched
  // that much ahead of their planned start so that training itself starts on time.
  const double startup_s = std::clamp(cj.value("started_unix", cal_t0_unix) - cal_t0_unix, 0.0, cal_wall);
  // Power while stepping, and while starting up / evaluating / writing the checkpoint (the
  // calibration ends with one evaluation, as the job's last stretch does).
  const double loop_a = cal.tb.ToTrace(cal_t0 + startup_s), loop_b = loop_a + train_wall;
  const double loop_j = JoulesAt(cal.samples, loop_b) - JoulesAt(cal.samples, loop_a);
  const double all_j = cal.samples.empty() ? 0 : cal.samples.back().joules;
  // Every run starts up and exits; the last one also evaluates.
  const double eval_s = cj.value("eval_s", 0.0);
  const double overhead_s = std::max(0.0, cal_wall - train_wall - eval_s);
  const double train_w = loop_j / std::max(1e-9, train_wall);
  const double overhead_w = overhead_s + eval_s > 0 ? std::max(0.0, all_j - loop_j) / (overhead_s + eval_s) : train_w;
  const double cal_kwh = all_j * o.pue / 3.6e6;
  std::printf("cann-dist-train green: calibration: %.4f s per step at %.1f W (IT); per run %.2f s start-up and "
              "%.2f s exit, %.2f s evaluation at the end, at %.1f W; on %d worker(s)\n",
              step_s, train_w, startup_s, overhead_s - startup_s, eval_s, overhead_w, world);

  // 2. The plan. Each running stretch is one more start-up and exit: plan, count the stretches,
  // re-plan with their time and energy until the count settles.
  GreenOptions po = o;
  po.workers = world;
  po.min_workers = po.max_workers = world;
  const double stepping_s = static_cast<double>(total_steps) * step_s;
  GreenJob job;
  GreenPlans plans;
  size_t runs = 1;
  for (int round = 0; round < 4; ++round) {
    const double extra_s = static_cast<double>(runs) * overhead_s + eval_s;
    const double run_s = stepping_s + extra_s;
    const double job_hours = run_s / o.time_scale;
    const double it_kw = (stepping_s * train_w + extra_s * overhead_w) / run_s / 1000;
    const int deadline = static_cast<int>(std::ceil(o.deadline > 0 ? o.deadline : 3 * job_hours));
    job = MakeGreenJob(po, job_hours, it_kw * o.pue, std::max(1, deadline));
    plans = PlanGreenJob(po, trace, start, job.spec);
    const size_t n = std::max<size_t>(1, Stretches(plans.plan).size());
    if (n == runs) break;
    runs = n;
  }
  std::printf("cann-dist-train green: the job's %lld steps = %.2f trace hours in %zu run(s) at --time-scale %g\n",
              static_cast<long long>(total_steps), job.spec.work, runs, o.time_scale);
  std::vector<std::string> notes;
  if (!plans.plan.feasible && !o.green_priority && plans.baseline.feasible) {
    notes.push_back("the " + plans.plan.strategy + " plan is infeasible (" + plans.plan.reason +
                    "); running without pauses instead (--green-priority follows the cleanest plan anyway)");
    std::printf("cann-dist-train green: %s\n", notes.back().c_str());
    plans.plan = plans.baseline;
  }
  PrintGreenPlan(po, trace, start, job, plans);

  // 3. Follow it: one training run per stretch, the checkpoint carries the job across pauses.
  Metering m;
  m.meter = &meter;
  m.pue = o.pue;
  m.tb.wall_start = Now();
  m.tb.trace_start = start;
  m.tb.seconds_per_hour = o.time_scale;
  std::vector<green::RunInterval> actual;
  const std::vector<Stretch> stretches = Stretches(plans.plan);
  int64_t step = 0;
  double job_samples = 0;
  nlohmann::json last_segment;
  for (size_t i = 0; step < total_steps; ++i) {
    const bool planned = i < stretches.size();
    const bool last = i + 1 >= stretches.size();
    if (planned) {
      const double begin = m.tb.ToWall(start + 3600 * stretches[i].start_h) - startup_s;
      if (begin > Now()) {
        std::printf("cann-dist-train green: paused (checkpoint at step %lld on disk) until %s, %.1f s\n",
                    static_cast<long long>(step), green::FormatIsoTime(start + 3600 * stretches[i].start_h).c_str(),
                    begin - Now());
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::duration<double>(begin - Now()));
      }
    } else {
      notes.push_back("the plan's stretches ended at step " + std::to_string(step) +
                      " (the job ran slower than calibrated); ran on to the end at once");
    }
    int64_t stop = total_steps;
    if (planned && !last) {
      const double stepping = stretches[i].hours * o.time_scale - overhead_s;   // this run's start-up and exit
      const int64_t n = std::max<int64_t>(1, std::llround(stepping / step_s));
      stop = std::min(total_steps, step + n);
    }
    std::vector<std::string> seg = args;
    const std::string seg_json = (work / ("segment-" + std::to_string(i) + ".json")).string();
    for (const std::string& a : {std::string("--checkpoint-dir"), (work / "checkpoints").string(), std::string("--json"), seg_json})
      seg.push_back(a);
    if (step > 0) seg.push_back("--resume");
    if (stop < total_steps) {
      seg.push_back("--stop-after");
      seg.push_back(std::to_string(stop));
    }
    const double t0 = m.tb.ToTrace(Now());
    const double j0 = m.samples.empty() ? 0 : m.samples.back().joules;
    std::printf("cann-dist-train green: running steps %lld..%lld at %s (trace time)\n", static_cast<long long>(step),
                static_cast<long long>(stop - 1), green::FormatIsoTime(t0).c_str());
    std::fflush(stdout);
    if (const int rc = RunMetered(env.self_exe, seg, &m); rc != 0)
      throw Error(ErrorCode::kIo, "green: training segment " + std::to_string(i) + " failed (exit " + std::to_string(rc) +
                                      "); the checkpoint in " + (work / "checkpoints").string() +
                                      " holds the last completed segment");
    last_segment = ReadJson(seg_json);
    step = last_segment.at("first_step").get<int64_t>() + last_segment.at("steps").get<int64_t>();
    job_samples += last_segment.at("samples").get<double>();
    green::RunInterval ri;
    ri.start_unix = t0;
    ri.end_unix = m.samples.back().unix_s;
    ri.workers = world;
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
  r.wall_s = Now() - m.tb.wall_start;
  r.pue = o.pue;
  r.cpu_kwh = m.it_total.cpu_j * m.tb.Stretch() / 3.6e6;
  r.gpu_kwh = m.it_total.gpu_j * m.tb.Stretch() / 3.6e6;
  r.ram_kwh = m.it_total.ram_j * m.tb.Stretch() / 3.6e6;
  r.energy_kwh = acc.energy_kwh;
  r.carbon_kg = acc.carbon_kg;
  r.carbon_free_energy_ratio = acc.carbon_free_known && acc.energy_kwh > 0 ? acc.carbon_free_kwh / acc.energy_kwh : -1;
  double run_hours = 0;
  for (green::RunInterval& a : actual) {
    run_hours += (a.end_unix - a.start_unix) / 3600.0;
    a.carbon_kg = 0;
  }
  for (size_t k = 1; k < m.samples.size(); ++k) {   // each interval's carbon, from the samples inside it
    const auto& a = m.samples[k - 1];
    const auto& b = m.samples[k];
    if (b.joules <= a.joules || b.unix_s <= a.unix_s) continue;
    const double kg = (b.joules - a.joules) / (b.unix_s - a.unix_s) / 1000.0 * trace.GramsPerKw(a.unix_s, b.unix_s) / 1000.0;
    for (green::RunInterval& x : actual)
      if (a.unix_s >= x.start_unix - 1e-6 && b.unix_s <= x.end_unix + 1e-6) x.carbon_kg += kg;
  }
  r.duration_s = run_hours * 3600;
  // The carbon-agnostic baseline: the same energy over the same running time, from the start.
  r.baseline_carbon_kg = run_hours > 0 ? acc.energy_kwh / run_hours * trace.GramsPerKw(start, start + run_hours * 3600) / 1000 : 0;
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
  r.final_test_accuracy = last_segment["test_accuracy"].is_number() ? last_segment["test_accuracy"].get<double>() : -1;
  notes.push_back("calibration (not in the totals): " + std::to_string(o.calibrate_steps) + " steps, " +
                  std::to_string(cal_kwh * 1000) + " Wh facility energy in wall time");
  notes.push_back(std::string("energy is ") + (r.modelled ? "modelled (no hardware counter here): " : "measured: ") + r.meter);
  if (o.time_scale != 3600)
    notes.push_back("time-scaled run: one trace hour lasted " + std::to_string(o.time_scale) +
                    " s; energy scaled by " + std::to_string(3600 / o.time_scale) + " to real time");
  for (const std::string& n : trace.notes) notes.push_back(n);
  r.notes = notes;
  if (r.embodied_kg <= 0) r.notes.push_back("SCI without embodied emissions: pass --embodied-kg to include M");

  const std::string report_json = (dir / "green_report.json").string();
  {
    std::ofstream f(report_json);
    f << green::ReportJson(r);
    std::ofstream h(dir / "green_report.html");
    h << green::ReportHtml(r);
    if (!f.flush() || !h.flush()) throw Error(ErrorCode::kIo, "green: cannot write the report in " + dir.string());
  }
  green::AppendEmissionsCsv((dir / "emissions.csv").string(), r);
  if (!o.json.empty()) fs::copy_file(report_json, o.json, fs::copy_options::overwrite_existing);
  std::printf("cann-dist-train green: %.4f kWh, %.3f g CO2 (plan %.3f g, %+.1f%%); carbon-agnostic %.3f g: %.1f%% less; "
              "test accuracy %s\n",
              r.energy_kwh, r.carbon_kg * 1000, r.plan_carbon_kg * 1000,
              r.plan_carbon_kg > 0 ? 100 * (r.carbon_kg / r.plan_carbon_kg - 1) : 0.0, r.baseline_carbon_kg * 1000,
              100 * green::Reduction(r),
              r.final_test_accuracy >= 0 ? std::to_string(r.final_test_accuracy).c_str() : "not evaluated");
  std::printf("cann-dist-train green: reports in %s (green_report.json, green_report.html, emissions.csv)\n",
              dir.string().c_str());
  if (o.certify) {
    const fs::path key_dir = fs::path(env.signing_key).parent_path();
    if (!key_dir.empty()) fs::create_directories(key_dir);
    const std::string pk = green::EnsureSigningKey(env.signing_key);
    std::ifstream in(report_json, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream c(report_json + ".cert");
    c << green::IssueCertificate(bytes, "green_report.json", env.signing_key);
    if (!c.flush()) throw Error(ErrorCode::kIo, "green: cannot write " + report_json + ".cert");
    std::printf("cann-dist-train green: signed %s.cert (Ed25519, key %s); a self-attested report, not a certification\n",
                report_json.c_str(), pk.c_str());
  }
  return 0;
}

}  // namespace cdt::cli
