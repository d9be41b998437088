#include "python/green_job.h"

#include <memory>
#include <utility>

#include "common/clock.h"
#include "common/unix_time.h"
#include "green/carbon_aware_runner.h"
#include "green/carbon_sources.h"
#include "green/trace_plan.h"

namespace py = pybind11;

namespace cdt::python {
namespace {

class PythonJob : public green::CarbonAwareJob {
 public:
  explicit PythonJob(py::object job) : job_(std::move(job)) {}

  green::RunResult Run(const green::RunRequest& r, const std::function<void()>& tick) override {
    py::gil_scoped_acquire gil;
    py::dict q;
    q["tag"] = r.tag;
    q["workers"] = r.workers;
    q["batch"] = r.batch;
    q["calibration"] = r.calibration;
    q["resume"] = r.resume;
    q["stop_after"] = r.stop_after;
    q["eval_every"] = r.eval_every;
    q["tick"] = py::cpp_function([tick] {
      py::gil_scoped_release release;
      tick();
    });
    py::dict d = job_.attr("run")(q);
    green::RunResult out;
    out.first_step = d["first_step"].cast<int64_t>();
    out.steps = d["steps"].cast<int64_t>();
    out.total_steps = d["total_steps"].cast<int64_t>();
    out.samples = d["samples"].cast<double>();
    out.wall_s = d["wall_s"].cast<double>();
    out.eval_s = d.contains("eval_s") ? d["eval_s"].cast<double>() : 0.0;
    out.started_unix = d.contains("started_unix") ? d["started_unix"].cast<double>() : 0.0;
    out.test_accuracy = d.contains("test_accuracy") && !d["test_accuracy"].is_none()
                            ? d["test_accuracy"].cast<double>()
                            : -1.0;
    return out;
  }
  std::string checkpoint_location() const override { return "the Python job's memory"; }

 private:
  py::object job_;
};

}  // namespace

std::string RunGreenFromPython(const GreenRunConfig& c, py::object job, py::object say,
                               const std::string& emissions_csv) {
  const green::CarbonTrace trace = green::ReadCarbonTrace(c.trace_path);
  green::CarbonAwareOptions o;
  o.start_unix = c.start_unix;
  if (o.start_unix < 0) {  // this hour of the trace's year
    o.start_unix = trace.SameMomentOfYear(UnixSeconds());
    o.start_unix -= static_cast<double>(static_cast<int64_t>(o.start_unix) % 3600);
  }
  o.batch = c.batch;
  o.calibrate_steps = c.calibrate_steps;
  o.time_scale = c.time_scale;
  o.pue = c.pue;
  o.deadline_hours = c.deadline_hours;
  o.green_priority = c.green_priority;
  o.carbon_cap_kg = c.carbon_cap_kg;
  o.min_batch = c.min_batch;
  o.max_batch = c.max_batch;
  o.run_id = c.run_id;
  o.replan_hours = c.replan_hours;
  o.say = [say](const std::string& line) {
    py::gil_scoped_acquire gil;
    say(line);
  };
  green::ValidateCarbonAwareOptions(o);
  green::TracePlanOptions t;
  t.strategy = green::ParseStrategy(c.strategy);
  t.forecast = c.forecast;
  t.plan.contiguous_partial = true;  // every running stretch costs a restart at run time
  green::MeterSetOptions mo;
  mo.profiles_path = c.profiles_path;
  green::MeterSet meter(mo);
  PythonJob py_job(std::move(job));
  SystemClock clock;
  green::GreenReport r;
  {
    py::gil_scoped_release release;
    r = green::RunCarbonAware(py_job, trace, meter, clock, o,
                              [&](const green::JobSpec& spec, double start) {
                                return green::PlanOnTrace(trace, start, spec, t);
                              });
  }
  if (!emissions_csv.empty()) green::AppendEmissionsCsv(emissions_csv, r);
  return green::ReportJson(r);
}

}  // namespace cdt::python
