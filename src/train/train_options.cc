// Option checks for the trainer (TrainOptions, trainer.h): one message per bad option, naming the
// flag a user typed. Free of libtorch.
#include <algorithm>
#include <string>

#include "cdt/error.h"
#include "compress/compressor.h"
#include "compress/registry.h"
#include "train/train_options.h"

namespace cdt::train {

namespace {

void ValidateModelOptions(const ModelOptions& m) {
  auto bad = [](const std::string& message) { throw Error(ErrorCode::kInvalidArgument, message); };
  if (m.name != "mlp" && m.name != "cnn" && m.name != "moe-transformer" && m.name != "resnet18" &&
      m.name != "resnet50")
    bad("unknown --model '" + m.name + "' (use " + kModelNameList + ")");
  if (m.name == "moe-transformer" &&
      (m.layers < 1 || m.width < 1 || m.heads < 1 || m.width % m.heads != 0 || m.experts < 1 ||
       m.top_k < 1 || m.top_k > m.experts))
    bad("--model moe-transformer needs --layers >= 1, a --width divisible by --heads, and "
        "1 <= --top-k <= --experts (got --layers " +
        std::to_string(m.layers) + " --width " + std::to_string(m.width) + " --heads " +
        std::to_string(m.heads) + " --top-k " + std::to_string(m.top_k) + " --experts " +
        std::to_string(m.experts) + ")");
  const int fc1 = m.name == "mlp" ? kMlpHidden : kCnnHidden;
  if ((m.name == "mlp" || m.name == "cnn") && (m.linear_blocks < 1 || m.linear_blocks > fc1))
    bad("--linear-blocks must be between 1 and " + std::to_string(fc1) +
        " (the outputs of --model " + m.name + "'s fc1)");
}

}  // namespace

void ValidateTrainOptions(const TrainOptions& o, bool builtin_model) {
  auto bad = [](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, m); };
  if (o.data.batch_size < 1) bad("--batch-size must be at least 1");
  if (o.data.accumulate < 1 || o.data.accumulate > o.data.batch_size)
    bad("--accumulate must be in 1..batch-size");
  if (o.steps < 0) bad("--steps must be >= 0");
  if (o.steps == 0 && !(o.epochs > 0)) bad("give --steps N or --epochs E > 0");
  if (!(o.optimizer.lr > 0)) bad("--lr must be > 0");
  if (o.optimizer.larc_trust != -1 &&
      (!(o.optimizer.larc_trust >= 0) || !(o.optimizer.larc_trust <= 1)))
    bad("--larc-trust must be in 0..1 (0 = off; Apex's default 0.02), or -1 (automatic: 0.05 "
        "when the learning rate is scaled up with the global batch)");
  if (o.optimizer.warmup_steps < -1)
    bad("--warmup-steps must be >= 0, or -1 (automatic: when the learning rate is scaled up with "
        "the global batch)");
  if (o.reduction.bucket_mb < 0) bad("--bucket-mb must be >= 0");
  if (o.checkpoint.resume && o.checkpoint.dir.empty()) bad("--resume needs --checkpoint-dir");
  if (o.checkpoint.mtbf_s > 0 && o.reduction.compress != "none")
    bad("--checkpoint-mtbf with --compress: the ranks' compression state is written at fixed "
        "steps; "
        "use --checkpoint-every");
  if (o.checkpoint.mtbf_s < 0 || o.checkpoint.full_every < 1 || o.checkpoint.keep < 1)
    bad("--checkpoint-mtbf must be >= 0, --checkpoint-full-every and --checkpoint-keep >= 1");
  if (o.checkpoint.quantize != "none" && o.checkpoint.quantize != "int8")
    bad("--checkpoint-quantize '" + o.checkpoint.quantize + "': use none or int8");
  if (o.checkpoint.quantize != "none" && !o.checkpoint.incremental)
    bad("--checkpoint-quantize applies to increments: add --checkpoint-incremental");
  if (o.checkpoint.codec != "zstd" && o.checkpoint.codec != "lz4" && o.checkpoint.codec != "none")
    bad("--checkpoint-codec '" + o.checkpoint.codec + "': use zstd, lz4 or none");
  // The names are parsed here, at the boundary; the trainer works on compress::Method.
  const std::optional<compress::Method> method = compress::ParseMethod(o.reduction.compress);
  const bool sparse = method && compress::IsSparse(*method);
  if (o.reduction.compress != "adaptive" && !method)
    bad("unknown --compress '" + o.reduction.compress + "' (use " + compress::CompressorNameList() +
        ", or adaptive)");
  if (!(o.reduction.compress_ratio >= 0 && o.reduction.compress_ratio <= 1))
    bad("--compress-ratio must be in (0, 1] (or 0 for the compressor's default)");
  if (o.reduction.compress_ratio > 0 && !sparse)
    bad("--compress-ratio is the share of elements top-k and random-k send: use it with "
        "--compress topk or randomk (--compress " +
        o.reduction.compress + " would ignore it)");
  compress::SparseValuesNamed(
      o.reduction.compress_values);  // throws kInvalidArgument naming the flag
  if (o.reduction.compress_values != "fp32" && !sparse)
    bad("--compress-values applies to the values top-k and random-k send: use it with --compress "
        "topk or randomk (--compress fp16 casts the whole gradient)");
  if (o.reduction.powersgd_rank < 1) bad("--powersgd-rank must be at least 1");
  if (!o.metrics.timeline.empty() && o.metrics.timeline_steps < 1)
    bad("--timeline-steps must be at least 1");
  if (o.data.balance_batches < 0) bad("--balance-batches must be 0 (off) or a number of steps");
  if (o.reduction.compress_interval < 1) bad("--compress-interval must be at least 1");
  if (!(o.reduction.compress_min_exposed >= 0 && o.reduction.compress_min_exposed <= 1))
    bad("--compress-min-exposed is a share of the step: it must be in [0, 1]");
  // Knobs of one compressor given with another would be ignored: refused, as --compress-ratio is.
  const TrainOptions defaults;
  if (o.reduction.compress != "adaptive" &&
      (o.reduction.compress_interval != defaults.reduction.compress_interval ||
       o.reduction.compress_min_exposed != defaults.reduction.compress_min_exposed))
    bad("--compress-interval and --compress-min-exposed steer --compress adaptive (--compress " +
        o.reduction.compress + " would ignore them)");
  if (o.reduction.compress != "powersgd" &&
      o.reduction.powersgd_rank != defaults.reduction.powersgd_rank)
    bad("--powersgd-rank is the rank of --compress powersgd (adaptive chooses its own; "
        "--compress " +
        o.reduction.compress + " would ignore it)");
  if (o.metrics.eval_every < 0)
    bad("--eval-every must be 0 (at the end only) or a number of steps");
  if (o.data.dataset != "fashion-mnist" && o.data.dataset != "synthetic")
    bad("unknown dataset '" + o.data.dataset + "' (use fashion-mnist or synthetic)");
  if (builtin_model) ValidateModelOptions(o.model);
}

size_t BucketBytes(const ReductionOptions& o, int64_t params, std::string* source) {
  if (o.bucket_mb > 0) {
    *source = "--bucket-mb";
    return static_cast<size_t>(o.bucket_mb * 1024 * 1024);
  }
  if (o.planned_bucket_bytes > 0) {
    *source = "topology plan";
    return o.planned_bucket_bytes;
  }
  *source = "a quarter of the model";
  const size_t model_bytes = static_cast<size_t>(params) * sizeof(float);
  return std::clamp<size_t>(model_bytes / 4, 256 << 10, 25 << 20);
}

}  // namespace cdt::train
