#include "green/carbon_aware_runner.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>

#include "cdt/error.h"
#include "common/checked_number.h"
#include "green/accounting.h"
#include "green/batch_controller.h"
#include "green/iso_time.h"

namespace cdt::green {

namespace {

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char line[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  return line;
}

// The meter sampled while the job runs, on the trace's clock.
struct Metering {
  MeterSet* meter = nullptr;
  Clock* clock = nullptr;
  Timebase tb;
  double pue = 1;
  std::vector<EnergySample> samples;  // trace clock, facility joules scaled to real time
  EnergyReading it_total;             // IT joules in wall time, by component
  EnergyReading last;
  bool running = false;

  void Sample() {
    const EnergyReading r = meter->Read();
    if (running) {
      it_total.cpu_j += r.cpu_j - last.cpu_j;
      it_total.gpu_j += r.gpu_j - last.gpu_j;
      it_total.ram_j += r.ram_j - last.ram_j;
    }
    last = r;
    samples.push_back({tb.ToTrace(clock->Steady()), it_total.total() * pue * tb.Stretch()});
  }
  // Runs `r` with the meter on: a pause ends at its first sample (no energy since the last one).
  RunResult Run(CarbonAwareJob& job, const RunRequest& r) {
    Sample();
    running = true;
    RunResult out = job.Run(r, [this] { Sample(); });
    Sample();
    running = false;
    CheckRunResult(out, r.tag);
    return out;
  }
  double joules() const { return samples.empty() ? 0 : samples.back().joules; }
};

// Cumulative joules at trace time t, interpolated between samples.
double JoulesAt(const std::vector<EnergySample>& s, double t) {
  if (s.empty() || t <= s.front().unix_s) return s.empty() ? 0 : s.front().joules;
  for (size_t i = 1; i < s.size(); ++i)
    if (t <= s[i].unix_s) {
      const double f = (t - s[i - 1].unix_s) / std::max(1e-12, s[i].unix_s - s[i - 1].unix_s);
      return s[i - 1].joules + f * (s[i].joules - s[i - 1].joules);
    }
  return s.back().joules;
}

// What a short metered run of the job on `workers` workers says.
struct Calibration {
  int workers = 1;
  double step_s = 0, samples_per_step = 0, train_w = 0;          // stepping
  double startup_s = 0, exit_s = 0, eval_s = 0, overhead_w = 0;  // around it
  int64_t total_steps = 0;
  double facility_kwh = 0;  // what the calibration itself used
};

class Runner {
 public:
  Runner(CarbonAwareJob& job, const CarbonTrace& trace, MeterSet& meter, Clock& clock,
         const CarbonAwareOptions& o, const PlanJob& plan)
      : job_(job), trace_(trace), meter_(meter), clock_(clock), o_(o), plan_(plan) {}
  GreenReport Run();

 private:
  void Say(const std::string& line) const {
    if (o_.say) o_.say(line);
  }
  Calibration Calibrate(int workers);
  // Each running stretch is one more start-up and exit: plan, count the stretches, re-plan with
  // their time and energy until the count settles. Work is in hours on the base count.
  void MakeThePlan();
  // One training run per stretch; the checkpoint carries the job across pauses and worker counts
  // (the sampler's global position re-partitions the remaining samples).
  void Follow();
  // Sleeps until stretch k's start-up; false when a re-plan came due first (made, stretches_
  // replaced: follow the new plan from its first stretch).
  bool WaitForStretch(size_t k, const Calibration& c);
  // Plans the work left from trace time `now` up to the deadline (options.replan_hours); true
  // when the new plan replaced stretches_ (false: too close to the deadline, or infeasible).
  bool Replan(double now_trace);
  void ControlBatch(size_t i, const Calibration& c, double now_trace);
  void RunStretch(size_t i, size_t k, int workers, const Calibration& c, double now_trace);
  GreenReport Account() const;

  CarbonAwareJob& job_;
  const CarbonTrace& trace_;
  MeterSet& meter_;
  Clock& clock_;
  const CarbonAwareOptions& o_;
  const PlanJob& plan_;

  std::map<int, Calibration> cal_;
  double cal_kwh_ = 0;
  JobSpec spec_;
  Plans plans_;
  std::vector<Stretch> stretches_;
  double plan_start_ = 0;     // trace time of stretches_' hour 0 (moves with each re-plan)
  double next_replan_ = 0;    // trace time of the next re-plan while paused (replan_hours)
  double deadline_unix_ = 0;  // trace time the job must finish by (the first plan's deadline)
  int replans_ = 0;
  std::vector<std::string> notes_;
  Metering m_;
  std::vector<RunInterval> actual_;
  int64_t step_ = 0, total_steps_ = 0;
  int batch_ = 0;
  double job_samples_ = 0;
  RunResult last_run_;
};

Calibration Runner::Calibrate(int workers) {
  Metering cal;
  cal.meter = &meter_;
  cal.clock = &clock_;
  cal.tb.wall_start = clock_.Steady();
  RunRequest r;
  r.tag = "calibration-" + std::to_string(workers);
  r.workers = workers;
  r.batch = o_.batch;
  r.calibration = true;
  r.stop_after = o_.calibrate_steps;
  r.eval_every = o_.calibrate_steps;
  Say(Format("cann-dist-train green: calibrating on %d worker(s): %d steps", workers,
             o_.calibrate_steps));
  const double t0 = clock_.Steady(), t0_unix = clock_.Unix();
  const RunResult j = cal.Run(job_, r);
  const double wall = clock_.Steady() - t0;
  Calibration c;
  c.workers = workers;
  const double ran = std::max<double>(1, static_cast<double>(j.steps));
  c.step_s = j.wall_s / ran;
  c.samples_per_step = j.samples / ran;
  c.total_steps = j.total_steps;
  c.eval_s = j.eval_s;
  // Start-up (processes, libraries, data) comes before the first step: runs are launched that
  // much ahead of their planned start so that training itself starts on time.
  c.startup_s = std::clamp((j.started_unix > 0 ? j.started_unix : t0_unix) - t0_unix, 0.0, wall);
  c.exit_s = std::max(0.0, wall - c.startup_s - j.wall_s - c.eval_s);
  const double a = cal.tb.ToTrace(t0 + c.startup_s);
  const double loop_j = JoulesAt(cal.samples, a + j.wall_s) - JoulesAt(cal.samples, a);
  const double all_j = cal.joules();
  c.train_w = loop_j / std::max(1e-9, j.wall_s);
  const double around = c.startup_s + c.exit_s + c.eval_s;
  c.overhead_w = around > 0 ? std::max(0.0, all_j - loop_j) / around : c.train_w;
  c.facility_kwh = all_j * o_.pue / 3.6e6;
  Say(
      Format("cann-dist-train green: %d worker(s): %.4f s per step (%.0f samples) at %.1f W (IT); "
             "per run %.2f s start-up and %.2f s exit, %.2f s evaluation at the end, at %.1f W",
             workers, c.step_s, c.samples_per_step, c.train_w, c.startup_s, c.exit_s, c.eval_s,
             c.overhead_w));
  return c;
}

void Runner::MakeThePlan() {
  const Calibration& b = cal_.at(o_.base_workers);
  const double stepping_s = static_cast<double>(b.total_steps) * b.step_s;
  const double run_overhead_s = b.startup_s + b.exit_s;
  double power_kw = 0;
  size_t runs = 1;
  for (int round = 0; round < 4; ++round) {
    // The share of the job's time spent around steps (start-ups, exits, evaluation), for power.
    const double extra_s = static_cast<double>(runs) * run_overhead_s + b.eval_s;
    const double share = extra_s / (stepping_s + extra_s);
    auto kw = [&](const Calibration& c) {
      return ((1 - share) * c.train_w + share * c.overhead_w) * o_.pue / 1000;
    };
    // The first run's start-up and exit are the job's; the planner adds one restart for each
    // further stretch it plans (spec_.restart_work).
    const double job_hours = (stepping_s + run_overhead_s + b.eval_s) / o_.time_scale;
    const double deadline_h = std::ceil(o_.deadline_hours > 0 ? o_.deadline_hours : 3 * job_hours);
    if (!(deadline_h <= kMaxPlanHours))  // also NaN
      throw Error(ErrorCode::kInvalidArgument,
                  Format("green: the job's %lld steps at %.3g s each take %.3g trace hours at "
                         "--time-scale %g: a deadline of %.3g h is past the %d hours a plan may "
                         "cover; check --time-scale and --deadline",
                         static_cast<long long>(b.total_steps), b.step_s, job_hours, o_.time_scale,
                         deadline_h, kMaxPlanHours));
    const int deadline = static_cast<int>(deadline_h);
    spec_ = JobSpec{};
    spec_.base_workers = o_.base_workers;
    spec_.deadline_hours = std::max(1, deadline);
    spec_.carbon_cap_kg = o_.carbon_cap_kg;
    spec_.restart_work = run_overhead_s / o_.time_scale;  // trace hours, as spec_.work
    spec_.work = job_hours;
    power_kw = kw(b);
    // Measured, not modelled: samples per second relative to the base count.
    for (const auto& [w, c] : cal_)
      spec_.scaling.push_back(
          {w, (c.samples_per_step / c.step_s) / (b.samples_per_step / b.step_s), kw(c)});
    plans_ = plan_(spec_, o_.start_unix);
    const size_t n = std::max<size_t>(1, Stretches(plans_.plan).size());
    if (n == runs) break;
    runs = n;
  }
  Say(Format(
      "cann-dist-train green: the job's %lld steps = %.2f trace hours on %d worker(s), "
      "planned in %zu run(s) at --time-scale %g",
      static_cast<long long>(b.total_steps), spec_.work, o_.base_workers, runs, o_.time_scale));
  if (!plans_.plan.feasible && !o_.green_priority && plans_.baseline.feasible) {
    notes_.push_back(
        "the " + plans_.plan.strategy + " plan is infeasible (" + plans_.plan.reason +
        "); running without pauses instead (--green-priority follows the cleanest plan anyway)");
    Say("cann-dist-train green: " + notes_.back());
    plans_.plan = plans_.baseline;
  }
  if (o_.show_plan) o_.show_plan(spec_, power_kw, plans_);
}

bool Runner::WaitForStretch(size_t k, const Calibration& c) {
  for (;;) {
    const double at = plan_start_ + 3600 * stretches_[k].start_h;
    const double begin = m_.tb.ToWall(at) - c.startup_s;
    if (begin <= clock_.Steady()) return true;
    if (o_.replan_hours > 0 && m_.tb.ToWall(next_replan_) < begin) {
      // A re-plan comes due during the pause: sleep until then and plan again (Replan moves
      // next_replan_ on, replaced or not).
      const double until = m_.tb.ToWall(next_replan_);
      if (until > clock_.Steady()) {
        Say(
            Format("cann-dist-train green: paused (checkpoint at step %lld on disk); the plan "
                   "is revised at %s",
                   static_cast<long long>(step_), FormatIsoTime(next_replan_).c_str()));
        clock_.SleepFor(until - clock_.Steady());
      }
      if (Replan(m_.tb.ToTrace(clock_.Steady()))) return false;
      continue;
    }
    Say(Format("cann-dist-train green: paused (checkpoint at step %lld on disk) until %s, %.1f s",
               static_cast<long long>(step_), FormatIsoTime(at).c_str(), begin - clock_.Steady()));
    clock_.SleepFor(begin - clock_.Steady());
    return true;
  }
}

bool Runner::Replan(double now_trace) {
  next_replan_ = now_trace + 3600 * o_.replan_hours;
  const int hours_left = static_cast<int>(std::floor((deadline_unix_ - now_trace) / 3600));
  if (hours_left < 1) return false;  // the last hour: the plan stands (or runs on to the end)
  const Calibration& b = cal_.at(o_.base_workers);
  JobSpec left = spec_;
  const double step_s = b.step_s * batch_ / o_.batch;
  left.work =
      (static_cast<double>(total_steps_ - step_) * step_s + b.startup_s + b.exit_s + b.eval_s) /
      o_.time_scale;
  left.deadline_hours = hours_left;
  if (o_.carbon_cap_kg > 0)  // what is left of the budget (a cap of 0 would mean none)
    left.carbon_cap_kg =
        std::max(1e-9, o_.carbon_cap_kg - green::Account(trace_, m_.samples).carbon_kg);
  const Plans p = plan_(left, now_trace);
  const Plan* follow = &p.plan;
  if (!p.plan.feasible && !o_.green_priority) {
    // As the first plan: an infeasible one gives way to running now (the baseline) when that
    // meets the deadline; otherwise the previous plan stands.
    const bool baseline = p.baseline.feasible;
    notes_.push_back(
        "re-plan at " + FormatIsoTime(now_trace) + " infeasible (" + p.plan.reason +
        (baseline ? "); running without pauses instead" : "); the previous plan stands"));
    Say("cann-dist-train green: " + notes_.back());
    if (!baseline) return false;
    follow = &p.baseline;
  }
  stretches_ = Stretches(*follow);
  plan_start_ = now_trace;
  ++replans_;
  const std::string next = stretches_.empty()
                               ? std::string("none")
                               : FormatIsoTime(now_trace + 3600 * stretches_.front().start_h);
  Say(Format(
      "cann-dist-train green: re-planned at %s: %.2f h of work left, %d h to the "
      "deadline, %zu run(s), the next at %s",
      FormatIsoTime(now_trace).c_str(), left.work, hours_left, stretches_.size(), next.c_str()));
  return true;
}

void Runner::ControlBatch(size_t i, const Calibration& c, double now_trace) {
  BatchControlConfig bc;
  bc.carbon_cap_kg = o_.carbon_cap_kg;
  bc.min_batch = o_.min_batch > 0 ? o_.min_batch : std::max(1, o_.batch / 4);
  bc.max_batch = o_.max_batch > 0 ? o_.max_batch : o_.batch * 4;
  const double spent = green::Account(trace_, m_.samples).carbon_kg;
  const double kwh_per_sample =
      c.train_w * o_.pue * c.step_s / c.samples_per_step / 3.6e6 * m_.tb.Stretch();
  const double remaining =
      static_cast<double>(total_steps_ - step_) * c.samples_per_step * batch_ / o_.batch;
  const BatchDecision d =
      DecideBatch(bc, batch_, spent, remaining, kwh_per_sample, trace_.IntensityAt(now_trace));
  if (d.batch != batch_ || d.alert) {
    notes_.push_back("run " + std::to_string(i) + ": batch " + std::to_string(batch_) + " -> " +
                     std::to_string(d.batch) + " (" + d.reason + ", threshold " +
                     std::to_string(d.threshold_gco2) + " g/kWh)" +
                     (d.alert ? "; ALERT: projected " + std::to_string(d.projected_kg) +
                                    " kg reaches 95% of the cap"
                              : std::string()));
    Say("cann-dist-train green: " + notes_.back());
  }
  batch_ = d.batch;
}

void Runner::RunStretch(size_t i, size_t k, int workers, const Calibration& c, double now_trace) {
  const bool planned = k < stretches_.size(), last = k + 1 >= stretches_.size();
  // Steps for this stretch on `workers` at the batch (the step time scales with the batch).
  const double step_s = c.step_s * batch_ / o_.batch;
  int64_t stop = total_steps_;
  if (planned && !last) {
    const double stepping = stretches_[k].hours * o_.time_scale - (c.startup_s + c.exit_s);
    stop = std::min(total_steps_, step_ + std::max<int64_t>(1, std::llround(stepping / step_s)));
  }
  RunRequest r;
  r.tag = "run-" + std::to_string(i);
  r.workers = workers;
  r.batch = batch_;
  r.resume = step_ > 0;
  r.stop_after = stop < total_steps_ ? stop : 0;
  const double j0 = m_.joules();
  Say(Format("cann-dist-train green: running steps %lld..%lld on %d worker(s) at %s (trace time)",
             static_cast<long long>(step_), static_cast<long long>(stop - 1), workers,
             FormatIsoTime(now_trace).c_str()));
  last_run_ = m_.Run(job_, r);
  // What this run measured replaces the calibration for the stretches still to come.
  if (last_run_.steps >= 20 && cal_.count(workers))
    cal_[workers].step_s =
        last_run_.wall_s / static_cast<double>(last_run_.steps) * o_.batch / batch_;
  step_ = last_run_.first_step + last_run_.steps;
  total_steps_ = last_run_.total_steps;  // changes with the global batch
  job_samples_ += last_run_.samples;
  RunInterval ri;
  ri.start_unix = now_trace;
  ri.end_unix = m_.samples.back().unix_s;
  ri.workers = workers;
  ri.energy_kwh = (m_.joules() - j0) / 3.6e6;
  actual_.push_back(ri);
}

void Runner::Follow() {
  m_.meter = &meter_;
  m_.clock = &clock_;
  m_.pue = o_.pue;
  m_.tb.wall_start = clock_.Steady();
  m_.tb.trace_start = o_.start_unix;
  m_.tb.seconds_per_hour = o_.time_scale;
  stretches_ = Stretches(plans_.plan);
  plan_start_ = o_.start_unix;
  deadline_unix_ = o_.start_unix + 3600.0 * spec_.deadline_hours;
  next_replan_ = o_.start_unix + 3600 * o_.replan_hours;
  const Calibration& b = cal_.at(o_.base_workers);
  total_steps_ = b.total_steps;
  batch_ = o_.batch;
  // i counts runs; k is the stretch of the plan in force (a re-plan starts it again at 0).
  for (size_t i = 0, k = 0; step_ < total_steps_;) {
    const bool planned = k < stretches_.size();
    const int workers = planned ? stretches_[k].workers : o_.base_workers;
    const Calibration& c = cal_.count(workers) ? cal_.at(workers) : b;
    if (planned) {
      if (!WaitForStretch(k, c)) {
        k = 0;
        continue;
      }
    } else {
      notes_.push_back("the plan's stretches ended at step " + std::to_string(step_) +
                       " (the job ran slower than calibrated); ran on to the end at once");
    }
    const double now_trace = m_.tb.ToTrace(clock_.Steady());
    if (o_.carbon_cap_kg > 0) ControlBatch(i, c, now_trace);
    RunStretch(i, k, workers, c, now_trace);
    ++i;
    ++k;
    if (o_.replan_hours > 0 && step_ < total_steps_ && Replan(m_.tb.ToTrace(clock_.Steady())))
      k = 0;
  }
  if (replans_ > 0)
    notes_.push_back("the plan was revised " + std::to_string(replans_) +
                     " time(s) on the newest forecast (every " + Format("%g", o_.replan_hours) +
                     " trace hour(s) while paused, and after each run): the report's plan, its "
                     "carbon and plan_vs_actual are the first plan's");
}

GreenReport Runner::Account() const {
  const CarbonAccount acc = green::Account(trace_, m_.samples);
  const double start = o_.start_unix;
  GreenReport r;
  r.run_id = o_.run_id;
  r.region = trace_.region();
  r.trace_source = trace_.source();
  r.trace_start_unix = start;
  r.time_scale_s_per_hour = o_.time_scale;
  r.wall_s = clock_.Steady() - m_.tb.wall_start;
  r.pue = o_.pue;
  r.cpu_kwh = m_.it_total.cpu_j * m_.tb.Stretch() / 3.6e6;
  r.gpu_kwh = m_.it_total.gpu_j * m_.tb.Stretch() / 3.6e6;
  r.ram_kwh = m_.it_total.ram_j * m_.tb.Stretch() / 3.6e6;
  r.energy_kwh = acc.energy_kwh;
  r.carbon_kg = acc.carbon_kg;
  r.carbon_free_energy_ratio =
      acc.carbon_free_known && acc.energy_kwh > 0 ? acc.carbon_free_kwh / acc.energy_kwh : -1;
  double run_hours = 0;
  r.actual = actual_;
  for (RunInterval& a : r.actual) {
    run_hours += (a.end_unix - a.start_unix) / 3600.0;
    std::vector<EnergySample> inside;
    for (const EnergySample& s : m_.samples)
      if (s.unix_s >= a.start_unix - 1e-6 && s.unix_s <= a.end_unix + 1e-6) inside.push_back(s);
    a.carbon_kg = green::Account(trace_, inside).carbon_kg;
  }
  r.duration_s = run_hours * 3600;
  // The carbon-agnostic baseline: the same energy over the same running time, from the start.
  r.baseline_carbon_kg =
      run_hours > 0
          ? acc.energy_kwh / run_hours * trace_.GramsPerKw(start, start + run_hours * 3600) / 1000
          : 0;
  r.plan_carbon_kg = plans_.plan.carbon_kg;
  r.samples = job_samples_;
  r.reserved_hours = run_hours;
  r.embodied_kg = o_.embodied_kg;
  r.lifetime_hours = o_.lifetime_years * 8760;
  r.meter = meter_.Describe();
  r.modelled = meter_.any_modelled();
  r.plan = plans_.plan;
  for (int h = 0; h < static_cast<int>(plans_.intensity.size()); ++h)
    r.intensity.push_back({start + 3600.0 * h, plans_.intensity[static_cast<size_t>(h)]});
  r.final_test_accuracy = last_run_.test_accuracy;
  r.notes = notes_;
  r.notes.push_back("calibration (not in the totals): " + std::to_string(cal_.size()) +
                    " run(s) of " + std::to_string(o_.calibrate_steps) + " steps, " +
                    std::to_string(cal_kwh_ * 1000) + " Wh facility energy in wall time");
  r.notes.push_back(std::string("energy is ") +
                    (r.modelled ? "modelled (no hardware counter here): " : "measured: ") +
                    r.meter);
  if (o_.time_scale != 3600)
    r.notes.push_back("time-scaled run: one trace hour lasted " + std::to_string(o_.time_scale) +
                      " s; energy scaled by " + std::to_string(3600 / o_.time_scale) +
                      " to real time");
  for (const std::string& n : trace_.notes) r.notes.push_back(n);
  if (r.embodied_kg <= 0)
    r.notes.push_back("SCI without embodied emissions: pass --embodied-kg to include M");
  return r;
}

GreenReport Runner::Run() {
  // 1. Calibrate every worker count the plan may use.
  cal_[o_.base_workers] = Calibrate(o_.base_workers);
  for (int w = o_.min_workers; w <= o_.max_workers; ++w)
    if (!cal_.count(w)) cal_[w] = Calibrate(w);
  for (auto& [w, c] : cal_) cal_kwh_ += c.facility_kwh;
  // 2. Plan, 3. follow, 4. account.
  MakeThePlan();
  Follow();
  return Account();
}

}  // namespace

void CheckRunResult(const RunResult& r, const std::string& run) {
  auto refuse = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArgument,
                "green: " + run + " reported " + what +
                    "; its result is damaged (the run's JSON, or the Python job's result dict)");
  };
  const struct {
    const char* name;
    int64_t value;
  } counts[] = {{"first_step", r.first_step}, {"steps", r.steps}, {"total_steps", r.total_steps}};
  for (const auto& c : counts)
    if (c.value < 0 || c.value > kMaxRunSteps)
      refuse(std::string(c.name) + " " + std::to_string(c.value) + ", expected an integer " +
             RangeText(0, kMaxRunSteps));
  const struct {
    const char* name;
    double value, max;
  } amounts[] = {{"wall_s", r.wall_s, kMaxRunSeconds},
                 {"eval_s", r.eval_s, kMaxRunSeconds},
                 {"samples", r.samples, 1e18}};
  for (const auto& a : amounts)
    if (!(a.value >= 0 && a.value <= a.max))
      refuse(std::string(a.name) + " " + Format("%g", a.value) + ", expected a number from 0 to " +
             Format("%g", a.max));
  if (!std::isfinite(r.started_unix)) refuse("started_unix that is not a finite number");
}

void ValidateCarbonAwareOptions(const CarbonAwareOptions& options) {
  if (!(options.time_scale > 0))
    throw Error(ErrorCode::kInvalidArgument, "--time-scale must be > 0 seconds per trace hour");
  if (!(options.replan_hours == 0 ||
        (options.replan_hours >= 0.1 && options.replan_hours <= kMaxPlanHours)))
    throw Error(ErrorCode::kInvalidArgument,
                "--replan-every must be 0 (never) or a number of trace hours from 0.1 to " +
                    std::to_string(kMaxPlanHours));
  if (options.base_workers < 1 || options.batch < 1 || options.min_workers < 1 ||
      options.min_workers > options.base_workers || options.max_workers < options.base_workers)
    throw Error(ErrorCode::kInvalidArgument,
                "green: --min-workers <= --nproc-per-node (" +
                    std::to_string(options.base_workers) +
                    ") <= --max-workers, and --batch-size >= 1, are needed");
}

GreenReport RunCarbonAware(CarbonAwareJob& job, const CarbonTrace& trace, MeterSet& meter,
                           Clock& clock, const CarbonAwareOptions& options, const PlanJob& plan) {
  ValidateCarbonAwareOptions(options);
  return Runner(job, trace, meter, clock, options, plan).Run();
}

}  // namespace cdt::green
