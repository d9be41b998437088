#include "dashboard/job_view.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "cdt/error.h"

namespace cdt::dashboard {

namespace {

using nlohmann::json;

double Num(const json& j, const char* key, double fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

const json& Obj(const json& j, const char* key) {
  static const json kEmpty = json::object();
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

const json& Arr(const json& j, const char* key) {
  static const json kEmpty = json::array();
  auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : kEmpty;
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The largest count a document may hold: integers the page's script adds to stay exact in a
// double (2^53), and the view's own arithmetic (step - 1, step + 1) cannot overflow.
constexpr int64_t kMaxCount = int64_t{1} << 53;

// Whether `j` is an integer in [lo, hi]: an unsigned value above INT64_MAX is not wrapped into a
// negative one.
bool IntegerIn(const json& j, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return false;
  if (j.is_number_unsigned()) {
    const auto v = j.get<uint64_t>();  // how nlohmann holds every non-negative integer it parses
    return v <= static_cast<uint64_t>(hi) && (lo <= 0 || v >= static_cast<uint64_t>(lo));
  }
  return j.get<int64_t>() >= lo && j.get<int64_t>() <= hi;
}

// The fields the view reads, with their types: a document without them is refused whole.
void CheckDocument(const json& d, int worker_id) {
  const auto bad = [worker_id](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument, "live document of worker " +
                                                  std::to_string(worker_id) + ": " + what +
                                                  " (docs/dashboard.md, \"The live document\")");
  };
  if (!d.is_object()) throw bad("not a JSON object");
  if (Str(d, "format") != "cdt-live") throw bad("format is not \"cdt-live\"");
  if (!d.contains("version") || !d["version"].is_number_integer() || d["version"] != 1)
    throw bad("version is not 1");
  for (const char* k :
       {"worker_id", "rank", "world", "generation", "step", "end_step", "steps", "samples"})
    if (!d.contains(k) || !d[k].is_number_integer())
      throw bad(std::string(k) + " is not an integer");
  if (d["worker_id"] != worker_id) throw bad("it names worker " + d["worker_id"].dump());
  if (!IntegerIn(d["world"], 1, 65536) || !IntegerIn(d["rank"], 0, 65535))
    throw bad("rank or world out of range");
  const int64_t rank = d["rank"], world = d["world"];
  if (rank >= world) throw bad("rank or world out of range");
  if (!IntegerIn(d["step"], -1, kMaxCount)) throw bad("step is out of range (-1..2^53)");
  for (const char* k : {"generation", "end_step", "steps", "samples"})
    if (!IntegerIn(d[k], 0, kMaxCount)) throw bad(std::string(k) + " is out of range (0..2^53)");
  for (const char* k : {"step_time", "gradients", "checkpoints", "energy", "comm"})
    if (!d.contains(k) || !d[k].is_object()) throw bad(std::string(k) + " is not an object");
  for (const char* k : {"loss_curve", "recoveries"})
    if (!d.contains(k) || !d[k].is_array()) throw bad(std::string(k) + " is not an array");
  if (!d.contains("finished") || !d["finished"].is_boolean())
    throw bad("finished is not a boolean");
  if (!d.contains("unix_time") || !d["unix_time"].is_number())
    throw bad("unix_time is not a number");
  // What the page draws from: arrays where it loops, objects where it looks inside.
  const json& comm = d["comm"];
  for (const char* k : {"allreduce", "sent_bytes", "received_bytes"})
    if (!comm.contains(k) || !comm[k].is_array())
      throw bad(std::string("comm.") + k + " is not an array");
  if (comm["sent_bytes"].size() > static_cast<size_t>(world) ||
      comm["received_bytes"].size() > static_cast<size_t>(world))
    throw bad("comm holds more peers than the world has");
  for (const json& a : comm["allreduce"])
    if (!a.is_object()) throw bad("comm.allreduce holds a non-object");
  const json& g = d["gradients"];
  for (const char* k : {"phases", "bucket_comm_s", "bucket_wait_s"})
    if (!g.contains(k) || !g[k].is_array())
      throw bad(std::string("gradients.") + k + " is not an array");
  for (const json& p : g["phases"])
    if (!p.is_array() || p.size() != 4)
      throw bad("gradients.phases holds a non-[step, phase, compressor, parameter]");
  for (const json& c : d["loss_curve"])
    if (!c.is_array() || c.size() != 2 || !c[0].is_number() || !c[1].is_number())
      throw bad("loss_curve holds a non-[step, loss]");
  for (const json& r : d["recoveries"])
    if (!r.is_object() || !r.contains("lost_workers") || !r["lost_workers"].is_array())
      throw bad("recoveries holds a non-recovery");
  if (d.contains("topology")) {
    const json& t = d["topology"];
    if (!t.is_object() || !t.contains("node_of_rank") || !t["node_of_rank"].is_array() ||
        t["node_of_rank"].size() != static_cast<size_t>(world) ||
        !t.contains("algorithm_by_size") || !t["algorithm_by_size"].is_array())
      throw bad("topology is not {node_of_rank: [one per rank], algorithm_by_size: [...]}");
    for (const json& n : t["node_of_rank"])
      if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() >= world)
        throw bad("topology.node_of_rank holds a node out of range");
  }
}

Sample S(double v, std::vector<std::pair<std::string, std::string>> labels = {}) {
  return Sample{std::move(labels), v};
}

}  // namespace

JobView::JobView(std::string job_id) : job_id_(std::move(job_id)) {}

void JobView::Update(int worker_id, const std::string& document, double now_unix) {
  json d = json::parse(document, nullptr, /*allow_exceptions=*/false);
  if (d.is_discarded())
    throw Error(ErrorCode::kInvalidArgument,
                "live document of worker " + std::to_string(worker_id) + " is not JSON");
  CheckDocument(d, worker_id);
  std::lock_guard<std::mutex> lock(mu_);
  Worker& w = workers_[worker_id];
  const bool fresh = w.doc.is_null() || w.doc["unix_time"] != d["unix_time"];
  w.doc = std::move(d);
  w.received_unix = now_unix;
  if (!fresh) return;
  // The job's energy: every worker's own until rank 0's final document sums the group's.
  // (A finished document of any rank holds the group's sum: only rank 0's is counted, then alone.)
  double energy = 0;
  const json* r0 = Rank0();
  const bool finished = r0 && (*r0)["finished"] == true;
  if (finished) {
    energy = Num(Obj(*r0, "energy"), "joules");
  } else {
    for (const auto& [id, x] : workers_)
      if (x.doc["finished"] != true) energy += Num(Obj(x.doc, "energy"), "joules");
  }
  if (energy > energy_seen_j_)
    carbon_g_ += (energy - energy_seen_j_) / 3.6e6 * carbon_.pue * CarbonAt(now_unix);
  // At the end the job's own figure, as its JSON has it (it leaves out workers lost on the way).
  if (energy > energy_seen_j_ || finished) energy_seen_j_ = energy;
  if (r0 && &w.doc == r0)
    history_.push_back({now_unix, Num(*r0, "samples_per_s"), Num(*r0, "loss"), energy_seen_j_,
                        carbon_g_, (*r0)["step"].get<int64_t>(), (*r0)["world"].get<int64_t>()});
  while (history_.size() > kHistory) history_.pop_front();
}

void JobView::Replay(const std::string& result_json, const std::string& source, double now_unix) {
  const json r = json::parse(result_json, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&source](const std::string& what) {
    return Error(ErrorCode::kInvalidArgument,
                 source + ": " + what + " (expected the JSON of train --json or elastic --json)");
  };
  if (!r.is_object()) throw bad("not a JSON object");
  for (const char* k : {"world_size", "steps", "total_steps", "samples", "generation"})
    if (!r.contains(k) || !r[k].is_number_integer())
      throw bad(std::string(k) + " is not an integer");
  if (!IntegerIn(r["world_size"], 1, 65536)) throw bad("world_size out of range");
  for (const char* k : {"steps", "total_steps", "samples", "generation"})
    if (!IntegerIn(r[k], 0, kMaxCount))
      throw bad(std::string(k) + " " + r[k].dump() + " is out of range (0..2^53)");
  // What the document's time is made of: huge values would sum to infinity (not a time).
  const double unix_time = Num(r, "started_unix") + Num(r, "wall_s");
  if (!std::isfinite(unix_time) || std::fabs(unix_time) > 1e12 || Num(r, "wall_s") < 0)
    throw bad("started_unix + wall_s is not a time (seconds since 1970, wall_s >= 0)");
  if (!r.contains("loss_curve") || !r["loss_curve"].is_array()) throw bad("no loss_curve");
  const json& comm = Obj(r, "comm");
  const json& compression = Obj(r, "compression");
  const double acc = Num(r, "test_accuracy", -1);
  json d = {{"format", "cdt-live"},
            {"version", 1},
            {"worker_id", 0},
            {"rank", 0},
            {"world", r["world_size"]},
            {"generation", r["generation"]},
            {"step", r["total_steps"].get<int64_t>() - 1},
            {"end_step", r["total_steps"]},
            {"epoch", 0},
            {"finished", true},
            {"unix_time", unix_time},
            {"wall_s", Num(r, "wall_s")},
            {"steps", r["steps"]},
            {"samples", r["samples"]},
            {"samples_per_s", Num(r, "samples_per_s")},
            {"loss", Num(r, "final_loss")},
            {"test_accuracy", acc},
            {"loss_curve", r["loss_curve"]},
            {"eval_curve", Arr(r, "eval_curve")},
            {"step_time", Obj(r, "step_time")},
            {"gradients",
             {{"bytes_fp32", Num(comm, "bytes_fp32")},
              {"bytes_wire", Num(comm, "bytes_wire")},
              {"compress", Str(compression, "compressor")},
              {"phases", Arr(compression, "phases")},
              {"residual_pct", Num(compression, "residual_pct")},
              {"overlap_ratio", Num(comm, "overlap_ratio")},
              {"bucket_comm_s", Arr(comm, "bucket_comm_s")},
              {"bucket_wait_s", Arr(comm, "bucket_wait_s")}}},
            {"checkpoints", Obj(r, "checkpoints")},
            {"recoveries", Arr(r, "recoveries")},
            {"energy", Obj(r, "energy")},
            {"comm",
             {{"allreduce", json::array()},
              {"sent_bytes", json::array()},
              {"received_bytes", json::array()}}}};
  try {
    Update(0, d.dump(), now_unix);
  } catch (const Error& e) {
    throw bad(e.what());  // a part of the result the live document would not take
  }
  std::lock_guard<std::mutex> lock(mu_);
  store_ = "replay of " + source + " (a finished job: no live data, no fault simulation)";
}

const json* JobView::Rank0() const {
  const json* best = nullptr;
  for (const auto& [id, w] : workers_)
    if (w.doc["rank"] == 0 && (!best || Num(w.doc, "unix_time") > Num(*best, "unix_time")))
      best = &w.doc;
  return best;
}

void JobView::SetTopology(json strategy, std::string source) {
  std::lock_guard<std::mutex> lock(mu_);
  topology_ = std::move(strategy);
  topology_source_ = std::move(source);
}

void JobView::SetCarbon(CarbonSeries carbon) {
  std::lock_guard<std::mutex> lock(mu_);
  carbon_ = std::move(carbon);
}

void JobView::SetStore(std::string description) {
  std::lock_guard<std::mutex> lock(mu_);
  store_ = std::move(description);
}

void JobView::SetStoreError(std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  store_error_ = std::move(error);
}

void JobView::RecordFault(const std::string& spec, double now_unix) {
  std::lock_guard<std::mutex> lock(mu_);
  ++faults_requested_;
  events_.push_back({{"unix_time", now_unix}, {"kind", "fault"}, {"spec", spec}});
  if (events_.size() > 200) events_.erase(events_.begin());
}

void JobView::RecordRefusal(const std::string& why, double now_unix) {
  std::lock_guard<std::mutex> lock(mu_);
  ++refused_;
  events_.push_back({{"unix_time", now_unix}, {"kind", "refused"}, {"why", why}});
  if (events_.size() > 200) events_.erase(events_.begin());
}

double JobView::CarbonAt(double unix) const {
  if (carbon_.g_per_kwh.empty()) return 0;
  const double h = std::floor((unix - carbon_.offset_s - carbon_.first_hour_unix) / 3600);
  if (std::isnan(h)) return 0;  // std::clamp keeps a NaN, and a NaN cast to an integer is UB
  const auto i = static_cast<int64_t>(
      std::clamp<double>(h, 0, static_cast<double>(carbon_.g_per_kwh.size() - 1)));
  return carbon_.g_per_kwh[static_cast<size_t>(i)];
}

bool JobView::FinalSeen() const {
  std::lock_guard<std::mutex> lock(mu_);
  const json* r0 = Rank0();
  return r0 && (*r0)["finished"] == true;
}

std::optional<std::vector<int>> JobView::ShapeWanted() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (!topology_.is_null()) return std::nullopt;
  const json* r0 = Rank0();
  if (!r0) return std::nullopt;
  const json& nodes = Arr(Obj(*r0, "topology"), "node_of_rank");
  if (nodes.empty()) return std::nullopt;
  std::vector<int> per_node;
  for (const json& n : nodes) {
    if (!n.is_number_integer() || n.get<int>() < 0 || n.get<int>() > 4096) return std::nullopt;
    const auto i = static_cast<size_t>(n.get<int>());
    if (per_node.size() <= i) per_node.resize(i + 1, 0);
    ++per_node[i];
  }
  return per_node;
}

json JobView::State(double now_unix) const {
  std::lock_guard<std::mutex> lock(mu_);
  json workers = json::array();
  int64_t generation = -1;
  for (const auto& [id, w] : workers_)
    generation = std::max<int64_t>(generation, w.doc["generation"].get<int64_t>());
  int slowest = -1;
  double slowest_s = -1;
  for (const auto& [id, w] : workers_) {
    json x = w.doc;
    x["age_s"] = now_unix - w.received_unix;
    x["current"] = w.doc["generation"] == generation;
    workers.push_back(x);
    const double steps = Num(w.doc, "steps");
    const json& t = Obj(w.doc, "step_time");
    const double compute = steps > 0 ? (Num(t, "forward_s") + Num(t, "backward_s")) / steps : 0;
    if (x["current"] == true && compute > slowest_s) {
      slowest_s = compute;
      slowest = w.doc["rank"].get<int>();
    }
  }
  json history = json::array();
  for (const Point& p : history_)
    history.push_back({p.unix, p.samples_per_s, p.loss, p.step, p.world, p.energy_j, p.carbon_g});
  json carbon = nullptr;
  if (!carbon_.g_per_kwh.empty()) {
    // A window of the trace around now: a day back, two days ahead (in job wall time).
    json hours = json::array();
    const double now_trace = now_unix - carbon_.offset_s;
    for (size_t i = 0; i < carbon_.g_per_kwh.size(); ++i) {
      const double t = carbon_.first_hour_unix + 3600.0 * static_cast<double>(i);
      if (t < now_trace - 24 * 3600.0 || t > now_trace + 48 * 3600.0) continue;
      hours.push_back({t + carbon_.offset_s, carbon_.g_per_kwh[i]});
    }
    carbon = {{"source", carbon_.source},
              {"hours", hours},
              {"now_g_per_kwh", CarbonAt(now_unix)},
              {"energy_j", energy_seen_j_},
              {"carbon_g", carbon_g_},
              {"budget_g", carbon_.budget_g},
              {"pue", carbon_.pue},
              {"offset_s", carbon_.offset_s}};
  }
  const json* r0 = Rank0();
  return {{"job", job_id_},
          {"now", now_unix},
          {"store", store_},
          {"store_error", store_error_},
          {"generation", generation},
          {"workers", workers},
          {"rank0", r0 ? *r0 : json(nullptr)},
          {"slowest_rank", slowest},
          {"history", history},
          {"topology_measured", topology_},
          {"topology_source", topology_source_},
          {"carbon", carbon},
          {"events", events_}};
}

// The job's own families, from rank 0's document.
namespace {

template <typename AddFamily>
void AddJobFamilies(const json& d, const AddFamily& family) {
  family("cdt_world_size", "gauge", "ranks in the job's current group")
      .samples.push_back(S(Num(d, "world")));
  family("cdt_generation", "gauge", "the group's generation (recoveries re-form it)")
      .samples.push_back(S(Num(d, "generation")));
  family("cdt_step", "gauge", "the last step whose loss is known")
      .samples.push_back(S(Num(d, "step")));
  family("cdt_samples_total", "counter", "samples the job trained on (all ranks)")
      .samples.push_back(S(Num(d, "samples")));
  family("cdt_samples_per_second", "gauge", "the job's throughput over its training time")
      .samples.push_back(S(Num(d, "samples_per_s")));
  family("cdt_loss", "gauge", "the global mean loss of the last step")
      .samples.push_back(S(Num(d, "loss")));
  if (Num(d, "test_accuracy", -1) >= 0)
    family("cdt_test_accuracy", "gauge", "the last evaluation's accuracy (0..1)")
        .samples.push_back(S(Num(d, "test_accuracy")));
  const json& rec = Arr(d, "recoveries");
  family("cdt_recoveries_total", "counter", "failures the group recovered from in process")
      .samples.push_back(S(static_cast<double>(rec.size())));
  if (!rec.empty()) {
    family("cdt_last_recovery_detection_seconds", "gauge", "failure to first survivor's error")
        .samples.push_back(S(Num(rec.back(), "detected_after_s")));
    family("cdt_last_recovery_rto_seconds", "gauge",
           "failure to the new group's first completed step")
        .samples.push_back(S(Num(rec.back(), "rto_s")));
    family("cdt_last_recovery_lost_steps", "gauge", "uncommitted steps trained again")
        .samples.push_back(S(Num(rec.back(), "lost_steps")));
  }
}

}  // namespace

std::vector<MetricFamily> JobView::Metrics(double now_unix) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<MetricFamily> f;
  // The references handed out stay valid: the vector never grows past what is reserved here.
  constexpr size_t kFamilies = 48;
  f.reserve(kFamilies);
  const auto family = [&f](const char* name, const char* type, const char* help) -> MetricFamily& {
    if (f.size() == kFamilies)
      throw Error(ErrorCode::kInvalidArgument, "more metric families than reserved");
    f.push_back({name, help, type, {}});
    return f.back();
  };
  const json* r0 = Rank0();
  MetricFamily& up =
      family("cdt_job_up", "gauge", "1 while rank 0's newest live document is under 10 s old");
  up.samples.push_back(S(r0 && now_unix - Num(*r0, "unix_time") < 10 ? 1 : 0, {{"job", job_id_}}));
  if (r0) AddJobFamilies(*r0, family);
  MetricFamily& steps = family("cdt_rank_steps_total", "counter", "steps this worker ran");
  MetricFamily& phase = family("cdt_rank_step_seconds_total", "counter",
                               "training-thread seconds by part of the step");
  MetricFamily& ar_ops = family("cdt_allreduce_ops_total", "counter", "allreduces by algorithm");
  MetricFamily& ar_bytes =
      family("cdt_allreduce_bytes_total", "counter", "buffer bytes allreduced by algorithm");
  MetricFamily& ar_s = family("cdt_allreduce_seconds_total", "counter",
                              "communicator-thread seconds in allreduce by algorithm");
  MetricFamily& sent = family("cdt_transport_sent_bytes_total", "counter",
                              "bytes sent to a peer over the network transport");
  MetricFamily& recv = family("cdt_transport_received_bytes_total", "counter",
                              "bytes received from a peer over the network transport");
  MetricFamily& grad = family("cdt_gradient_bytes_total", "counter",
                              "gradient bytes reduced: fp32 before compression, wire after");
  MetricFamily& ratio = family("cdt_compression_ratio", "gauge", "fp32 bytes / wire bytes");
  MetricFamily& residual =
      family("cdt_compression_residual_percent", "gauge", "error-feedback residual, % of sent");
  MetricFamily& overlap =
      family("cdt_overlap_ratio", "gauge", "share of gradient communication hidden behind compute");
  MetricFamily& ckpt = family("cdt_checkpoints_total", "counter", "checkpoints written");
  MetricFamily& ckpt_bytes =
      family("cdt_checkpoint_bytes_total", "counter", "checkpoint file bytes");
  MetricFamily& ckpt_s = family("cdt_checkpoint_write_seconds_total", "counter",
                                "background seconds encoding and writing checkpoints");
  MetricFamily& energy = family("cdt_rank_energy_joules_total", "counter",
                                "energy metered by this worker's process (0 without a meter)");
  MetricFamily& age =
      family("cdt_live_age_seconds", "gauge", "age of the worker's newest document");
  for (const auto& [id, w] : workers_) {
    const json& d = w.doc;
    const std::string worker = std::to_string(id), rank = d["rank"].dump();
    const auto L = [&](std::vector<std::pair<std::string, std::string>> extra = {}) {
      extra.insert(extra.begin(), {{"worker", worker}, {"rank", rank}});
      return extra;
    };
    steps.samples.push_back(S(Num(d, "steps"), L()));
    const json& t = Obj(d, "step_time");
    for (const char* p : {"forward", "backward", "comm_wait", "optimizer"})
      phase.samples.push_back(S(Num(t, (std::string(p) + "_s").c_str()), L({{"phase", p}})));
    const json& comm = Obj(d, "comm");
    for (const json& a : Arr(comm, "allreduce")) {
      if (!a.is_object()) continue;
      const std::string algo = Str(a, "name");
      ar_ops.samples.push_back(S(Num(a, "ops"), L({{"algorithm", algo}})));
      ar_bytes.samples.push_back(S(Num(a, "bytes"), L({{"algorithm", algo}})));
      ar_s.samples.push_back(S(Num(a, "seconds"), L({{"algorithm", algo}})));
    }
    const json& s = Arr(comm, "sent_bytes");
    const json& r = Arr(comm, "received_bytes");
    for (size_t p = 0; p < s.size() && p < r.size(); ++p) {
      if (static_cast<int64_t>(p) == d["rank"].get<int64_t>()) continue;
      sent.samples.push_back(
          S(s[p].is_number() ? s[p].get<double>() : 0, L({{"peer", std::to_string(p)}})));
      recv.samples.push_back(
          S(r[p].is_number() ? r[p].get<double>() : 0, L({{"peer", std::to_string(p)}})));
    }
    const json& g = Obj(d, "gradients");
    grad.samples.push_back(S(Num(g, "bytes_fp32"), L({{"kind", "fp32"}})));
    grad.samples.push_back(S(Num(g, "bytes_wire"), L({{"kind", "wire"}})));
    if (Num(g, "bytes_wire") > 0)
      ratio.samples.push_back(S(Num(g, "bytes_fp32") / Num(g, "bytes_wire"), L()));
    residual.samples.push_back(S(Num(g, "residual_pct"), L()));
    overlap.samples.push_back(S(Num(g, "overlap_ratio"), L()));
    const json& c = Obj(d, "checkpoints");
    ckpt.samples.push_back(S(Num(c, "written"), L()));
    ckpt_bytes.samples.push_back(S(Num(c, "file_bytes"), L()));
    ckpt_s.samples.push_back(S(Num(c, "encode_s") + Num(c, "write_s"), L()));
    energy.samples.push_back(S(Num(Obj(d, "energy"), "joules"), L()));
    age.samples.push_back(S(now_unix - w.received_unix, L()));
  }
  family("cdt_energy_joules_total", "counter",
         "the job's energy: every worker's metered joules (rank 0's sum at the end)")
      .samples.push_back(S(energy_seen_j_));
  family("cdt_carbon_grams_total", "counter",
         "energy x PUE x the trace's carbon intensity of the hour it was used (0 without a trace)")
      .samples.push_back(S(carbon_g_));
  family("cdt_dashboard_fault_requests_total", "counter", "faults queued through the dashboard")
      .samples.push_back(S(static_cast<double>(faults_requested_)));
  family("cdt_dashboard_refused_requests_total", "counter",
         "changing requests refused (no or wrong secret, bad request)")
      .samples.push_back(S(static_cast<double>(refused_)));
  return f;
}

}  // namespace cdt::dashboard
