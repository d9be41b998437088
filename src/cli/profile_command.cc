#include "cli/profile_command.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cdt/error.h"
#include "cli/child_process.h"
#include "common/file_io.h"
#include "common/file_system.h"
#include "common/usable_cpus.h"
#include "green/energy_meter.h"
#include "sim/model_profile.h"

namespace cdt::cli {
namespace {

namespace fs = std::filesystem;

std::vector<int> IntList(const std::string& text, const char* flag) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const int v = std::stoi(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(v);
    } catch (const std::exception&) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string("profile: ") + flag + ": '" + item + "' is not a positive integer");
    }
  }
  if (out.empty())
    throw Error(ErrorCode::kInvalidArgument, std::string("profile: ") + flag + " is empty");
  return out;
}

nlohmann::json ReadJson(const std::string& path, const std::string& what) {
  const std::optional<std::string> text = LocalFileSystem().ReadIfExists(path, kMaxTextFileBytes);
  if (!text) throw Error(ErrorCode::kIo, "profile: " + what + " wrote no " + path);
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) throw Error(ErrorCode::kIo, "profile: " + path + " is not JSON");
  return j;
}

// One `train` run on one rank; its per-step means.
sim::ComputePoint MeasureStep(const ProfileOptions& o, const Environment& env, const fs::path& work,
                              int threads, int batch, sim::ModelProfile* p) {
  const std::string json =
      (work / ("t" + std::to_string(threads) + "-b" + std::to_string(batch) + ".json")).string();
  std::vector<std::string> args = {"train",
                                   "--model",
                                   o.model,
                                   "--nproc-per-node",
                                   "1",
                                   "--threads",
                                   std::to_string(threads),
                                   "--batch-size",
                                   std::to_string(batch),
                                   "--steps",
                                   std::to_string(o.steps),
                                   "--no-progress",
                                   "--json",
                                   json};
  args.insert(args.end(), o.train_args.begin(), o.train_args.end());
  const std::string what =
      "the run on " + std::to_string(threads) + " thread(s) at batch " + std::to_string(batch);
  if (const int rc = RunChild(env.self_exe, args, nullptr, "profile"); rc != 0)
    throw Error(ErrorCode::kIo, "profile: " + what + " failed (exit " + std::to_string(rc) +
                                    "); its output is above");
  const nlohmann::json r = ReadJson(json, what);
  const double steps = std::max<double>(1, r.at("steps").get<double>());
  const nlohmann::json& t = r.at("step_time");
  sim::ComputePoint c;
  c.batch = batch;
  c.threads = threads;
  c.forward_s = t.at("forward_s").get<double>() / steps;
  c.backward_s = t.at("backward_s").get<double>() / steps;
  c.optimizer_s = t.at("optimizer_s").get<double>() / steps;
  const double step = r.at("wall_s").get<double>() / steps;
  c.other_s = std::max(0.0, step - c.forward_s - c.backward_s - c.optimizer_s -
                                t.at("comm_wait_s").get<double>() / steps);
  p->parameters = r.at("params").get<int64_t>();
  std::printf(
      "profile: %d thread(s), batch %d: forward %.2f ms, backward %.2f ms, optimizer %.2f "
      "ms, rest %.2f ms per step (%.1f samples/s)\n",
      threads, batch, 1e3 * c.forward_s, 1e3 * c.backward_s, 1e3 * c.optimizer_s, 1e3 * c.other_s,
      r.at("samples_per_s").get<double>());
  std::fflush(stdout);
  return c;
}

// From rank 0's timeline of the two-rank run (docs/training.md, --timeline): when each bucket
// was ready as a fraction of its step's backward, and how long a ready bucket waited for its
// communication thread beyond the channel's earlier work. Steps 0 and 1 are left out (warm-up).
void ReadTimeline(const std::string& path, sim::ModelProfile* p) {
  const nlohmann::json doc = ReadJson(path, "the two-rank layout run's timeline");
  struct Span {
    double ts, dur;
    int tid;
    const nlohmann::json* e;
  };
  std::vector<Span> backward, buckets;
  for (const nlohmann::json& e : doc.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("pid", -1) != 0) continue;
    const std::string name = e.value("name", "");
    const Span sp{e.value("ts", 0.0), e.value("dur", 0.0), e.value("tid", 0), &e};
    if (name == "backward" && e.at("args").value("step", 0.0) >= 2) backward.push_back(sp);
    if (name.rfind("bucket ", 0) == 0) buckets.push_back(sp);
  }
  std::sort(buckets.begin(), buckets.end(),
            [](const Span& a, const Span& b) { return a.ts < b.ts; });
  const size_t n = p->bucket_bytes.size();
  std::vector<double> sum(n, 0), count(n, 0);
  double sx = 0, sy = 0, sxx = 0, sxy = 0, pts = 0;  // duration against wire bytes
  std::map<int, double> channel_free;
  double wait = 0, waits = 0;
  for (const Span& b : buckets) {
    const size_t i = std::stoul((*b.e)["name"].get<std::string>().substr(7));
    const nlohmann::json& a = (*b.e)["args"];
    const double launched = b.ts - a.value("queued_us", 0.0);
    const double ready = launched - a.value("held_for_order_us", 0.0);
    const double free = channel_free[b.tid];
    channel_free[b.tid] = b.ts + b.dur;
    for (const Span& bw : backward)
      if (i < n && ready >= bw.ts && ready <= bw.ts + bw.dur + 50 && bw.dur > 0) {
        sum[i] += std::min(1.0, (ready - bw.ts) / bw.dur);
        count[i] += 1;
        wait += std::max(0.0, b.ts - std::max(launched, free));
        waits += 1;
        const double x = a.value("wire_bytes", 0.0), y = b.dur * 1e-6;
        sx += x, sy += y, sxx += x * x, sxy += x * y, pts += 1;
      }
  }
  p->bucket_ready_fraction.clear();
  for (size_t i = 0; i < n; ++i) {
    if (count[i] == 0) {  // never seen inside a backward: keep the proportional default
      p->bucket_ready_fraction.clear();
      break;
    }
    p->bucket_ready_fraction.push_back(sum[i] / count[i]);
  }
  p->comm_wakeup_s = waits > 0 ? wait / waits * 1e-6 : 0;
  const double den = pts * sxx - sx * sx;
  if (pts >= 2 && den > 0) {
    p->loaded_s_per_byte = std::max(0.0, (pts * sxy - sx * sy) / den);
    p->loaded_alpha_s = std::max(0.0, (sy - p->loaded_s_per_byte * sx) / pts);
  }
}

// The buckets as a multi-rank job lays them out (one rank has no priority connection and groups
// them differently): a short two-rank run, one thread each.
void MeasureLayout(const ProfileOptions& o, const Environment& env, const fs::path& work, int batch,
                   sim::ModelProfile* p) {
  const std::string json = (work / "layout.json").string();
  std::vector<std::string> args = {"train",
                                   "--model",
                                   o.model,
                                   "--nproc-per-node",
                                   "2",
                                   "--threads",
                                   "1",
                                   "--batch-size",
                                   std::to_string(batch),
                                   "--steps",
                                   "12",
                                   "--no-progress",
                                   "--json",
                                   json,
                                   "--timeline",
                                   (work / "layout-timeline.json").string()};
  args.insert(args.end(), o.train_args.begin(), o.train_args.end());
  if (const int rc = RunChild(env.self_exe, args, nullptr, "profile"); rc != 0)
    throw Error(ErrorCode::kIo, "profile: the two-rank layout run failed (exit " +
                                    std::to_string(rc) + "); its output is above");
  const nlohmann::json r = ReadJson(json, "the two-rank layout run");
  p->bucket_bytes.clear();
  p->bucket_priority.clear();
  for (const nlohmann::json& e : r.at("comm").at("bucket_elements"))
    p->bucket_bytes.push_back(4.0 * e.get<double>());
  for (const nlohmann::json& b : r.at("comm").at("bucket_priority"))
    p->bucket_priority.push_back(b.get<bool>());
  if (p->bucket_priority.size() != p->bucket_bytes.size()) p->bucket_priority.clear();
  ReadTimeline((work / "layout-timeline.json").string(), p);
  std::string fractions;
  for (double f : p->bucket_ready_fraction)
    fractions += (fractions.empty() ? "" : " ") + sim::Num(f, 2);
  std::printf(
      "profile: %zu bucket(s) as two ranks lay them out, ready at %s of backward; a ready "
      "bucket waited %.2f ms for its thread; a collective took %.3f ms + %.2f ns/byte "
      "while both cores computed\n",
      p->bucket_bytes.size(), fractions.empty() ? "(not measured)" : fractions.c_str(),
      1e3 * p->comm_wakeup_s, 1e3 * p->loaded_alpha_s, 1e9 * p->loaded_s_per_byte);
}

void MeasureCompression(const ProfileOptions& o, const Environment& env, const fs::path& work,
                        sim::ModelProfile* p) {
  const std::string json = (work / "compress.json").string();
  const double bytes = p->gradient_bytes();
  const std::vector<std::string> args = {
      "bench",       "compress", "--compressors",
      o.compressors, "--size",   std::to_string(static_cast<long long>(bytes)),
      "--iters",     "5",        "--json",
      json};
  if (const int rc = RunChild(env.self_exe, args, nullptr, "profile"); rc != 0)
    throw Error(ErrorCode::kIo, "profile: bench compress failed (exit " + std::to_string(rc) + ")");
  const nlohmann::json doc = ReadJson(json, "bench compress");  // outlives the loop's reference
  for (const nlohmann::json& row : doc.at("results")) {
    sim::CompressionCost c;
    c.name = row.at("compressor").get<std::string>();
    c.wire_ratio = bytes / std::max(1.0, row.at("wire_bytes").get<double>());
    c.seconds_per_byte = row.at("time_ms").get<double>() * 1e-3 / bytes;
    p->compression.push_back(c);
  }
}

}  // namespace

void AddProfileCommand(CLI::App& app, ProfileOptions* o) {
  CLI::App* cmd = app.add_subcommand(
      "profile", "measure a model on this machine for `predict` (docs/predict.md)");
  cmd->add_option("--model", o->model, "mlp | cnn | moe-transformer")->capture_default_str();
  cmd->add_option("--batch-sizes", o->batch_sizes, "batch sizes to time, comma-separated")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "thread counts to time (default 1 .. usable CPUs)");
  cmd->add_option("--steps", o->steps, "steps per timed run")->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "timed runs per point (the median one is kept)")
      ->capture_default_str();
  cmd->add_option("--compressors", o->compressors, "compressors to time, or none")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "the profile to write (default <model>-profile.json)");
  cmd->add_option("train_args", o->train_args, "more train options, after --");
}

int RunProfile(const ProfileOptions& o, const Environment& env) {
  if (o.steps < 5) throw Error(ErrorCode::kInvalidArgument, "profile: --steps must be >= 5");
  if (o.repeats < 1 || o.repeats > 99)
    throw Error(ErrorCode::kInvalidArgument, "profile: --repeats must be 1..99");
  std::string threads_text = o.threads;
  if (threads_text.empty())
    for (int t = 1; t <= UsableCpus(); ++t) threads_text += (t > 1 ? "," : "") + std::to_string(t);
  const std::vector<int> threads = IntList(threads_text, "--threads");
  const std::vector<int> batches = IntList(o.batch_sizes, "--batch-sizes");
  const fs::path work = fs::temp_directory_path() / ("cdt-profile-" + std::to_string(getpid()));
  fs::create_directories(work);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{work};

  sim::ModelProfile p;
  p.model = o.model;
  std::string cmd = "cann-dist-train profile --model " + o.model + " --batch-sizes " +
                    o.batch_sizes + " --threads " + threads_text + " --steps " +
                    std::to_string(o.steps) + " --repeats " + std::to_string(o.repeats);
  for (const std::string& a : o.train_args) cmd += " " + a;
  const std::string cpu = green::CpuModelName();
  p.device = "host CPU: " + (cpu.empty() ? std::string("unknown") : cpu) + ", " +
             std::to_string(UsableCpus()) + " usable CPU(s)";
  std::printf("profile: %s on %s: %zu run(s) of %d steps\n", o.model.c_str(), p.device.c_str(),
              threads.size() * batches.size() * o.repeats, o.steps);
  // Each point --repeats times; the run with the median step time (this machine is noisy).
  for (int t : threads)
    for (int b : batches) {
      std::vector<sim::ComputePoint> runs;
      for (int r = 0; r < o.repeats; ++r) runs.push_back(MeasureStep(o, env, work, t, b, &p));
      auto total = [](const sim::ComputePoint& c) {
        return c.forward_s + c.backward_s + c.optimizer_s + c.other_s;
      };
      std::sort(runs.begin(), runs.end(),
                [&](const sim::ComputePoint& x, const sim::ComputePoint& y) {
                  return total(x) < total(y);
                });
      p.compute.push_back(runs[runs.size() / 2]);
    }
  MeasureLayout(o, env, work, batches.back(), &p);
  if (o.compressors != "none") MeasureCompression(o, env, work, &p);
  p.source = "measured: " + cmd;
  const std::string out = o.json.empty() ? o.model + "-profile.json" : o.json;
  WriteFileAtomically(out, sim::ModelProfileJson(p));
  std::printf("profile: %lld parameters in %zu bucket(s), %zu compressor(s) timed; wrote %s\n",
              static_cast<long long>(p.parameters), p.bucket_bytes.size(), p.compression.size(),
              out.c_str());
  return 0;
}

}  // namespace cdt::cli
