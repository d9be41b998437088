// cann-dist-train: command-line entry point. Parses argv and the environment once, then hands plain
// config structs to the libraries (nothing below src/cli/ reads either).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cdt/error.h"
#include "cdt/version.h"
#include "cli/bench_allreduce.h"
#include "cli/bench_compress.h"
#include "cli/cert_command.h"
#include "cli/dashboard_command.h"
#include "cli/elastic_train.h"
#include "cli/environment.h"
#include "cli/fault_inject.h"
#include "cli/green_command.h"
#include "cli/launch_options.h"
#include "cli/live_publisher.h"
#include "cli/open_files.h"
#include "cli/predict_command.h"
#include "cli/profile_command.h"
#include "cli/topo_scan.h"
#include "cli/train_command.h"
#include "comm/auth.h"
#include "elastic/worker_group.h"
#include "topology/bucket_size.h"

namespace {

using namespace cdt;
using namespace cdt::cli;

// `elastic [launch and elastic options] -- [train options]` is `train --elastic` with both.
std::vector<std::string> ElasticAsTrain(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  if (args.size() < 2 || args[1] != "elastic") return args;
  std::vector<std::string> out = {args[0], "train", "--elastic"};
  for (size_t i = 2; i < args.size(); ++i)
    if (args[i] != "--") out.push_back(args[i]);
  return out;
}

// Overwrites the value of --job-secret in this process's own argv, which /proc/PID/cmdline (and
// so ps) shows to every user, as MySQL's client does with -pPASSWORD. The parsed copy keeps it.
// Workers never get it on their command line (RunAsAgent drops the flag).
void HideSecretFromProcessList(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) return;
    char* value = nullptr;
    if (std::strcmp(argv[i], "--job-secret") == 0 && i + 1 < argc)
      value = argv[i + 1];
    else if (std::strncmp(argv[i], "--job-secret=", 13) == 0)
      value = argv[i] + 13;
    if (value) std::memset(value, 'x', std::strlen(value));
  }
}

// bench allreduce | compress: their options, and where CLI11 put them.
struct BenchVerbs {
  CLI::App* allreduce = nullptr;
  LaunchOptions allreduce_launch;
  BenchAllreduceOptions allreduce_options;
  bool adaptive = false;
  TopoScanOptions topo;
  CLI::App* compress = nullptr;
  LaunchOptions compress_launch;
  BenchCompressOptions compress_options;
};

void AddBenchVerbs(CLI::App& app, const Environment& env, BenchVerbs* v) {
  CLI::App* bench_cmd = app.add_subcommand("bench", "benchmarks");
  bench_cmd->require_subcommand(1);
  CLI::App* ar = v->allreduce =
      bench_cmd->add_subcommand("allreduce", "allreduce busbw, nccl-tests style");
  BenchAllreduceOptions& bench = v->allreduce_options;
  AddLaunchOptions(ar, &v->allreduce_launch, env);
  ar->add_option("--algo", bench.algo, "ring|rd|rhd|tree|hier|auto|all")->capture_default_str();
  ar->add_option("--dtype", bench.dtype, "f32|f64|f16|bf16|i32|i64")->capture_default_str();
  ar->add_option("--min-bytes", bench.min_bytes, "smallest message (sizes step x4)")
      ->capture_default_str();
  ar->add_option("--max-bytes", bench.max_bytes, "largest message")->capture_default_str();
  ar->add_option("--iters", bench.iters, "timed iterations per size (0 = by size)")
      ->capture_default_str();
  ar->add_option(
      "--warmup", bench.warmup,
      "untimed iterations per size (0 = at least iters/5, then until 4 MiB moved or 0.5 s passed)");
  ar->add_flag("--check", bench.check, "verify every element against the closed form");
  ar->add_option("--device", bench.device,
                 "where the buffers live: cpu, cuda (the local rank's GPU), cuda:N, or "
                 "host-standin (host memory behind the device staging pipeline)")
      ->capture_default_str();
  ar->add_option("--staging-chunk", bench.staging_chunk,
                 "bytes per chunk of the device staging pipeline")
      ->capture_default_str();
  ar->add_option("--json", bench.json, "write results to this file (rank 0)");
  ar->add_flag("--adaptive-comm", v->adaptive,
               "pick `auto` algorithms with the measured topology planner (cached)");
  ar->add_option("--cache-dir", v->topo.cache_dir, "strategy cache directory ('none' = off)");
  ar->add_flag("--rescan", v->topo.rescan, "ignore the strategy cache and probe again");

  CLI::App* c = v->compress = bench_cmd->add_subcommand(
      "compress", "encode + decode time and GB/s per gradient compressor (docs/benchmarks.md)");
  BenchCompressOptions& bc = v->compress_options;
  AddLaunchOptions(c, &v->compress_launch, env);
  c->add_option("--compressors", bc.compressors, "comma-separated names, or all")
      ->capture_default_str();
  CLI::Option* size_opt =
      c->add_option("--size", bc.size, "float32 gradient bytes (one square-ish matrix)")
          ->capture_default_str();
  c->add_option("--shape", bc.shape, "the gradient's tensors instead: ROWSxCOLS,N,...")
      ->excludes(size_opt);
  c->add_option("--ratio", bc.ratio, "top-k / random-k share of elements (0 = train's default)");
  c->add_option("--values", bc.values,
                "top-k / random-k: the type their values travel in, fp32|fp16|bf16 (train "
                "--compress-values)")
      ->capture_default_str();
  c->add_option("--powersgd-rank", bc.powersgd_rank, "PowerSGD rank")->capture_default_str();
  c->add_flag("!--no-error-feedback", bc.error_feedback,
              "time the compressors without the error-feedback wrapper `train` uses");
  c->add_option("--iters", bc.iters, "timed calls per compressor")->capture_default_str();
  c->add_option("--warmup", bc.warmup, "untimed calls first")->capture_default_str();
  c->add_option("--json", bc.json, "write results to this file (rank 0)");
}

int RunBenchVerb(BenchVerbs& v, const Environment& env, int argc, char** argv) {
  if (v.allreduce->parsed()) {
    ValidateLaunchOptions(v.allreduce_launch);
    if (env.autotune)
      v.allreduce_options.autotune_trials = std::max(0, std::atoi(env.autotune->c_str()));
    if (!ShouldRunAsWorker(env)) return RunAsAgent(v.allreduce_launch, argc, argv);
    WorkerSession s = JoinGroup(env, v.allreduce_launch);
    v.allreduce_options.local_rank = IdentityOf(env).local_rank;
    if (!v.adaptive) return RunBenchAllreduce(*s.comm, v.allreduce_options);
    topology::Discovery d = DiscoverTopology(*s.comm, v.topo, env.strategy_cache_dir);
    s.comm->SetAllreduceSelector(d.planner);
    return RunBenchAllreduce(*s.comm, v.allreduce_options, &d.planner->model());
  }
  ValidateLaunchOptions(v.compress_launch);
  ValidateBenchCompressOptions(v.compress_options);  // once, before any worker starts
  if (!ShouldRunAsWorker(env)) return RunAsAgent(v.compress_launch, argc, argv);
  WorkerSession s = JoinGroup(env, v.compress_launch);
  return RunBenchCompress(*s.comm, v.compress_options);
}

// topo-scan.
struct TopoScanVerb {
  CLI::App* cmd = nullptr;
  LaunchOptions launch;
  TopoScanOptions scan;
  bool adaptive = true;
};

void AddTopoScanVerb(CLI::App& app, const Environment& env, TopoScanVerb* v) {
  CLI::App* cmd = v->cmd = app.add_subcommand(
      "topo-scan", "discover nodes, NICs and link levels; print the allreduce plan");
  TopoScanOptions& scan = v->scan;
  AddLaunchOptions(cmd, &v->launch, env);
  cmd->add_flag("--adaptive-comm", v->adaptive, "show the adaptive algorithm plan (default)");
  cmd->add_option("--cache-dir", scan.cache_dir, "strategy cache directory ('none' = off)");
  cmd->add_flag("--rescan", scan.rescan, "ignore the strategy cache and probe again");
  cmd->add_option("--json", scan.json, "write the scan to this file (rank 0)");
  cmd->add_flag("--gradient-compress", scan.gradient_compress,
                "recommend a gradient compression setting (see --gradient-size, --compute-ms)");
  cmd->add_option("--gradient-size", scan.gradient_size,
                  "f32 gradient bytes per step (4K, 100M, 1G)")
      ->capture_default_str();
  cmd->add_option("--compute-ms", scan.compute_ms,
                  "backward time per step that can hide communication (0 = unknown)");
}

int RunTopoScanVerb(const TopoScanVerb& v, const Environment& env, int argc, char** argv) {
  ValidateLaunchOptions(v.launch);
  if (!ShouldRunAsWorker(env)) return RunAsAgent(v.launch, argc, argv);
  WorkerSession s = JoinGroup(env, v.launch);
  return RunTopoScan(*s.comm, v.scan, env.strategy_cache_dir);
}

// train (and `elastic`, which is `train --elastic`).
struct TrainVerb {
  CLI::App* cmd = nullptr;
  LaunchOptions launch;
  TrainCommandOptions options;
  bool adaptive = false;
  TopoScanOptions topo;
  ElasticOptions elastic;
};

void AddTrainVerb(CLI::App& app, const Environment& env, TrainVerb* v) {
  CLI::App* cmd = v->cmd = app.add_subcommand("train", "data-parallel training (libtorch)");
  AddLaunchOptions(cmd, &v->launch, env);
  AddTrainOptions(cmd, &v->options);
  cmd->add_flag("--adaptive-comm", v->adaptive,
                "measure the topology (or read the strategy cache): allreduce algorithms "
                "from its planner, gradient bucket size from its cost model");
  cmd->add_option("--cache-dir", v->topo.cache_dir, "strategy cache directory ('none' = off)");
  cmd->add_flag("--rescan", v->topo.rescan, "ignore the strategy cache and probe again");
  AddElasticOptions(cmd, &v->elastic);
  app.add_subcommand("elastic",
                     "elastic training: `elastic [launch options] -- [train options]` "
                     "is `train --elastic` with both (docs/elastic.md)");
}

int RunTrainVerb(TrainVerb& v, const Environment& env, int argc, char** argv) {
  TrainCommandOptions& train_opts = v.options;
  LaunchOptions& launch = v.launch;
  const ElasticOptions& elastic = v.elastic;
  train_opts.train.log = env.MakeLog();
  if (train_opts.energy_windows)
    train_opts.train.metrics.energy_profiles =
        env.knowledge_base + "/hardware_profiles/devices.json";
  launch.elastic = elastic.enabled;
  const std::string defaults = ApplyJourneyDefaults(*v.cmd, &train_opts);
  if (elastic.enabled && !defaults.empty() && !ShouldRunAsWorker(env)) {
    std::printf("cann-dist-train elastic: defaults used: %s\n", defaults.c_str());
    std::fflush(stdout);
  }
  ValidateLaunchOptions(launch);
  ParseFaults(elastic.inject);                    // bad specs fail here, before any worker starts
  train::ValidateTrainOptions(train_opts.train);  // as do bad train options (once, not per worker)
  if (!elastic.inject.empty() && !elastic.enabled)
    throw Error(ErrorCode::kInvalidArgument,
                "--inject needs --elastic (without it a fault ends the job)");
  launch.spares = elastic.spares;
  launch.job_file = JobFilePath(env, launch.job_id);
  if (elastic.spares < 0 || (elastic.spares > 0 && !elastic.enabled))
    throw Error(ErrorCode::kInvalidArgument, "--spares needs --elastic and must not be negative");
  if (!ShouldRunAsWorker(env)) return RunAsAgent(launch, argc, argv);
  train_opts.train.allocator = ConfigureAllocator(env, train_opts.use_default_allocator);
  const int local = env.worker ? env.worker->local_world_size : 1;
  // In words, for the result (and `assess`): what picks the algorithm per message size.
  train_opts.train.allreduce_selection = v.adaptive           ? "topology-planner"
                                         : env.allreduce_algo ? "forced " + *env.allreduce_algo
                                         : (env.allreduce_rules && !env.allreduce_rules->empty())
                                             ? "rules file"
                                             : "fixed thresholds";
  if (elastic.enabled)
    return RunElasticTraining(env, launch, train_opts, elastic, local,
                              v.adaptive ? &v.topo : nullptr);
  WorkerSession s = JoinGroup(env, launch, train_opts.train.reduction.overlap_next_forward,
                              /*training=*/true);
  if (v.adaptive) {
    topology::Discovery d = DiscoverTopology(*s.comm, v.topo, env.strategy_cache_dir);
    s.comm->SetAllreduceSelector(d.planner);
    if (s.priority_comm) s.priority_comm->SetAllreduceSelector(d.planner);
    train_opts.train.reduction.planned_bucket_bytes =
        topology::RecommendedBucketBytes(d.planner->model());
  }
#ifdef CDT_HAVE_TORCH  // without libtorch RunTrainCommand says how to get it
  if (env.live && s.store)
    train_opts.train.metrics.publish = LivePublisher(*s.store, launch.job_id);
#endif
  return RunTrainCommand(*s.comm, s.priority_comm.get(), train_opts, local);
}

int Main(int argc, char** argv) {
  RaiseOpenFileLimit();  // every rank holds 4 sockets per peer (cli/open_files.h)
  Environment env = Environment::FromProcess();
  CLI::App app{
      "cann-dist-train: data-parallel training: topology-aware collectives, gradient compression, "
      "elastic recovery, carbon-aware runs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cann-dist-train ") + cdt::Version());

  // launch: torchrun-style launcher for any program.
  LaunchOptions launch;
  std::vector<std::string> command;
  CLI::App* launch_cmd = app.add_subcommand(
      "launch",
      "start K workers per node of PROG with RANK/WORLD_SIZE/... set (torchrun-compatible)");
  AddLaunchOptions(launch_cmd, &launch, env);
  launch_cmd->add_option("command", command, "-- PROG ARGS...")->required();
  ElasticOptions launch_elastic;
  AddElasticOptions(launch_cmd, &launch_elastic);
  BenchVerbs bench;
  AddBenchVerbs(app, env, &bench);
  TopoScanVerb scan;
  AddTopoScanVerb(app, env, &scan);
  TrainVerb train;
  AddTrainVerb(app, env, &train);
  FaultInjectOptions inject;
  CLI::App* inject_cmd = app.add_subcommand(
      "fault-inject", "queue a fault for a running elastic job (docs/elastic.md)");
  AddFaultInjectOptions(inject_cmd, &inject, env);
  GreenOptions green_opts;
  CLI::App* green_cmd = app.add_subcommand(
      "green",
      "carbon-aware planning and training: energy, carbon traces, plans, reports (docs/green.md)");
  AddGreenOptions(green_cmd, &green_opts);
  CLI::App* secret_cmd = app.add_subcommand(
      "secret",
      "print a fresh 256-bit job secret: export CDT_JOB_SECRET=$(cann-dist-train secret)");
  DashboardTokenOptions token_opts;
  AddDashboardTokenOptions(secret_cmd, &token_opts, env);
  CertOptions cert_opts;
  const CertCommands cert_cmds = AddCertCommands(&app, &cert_opts);
  DashboardOptions dash_opts;
  CLI::App* dash_cmd =
      app.add_subcommand("dashboard", "the job's web dashboard (docs/dashboard.md)");
  dash_cmd->require_subcommand(1);
  AddDashboardOptions(
      dash_cmd->add_subcommand("cluster", "serve the dashboard of a running job (cann-dashboard)"),
      &dash_opts, env);
  PredictOptions predict_opts;
  AddPredictCommand(app, &predict_opts);
  AssessOptions assess_opts;
  AddAssessCommand(app, &assess_opts);
  ProfileOptions profile_opts;
  AddProfileCommand(app, &profile_opts);

  std::vector<std::string> args = ElasticAsTrain(argc, argv);
  HideSecretFromProcessList(argc, argv);  // `args` keeps it; what ps shows does not
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // CLI11 takes them reversed
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  if (secret_cmd->parsed()) {
    if (token_opts.print) return PrintDashboardToken(token_opts, env);
    std::printf("%s\n", auth::NewSecret().c_str());
    return 0;
  }
  if (inject_cmd->parsed()) return RunFaultInject(inject, env);
  if (dash_cmd->parsed()) return RunDashboard(dash_opts, env);
  if (green_cmd->parsed()) return RunGreen(green_opts, env);
  if (app.got_subcommand("predict")) return RunPredict(predict_opts, env);
  if (app.got_subcommand("assess")) return RunAssess(assess_opts);
  if (app.got_subcommand("profile")) return RunProfile(profile_opts, env);
  if (app.got_subcommand("cert")) return RunCert(cert_cmds, cert_opts, env);
  if (launch_cmd->parsed()) {
    const std::map<std::string, std::string> worker_env =
        ElasticLaunch(launch_elastic, JobFilePath(env, launch.job_id), &launch);
    ValidateLaunchOptions(launch);
    WarnAboutSecret(launch);
    GroupResult r = RunWorkerGroup(ToAgentConfig(launch), command, worker_env);
    if (!r.summary.empty()) std::fprintf(stderr, "cann-dist-train launch: %s", r.summary.c_str());
    return r.exit_code;
  }
  if (bench.allreduce->parsed() || bench.compress->parsed())
    return RunBenchVerb(bench, env, argc, argv);
  if (scan.cmd->parsed()) return RunTopoScanVerb(scan, env, argc, argv);
  if (train.cmd->parsed()) return RunTrainVerb(train, env, argc, argv);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const cdt::Error& e) {
    std::fprintf(stderr, "cann-dist-train: error (%s): %s\n", cdt::ErrorCodeName(e.code()),
                 e.what());
    return e.code() == cdt::ErrorCode::kInvalidArgument ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cann-dist-train: unexpected error: %s\n", e.what());
    return 1;
  }
}
