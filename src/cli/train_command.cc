#include "cli/train_command.h"

#include <cstdio>
#include <fstream>
#include <numeric>

#include "cdt/error.h"
#include "common/file_io.h"
#include "common/heap_retention.h"

namespace cdt::cli {

namespace {

// train: the model, the data and how long.
void AddRunOptions(CLI::App* cmd, TrainCommandOptions* o) {
  train::TrainOptions& t = o->train;
  cmd->add_option("--model", t.model.name, "mlp | cnn | moe-transformer | resnet18 | resnet50")->capture_default_str();
  cmd->add_option("--dataset", t.data.dataset, "fashion-mnist | synthetic")->capture_default_str();
  cmd->add_option("--data-dir", t.data.dir,
                  "Fashion-MNIST idx files (default /usr/share/datasets/fashion-mnist)");
  cmd->add_option("--synthetic-samples", t.data.synthetic_samples, "size of the synthetic training set")
      ->capture_default_str();
  cmd->add_option("--steps", t.steps, "optimizer steps (0 = from --epochs)")->capture_default_str();
  cmd->add_option("--epochs", t.epochs, "passes over the training set when --steps is 0")
      ->capture_default_str();
  cmd->add_option("--batch-size", t.data.batch_size, "samples per rank per step")->capture_default_str();
  cmd->add_option("--accumulate", t.data.accumulate, "micro-batches per step (gradient accumulation)")
      ->capture_default_str();
}

// train: the optimizer and the LR schedule.
void AddOptimizerOptions(CLI::App* cmd, TrainCommandOptions* o) {
  train::TrainOptions& t = o->train;
  cmd->add_option("--optimizer", t.optimizer.name, "sgd | adamw")->capture_default_str();
  cmd->add_option("--lr", t.optimizer.lr, "learning rate at --lr-reference-batch")->capture_default_str();
  cmd->add_option("--lr-reference-batch", t.optimizer.lr_reference_batch,
                  "linear LR scaling: lr x global batch / this (0 = off)")
      ->capture_default_str();
  cmd->add_option("--momentum", t.optimizer.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", t.optimizer.weight_decay, "weight decay")->capture_default_str();
  cmd->add_option("--warmup-steps", t.optimizer.warmup_steps,
                  "linear LR warm-up steps (-1 = automatic: when the rate is scaled up with the "
                  "global batch, 5 x log2(scale) steps, at most a quarter of the run; 0 = none)")
      ->capture_default_str();
  cmd->add_option("--larc-trust", t.optimizer.larc_trust,
                  "LARC (clip mode): no layer's step above this fraction of its weights' norm, "
                  "for large global batches (-1 = automatic: 0.05 when the rate is scaled up; "
                  "0 = off)")
      ->capture_default_str();
  cmd->add_flag("--cosine,!--no-cosine", t.optimizer.cosine, "cosine LR decay after warmup (default on)");
  cmd->add_option("--seed", t.seed, "model init and data order")->capture_default_str();
}

// train: gradient buckets, overlap and compression.
void AddReductionOptions(CLI::App* cmd, TrainCommandOptions* o) {
  train::TrainOptions& t = o->train;
  cmd->add_option("--bucket-mb", t.reduction.bucket_mb,
                  "gradient bucket size (0 = from the topology plan with --adaptive-comm, else a "
                  "quarter of the model, 256 KiB..25 MiB)");
  cmd->add_flag("--overlap-next-forward,!--no-overlap-next-forward", t.reduction.overlap_next_forward,
                "apply each bucket's update just before the next forward uses it; early layers' "
                "gradients on a second connection (default on)");
  cmd->add_option(
         "--compress", t.reduction.compress,
         "gradient compression: none|fp16|bf16|int8|topk|randomk|powersgd|signsgd|adaptive")
      ->capture_default_str();
  cmd->add_option("--compress-ratio", t.reduction.compress_ratio,
                  "topk/randomk: share of elements sent (default: topk 0.01, randomk 0.75)");
  cmd->add_option("--compress-values", t.reduction.compress_values,
                  "topk/randomk: the type the kept values travel in, fp32|fp16|bf16 (16-bit halves "
                  "their bytes; error feedback keeps the rounding)")
      ->capture_default_str();
  cmd->add_option("--powersgd-rank", t.reduction.powersgd_rank, "powersgd: rank of the approximation")
      ->capture_default_str();
  cmd->add_option("--powersgd-min-saved-bytes", t.reduction.powersgd_min_saved_bytes,
                  "powersgd (and adaptive): a bucket whose matrices would save fewer bytes is sent "
                  "uncompressed, in one allreduce instead of two")
      ->capture_default_str();
  cmd->add_flag("--error-feedback,!--no-error-feedback", t.reduction.error_feedback,
                "keep what compression dropped for the next step (default on)");
  cmd->add_flag("--momentum-correction,!--no-momentum-correction", t.reduction.momentum_correction,
                "topk/randomk/signsgd with sgd: compress the momentum velocity instead of the "
                "gradient (DGC; default on)");
  cmd->add_option("--compress-interval", t.reduction.compress_interval, "adaptive: steps between decisions")
      ->capture_default_str();
  cmd->add_option("--compress-min-exposed", t.reduction.compress_min_exposed,
                  "adaptive: compress only when uncompressed communication would be exposed for at "
                  "least this share of the step (0 = always compress)")
      ->capture_default_str();
}

// train: evaluation, checkpoints and resume.
void AddEvaluationAndCheckpointOptions(CLI::App* cmd, TrainCommandOptions* o) {
  train::TrainOptions& t = o->train;
  cmd->add_option("--eval-every", t.metrics.eval_every, "evaluate every N steps (0 = at the end)");
  cmd->add_option("--target-accuracy", t.metrics.target_accuracy,
                  "stop at the first evaluation reaching this test accuracy (time_to_target_s)");
  cmd->add_option("--checkpoint-dir", t.checkpoint.dir,
                  "write checkpoints here (docs/checkpoint-format.md; rank 0, in the background)");
  cmd->add_option("--checkpoint-every", t.checkpoint.every,
                  "steps between checkpoints (0 = at the end)");
  cmd->add_option("--checkpoint-codec", t.checkpoint.codec, "zstd | lz4 | none")
      ->capture_default_str();
  cmd->add_flag("--checkpoint-incremental", t.checkpoint.incremental,
                "write only what changed since the last full checkpoint");
  cmd->add_option("--checkpoint-full-every", t.checkpoint.full_every,
                  "with --checkpoint-incremental: every Nth checkpoint is full")
      ->capture_default_str();
  cmd->add_option(
         "--checkpoint-quantize", t.checkpoint.quantize,
         "none | int8: increments store parameters and momenta as int8 differences (lossy, "
         "docs/checkpoint-format.md)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-keep", t.checkpoint.keep,
                  "full checkpoints kept (with their increments)")
      ->capture_default_str();
  cmd->add_option("--checkpoint-mtbf", t.checkpoint.mtbf_s,
                  "checkpoint at the Young/Daly interval for this mean time between failures (s)");
  cmd->add_option("--health-interval", t.checkpoint.health_interval_s,
                  "seconds between health samples (failure prediction; 0 = off; docs/elastic.md)")
      ->capture_default_str();
  cmd->add_flag("--fault-predict", o->fault_predict,
                "predict failures: the health monitor samples every --health-interval seconds "
                "and a warning on any rank checkpoints at once (docs/elastic.md)");
  cmd->add_flag("--resume", t.checkpoint.resume,
                "continue from the newest valid checkpoint in --checkpoint-dir");
  cmd->add_option("--stop-after", t.stop_after,
                  "stop after this step (checkpointed); for resume tests");
}

// train: model shapes, threads, output.
void AddModelShapeAndOutputOptions(CLI::App* cmd, TrainCommandOptions* o) {
  train::TrainOptions& t = o->train;
  cmd->add_option(
         "--linear-blocks", t.model.linear_blocks,
         "mlp, cnn: split fc1 into this many row blocks, each reduced and applied on its own "
         "(docs/training.md)")
      ->capture_default_str();
  cmd->add_option("--layers", t.model.layers, "moe-transformer layers")->capture_default_str();
  cmd->add_option("--width", t.model.width, "moe-transformer width")->capture_default_str();
  cmd->add_option("--heads", t.model.heads, "moe-transformer attention heads")->capture_default_str();
  cmd->add_option("--experts", t.model.experts, "moe-transformer experts per layer")
      ->capture_default_str();
  cmd->add_option("--top-k", t.model.top_k, "moe-transformer experts per token")->capture_default_str();
  cmd->add_option("--aux-loss-weight", t.model.aux_loss_weight, "MoE load-balancing loss weight")
      ->capture_default_str();
  cmd->add_option("--threads", t.threads,
                  "torch threads per rank (0 = the CPUs this process may use, its affinity mask, / "
                  "ranks on this host)");
  cmd->add_flag("--progress,!--no-progress", t.metrics.progress,
                "live progress line on rank 0 (default on)");
  cmd->add_flag("--energy-windows", o->energy_windows,
                "meter every step's energy (RAPL, else the model of docs/green.md); JSON `energy`");
  cmd->add_option("--json", o->json, "write the results here (rank 0)");
  cmd->add_flag("--use-default-allocator", o->use_default_allocator,
                "leave glibc's malloc as it is: it unmaps large freed blocks and faults them in "
                "again at their next use (by default each worker keeps them; docs/training.md, "
                "'Memory')");
  cmd->add_option("--balance-batches", t.data.balance_batches,
                  "every K steps, split the global batch by the ranks' measured compute speed "
                  "(0 = off; docs/training.md)")
      ->capture_default_str();
  cmd->add_option(
      "--timeline", t.metrics.timeline,
      "write a Chrome-trace timeline of every rank here (rank 0; open in ui.perfetto.dev; "
      "docs/training.md)");
  cmd->add_option("--timeline-steps", t.metrics.timeline_steps, "steps the timeline covers, from the first")
      ->capture_default_str();
}

}  // namespace

void AddTrainOptions(CLI::App* cmd, TrainCommandOptions* o) {
  AddRunOptions(cmd, o);
  AddOptimizerOptions(cmd, o);
  AddReductionOptions(cmd, o);
  AddEvaluationAndCheckpointOptions(cmd, o);
  AddModelShapeAndOutputOptions(cmd, o);
}

std::string ConfigureAllocator(const Environment& env, bool use_default_allocator) {
  if (!env.allocator_set_by.empty()) return "as set by " + env.allocator_set_by;
  if (use_default_allocator) return "glibc defaults (--use-default-allocator)";
  if (!RetainFreedHeapMemory())
    return "the C library's defaults (mallopt refused: not glibc's malloc, or a sanitizer's)";
  return "glibc, freed memory kept (mmap threshold " +
         std::to_string(kRetainedMmapThreshold >> 20) + " MiB, trim threshold " +
         std::to_string(kRetainedTrimThreshold >> 20) + " MiB)";
}

std::string ApplyJourneyDefaults(const CLI::App& cmd, TrainCommandOptions* o) {
  std::string used;
  train::CheckpointOptions& c = o->train.checkpoint;
  if (o->fault_predict && c.health_interval_s <= 0)
    throw Error(ErrorCode::kInvalidArgument,
                "--fault-predict needs the health monitor: drop --health-interval 0");
  if ((c.incremental || o->fault_predict) && c.dir.empty()) {
    c.dir = "cdt-checkpoints";
    used += "--checkpoint-dir cdt-checkpoints; ";
  }
  if (cmd.count("--model") == 0)
    used += "--model " + o->train.model.name + " on Fashion-MNIST (" +
            (o->train.data.dir.empty() ? "/usr/share/datasets/fashion-mnist" : o->train.data.dir) +
            "); ";
  if (cmd.count("--epochs") == 0 && cmd.count("--steps") == 0)
    used += "--epochs " + std::to_string(static_cast<int>(o->train.epochs)) + "; ";
  if (!used.empty()) used.resize(used.size() - 2);
  return used;
}

int RunTrainCommand(Communicator& comm, Communicator* priority, TrainCommandOptions o,
                    int local_world_size) {
#ifndef CDT_HAVE_TORCH
  (void)comm;
  (void)priority;
  (void)o;
  (void)local_world_size;
  throw Error(
      ErrorCode::kInvalidArgument,
      "this build has no trainer: install libtorch-dev (scripts/install-deps.sh) and rebuild");
#else
  o.train.local_world_size = local_world_size;
  return ReportTrainResult(train::RunTraining(comm, o.train, priority), o, comm.rank());
#endif
}

int ReportTrainResult(const train::TrainResult& r, const TrainCommandOptions& o, int rank) {
  if (rank != 0) return r.params_consistent ? 0 : 1;
  std::printf(
      "trained %s (%lld parameters) on %d rank(s): %lld steps from step %lld, %lld samples in %.2f "
      "s"
      " = %.1f samples/s\n",
      r.model.c_str(), static_cast<long long>(r.params), r.world_size,
      static_cast<long long>(r.steps), static_cast<long long>(r.first_step),
      static_cast<long long>(r.samples), r.wall_s, r.samples_per_s);
  std::printf("final loss %.4f", r.final_loss);
  if (r.test_accuracy >= 0) std::printf(", test accuracy %.4f", r.test_accuracy);
  if (r.time_to_target_s >= 0)
    std::printf(" (target reached after %.2f s of training)", r.time_to_target_s);
  std::printf(
      "\nstep time: forward %.2f s, backward %.2f s, comm wait %.2f s (%.1f%% of wall), optimizer "
      "%.2f s\n",
      r.step_time.forward_s, r.step_time.backward_s, r.step_time.comm_wait_s,
      100 * r.sync_wait_fraction, r.step_time.optimizer_s);
  std::printf(
      "gradients: %d bucket(s) of up to %.2f MiB (%s), %.1f MB reduced, overlap ratio %.2f; "
      "parameters identical on all"
      " ranks: %s\n",
      r.buckets, r.bucket_bytes / 1048576.0, r.bucket_source.c_str(), r.bytes_fp32 / 1e6,
      r.overlap_ratio, r.params_consistent ? "yes" : "NO");
  if (r.compress != "none")
    std::printf(
        "compression: %s, %.1f MB on the wire for %.1f MB of gradients (%.1f%% less), "
        "error-feedback residual %.1f%% of what was compressed\n",
        r.compress.c_str(), r.bytes_wire / 1e6, r.bytes_fp32 / 1e6,
        r.bytes_fp32 > 0 ? 100 * (1 - r.bytes_wire / r.bytes_fp32) : 0.0, r.residual_pct);
  if (!r.checkpoint.empty()) std::printf("checkpoint: %s\n", r.checkpoint.c_str());
  if (!r.energy.meter.empty() && r.steps > 0) {
    const auto& step_j = r.energy.step_j;
    const double per_step =
        step_j.empty() ? 0.0 : std::accumulate(step_j.begin(), step_j.end(), 0.0) / step_j.size();
    std::printf("energy: %.1f J over %lld steps (%.3f J per step on rank 0's windows), %s\n",
                r.energy.joules, static_cast<long long>(r.steps), per_step, r.energy.meter.c_str());
  }
  for (const auto& x : r.recoveries)
    std::printf(
        "recovered in process: generation %lld, world %d -> %d, resumed at step %lld "
        "(%lld step(s) done again), first step %.3f s after the failure (%s)\n",
        static_cast<long long>(x.generation), x.world_before, x.world_after,
        static_cast<long long>(x.resumed_step), static_cast<long long>(x.lost_steps), x.rto_s,
        x.cause.c_str());
  if (!o.json.empty()) {
    WriteFileAtomically(o.json, train::TrainResultJson(r) + "\n");
  }
  return r.params_consistent ? 0 : 1;
}

}  // namespace cdt::cli
