// Option checks for the trainer (TrainOptions, trainer.h): one message per bad option, naming the
// flag a user typed. Free of libtorch.
#include <algorithm>
#include <string>

#include "cdt/error.h"
#include "compress/compressor.h"
#include "train/trainer.h"

namespace cdt::train {

void ValidateTrainOptions(const TrainOptions& o) {
  auto bad = [](const std::string& m) { throw Error(ErrorCode::kInvalidArgument, m); };
  if (o.batch_size < 1) bad("--batch-size must be at least 1");
  if (o.accumulate < 1 || o.accumulate > o.batch_size) bad("--accumulate must be in 1..batch-size");
  if (o.steps < 0) bad("--steps must be >= 0");
  if (o.steps == 0 && !(o.epochs > 0)) bad("give --steps N or --epochs E > 0");
  if (!(o.lr > 0)) bad("--lr must be > 0");
  if (o.bucket_mb < 0) bad("--bucket-mb must be >= 0");
  if (o.resume && o.checkpoint_dir.empty()) bad("--resume needs --checkpoint-dir");
  if (o.checkpoint_mtbf_s > 0 && o.compress != "none")
    bad("--checkpoint-mtbf with --compress: the ranks' compression state is written at fixed "
        "steps; "
        "use --checkpoint-every");
  if (o.checkpoint_mtbf_s < 0 || o.checkpoint_full_every < 1 || o.checkpoint_keep < 1)
    bad("--checkpoint-mtbf must be >= 0, --checkpoint-full-every and --checkpoint-keep >= 1");
  if (o.checkpoint_quantize != "none" && o.checkpoint_quantize != "int8")
    bad("--checkpoint-quantize '" + o.checkpoint_quantize + "': use none or int8");
  if (o.checkpoint_quantize != "none" && !o.checkpoint_incremental)
    bad("--checkpoint-quantize applies to increments: add --checkpoint-incremental");
  if (o.checkpoint_codec != "zstd" && o.checkpoint_codec != "lz4" && o.checkpoint_codec != "none")
    bad("--checkpoint-codec '" + o.checkpoint_codec + "': use zstd, lz4 or none");
  const auto& names = compress::CompressorNames();
  if (o.compress != "adaptive" && std::find(names.begin(), names.end(), o.compress) == names.end())
    bad("unknown --compress '" + o.compress + "' (use " + compress::CompressorNameList() +
        ", or adaptive)");
  if (!(o.compress_ratio >= 0 && o.compress_ratio <= 1))
    bad("--compress-ratio must be in (0, 1] (or 0 for the compressor's default)");
  if (o.compress_ratio > 0 && !compress::IsSparse(o.compress))
    bad("--compress-ratio is the share of elements top-k and random-k send: use it with "
        "--compress topk or randomk (--compress " +
        o.compress + " would ignore it)");
  compress::SparseValuesNamed(o.compress_values);  // throws kInvalidArgument naming the flag
  if (o.compress_values != "fp32" && !compress::IsSparse(o.compress))
    bad("--compress-values applies to the values top-k and random-k send: use it with --compress "
        "topk or randomk (--compress fp16 casts the whole gradient)");
  if (o.powersgd_rank < 1) bad("--powersgd-rank must be at least 1");
  if (!o.timeline.empty() && o.timeline_steps < 1) bad("--timeline-steps must be at least 1");
  if (o.balance_batches < 0) bad("--balance-batches must be 0 (off) or a number of steps");
  if (o.compress_interval < 1) bad("--compress-interval must be at least 1");
  if (!(o.compress_min_exposed >= 0 && o.compress_min_exposed <= 1))
    bad("--compress-min-exposed is a share of the step: it must be in [0, 1]");
  // Knobs of one compressor given with another would be ignored: refused, as --compress-ratio is.
  const TrainOptions defaults;
  if (o.compress != "adaptive" && (o.compress_interval != defaults.compress_interval ||
                                   o.compress_min_exposed != defaults.compress_min_exposed))
    bad("--compress-interval and --compress-min-exposed steer --compress adaptive (--compress " +
        o.compress + " would ignore them)");
  if (o.compress != "powersgd" && o.powersgd_rank != defaults.powersgd_rank)
    bad("--powersgd-rank is the rank of --compress powersgd (adaptive chooses its own; "
        "--compress " +
        o.compress + " would ignore it)");
  if (o.model != "mlp" && o.model != "cnn" && o.model != "moe-transformer")
    bad("unknown --model '" + o.model + "' (use " + kModelNameList + ")");
  if (o.model == "moe-transformer" &&
      (o.layers < 1 || o.width < 1 || o.heads < 1 || o.width % o.heads != 0 || o.experts < 1 ||
       o.top_k < 1 || o.top_k > o.experts))
    bad("--model moe-transformer needs --layers >= 1, a --width divisible by --heads, and "
        "1 <= --top-k <= --experts (got --layers " +
        std::to_string(o.layers) + " --width " + std::to_string(o.width) + " --heads " +
        std::to_string(o.heads) + " --top-k " + std::to_string(o.top_k) + " --experts " +
        std::to_string(o.experts) + ")");
  const int fc1 = o.model == "mlp" ? kMlpHidden : kCnnHidden;
  if (o.model != "moe-transformer" && (o.linear_blocks < 1 || o.linear_blocks > fc1))
    bad("--linear-blocks must be between 1 and " + std::to_string(fc1) +
        " (the outputs of --model " + o.model + "'s fc1)");
  if (o.eval_every < 0) bad("--eval-every must be 0 (at the end only) or a number of steps");
  if (o.dataset != "fashion-mnist" && o.dataset != "synthetic")
    bad("unknown dataset '" + o.dataset + "' (use fashion-mnist or synthetic)");
}

}  // namespace cdt::train
