// ValidateTrainOptions (src/train/train_options.cc): a bad or ignored option is refused with a
// message that names the flag as the user typed it; the defaults and the options as meant pass.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cdt/error.h"
#include "train/trainer.h"

namespace cdt::train {
namespace {

// The message ValidateTrainOptions throws for `o`, or "" when it accepts it.
std::string Refusal(const TrainOptions& o) {
  try {
    ValidateTrainOptions(o);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
}

TEST(TrainOptions, DefaultsAndCompressionKnobsAsMeantPass) {
  TrainOptions o;
  EXPECT_EQ(Refusal(o), "");
  for (const char* sparse : {"topk", "randomk"}) {
    o.reduction.compress = sparse;
    o.reduction.compress_ratio = 0.05;
    o.reduction.compress_values = "fp16";
    EXPECT_EQ(Refusal(o), "") << sparse;
  }
  o = TrainOptions();
  o.reduction.compress = "powersgd";
  o.reduction.powersgd_rank = 4;
  EXPECT_EQ(Refusal(o), "");
}

TEST(TrainOptions, CompressionKnobsTheCompressorWouldIgnoreAreRefused) {
  for (const char* other : {"none", "fp16", "int8", "powersgd", "signsgd", "adaptive"}) {
    TrainOptions o;
    o.reduction.compress = other;
    o.reduction.compress_ratio = 0.1;
    const std::string m = Refusal(o);
    EXPECT_NE(m.find("--compress-ratio"), std::string::npos) << other << ": " << m;
    EXPECT_NE(m.find(std::string("--compress ") + other), std::string::npos) << m;
    o.reduction.compress_ratio = 0;
    o.reduction.compress_values = "bf16";
    EXPECT_NE(Refusal(o).find("--compress-values"), std::string::npos) << other;
  }
  // The adaptive controller's knobs with a fixed compressor, PowerSGD's rank with another.
  for (const char* fixed : {"none", "topk", "powersgd"}) {
    TrainOptions o;
    o.reduction.compress = fixed;
    o.reduction.compress_interval = 10;
    EXPECT_EQ(Refusal(o), std::string("--compress-interval and --compress-min-exposed steer "
                                      "--compress adaptive (--compress ") +
                              fixed + " would ignore them)");
    o.reduction.compress_interval = TrainOptions().reduction.compress_interval;
    o.reduction.compress_min_exposed = 0;
    EXPECT_NE(Refusal(o).find("steer --compress adaptive"), std::string::npos) << fixed;
  }
  for (const char* other : {"none", "topk", "adaptive"}) {
    TrainOptions o;
    o.reduction.compress = other;
    o.reduction.powersgd_rank = 4;
    EXPECT_EQ(Refusal(o), std::string("--powersgd-rank is the rank of --compress powersgd "
                                      "(adaptive chooses its own; --compress ") +
                              other + " would ignore it)");
  }
  TrainOptions adaptive;
  adaptive.reduction.compress = "adaptive";
  adaptive.reduction.compress_interval = 10;
  adaptive.reduction.compress_min_exposed = 0;
  EXPECT_EQ(Refusal(adaptive), "");
}

TEST(TrainOptions, OutOfRangeCompressionKnobsNameTheirFlag) {
  TrainOptions o;
  o.reduction.compress = "topk";
  o.reduction.compress_ratio = 1.5;
  EXPECT_NE(Refusal(o).find("--compress-ratio must be in (0, 1]"), std::string::npos);
  o = TrainOptions();
  o.reduction.compress = "zip";
  EXPECT_NE(Refusal(o).find("unknown --compress 'zip'"), std::string::npos);
  o = TrainOptions();
  o.reduction.powersgd_rank = 0;
  EXPECT_NE(Refusal(o).find("--powersgd-rank"), std::string::npos);
  o = TrainOptions();
  o.reduction.compress_interval = 0;
  EXPECT_NE(Refusal(o).find("--compress-interval must be at least 1"), std::string::npos);
  for (double share : {-0.1, 1.5, std::nan("")}) {
    o = TrainOptions();
    o.reduction.compress = "adaptive";
    o.reduction.compress_min_exposed = share;
    EXPECT_NE(
        Refusal(o).find("--compress-min-exposed is a share of the step: it must be in [0, 1]"),
        std::string::npos)
        << share;
  }
}

TEST(TrainOptions, LarcTrustOutsideZeroToOneIsRefused) {
  TrainOptions o;
  o.optimizer.larc_trust = 0.05;
  EXPECT_EQ(Refusal(o), "");
  o.optimizer.larc_trust = -1;  // automatic
  EXPECT_EQ(Refusal(o), "");
  for (double bad : {-0.1, -2.0, 1.5, std::nan("")}) {
    o.optimizer.larc_trust = bad;
    EXPECT_NE(Refusal(o).find("--larc-trust must be in 0..1"), std::string::npos) << bad;
  }
  o.optimizer.larc_trust = -1;
  o.optimizer.warmup_steps = -2;
  EXPECT_NE(Refusal(o).find("--warmup-steps must be >= 0, or -1"), std::string::npos);
}

// Model options are checked here too, so that the launcher refuses them once instead of every
// worker failing to build its model (and the launcher then stopping the others).
TEST(TrainOptions, BadModelOptionsNameTheirFlag) {
  TrainOptions o;
  o.model.name = "resnet";
  EXPECT_NE(Refusal(o).find("unknown --model 'resnet' (use mlp, cnn, moe-transformer, resnet18 or resnet50)"),
            std::string::npos);
  o = TrainOptions();
  o.model.name = "moe-transformer";
  EXPECT_EQ(Refusal(o), "");
  o.model.width = 66;  // not divisible by 4 heads
  EXPECT_NE(Refusal(o).find("a --width divisible by --heads"), std::string::npos);
  o = TrainOptions();
  o.model.name = "moe-transformer";
  o.model.top_k = 9;  // of 8 experts
  EXPECT_NE(Refusal(o).find("--top-k 9 --experts 8"), std::string::npos);
  o = TrainOptions();
  o.model.top_k = 9;  // ignored without moe-transformer
  EXPECT_EQ(Refusal(o), "");
  o.model.linear_blocks = 0;
  EXPECT_NE(Refusal(o).find("--linear-blocks must be between 1 and 128"), std::string::npos);
  o.model.linear_blocks = 129;
  EXPECT_NE(Refusal(o).find("--linear-blocks"), std::string::npos);
  o.model.name = "mlp";
  EXPECT_EQ(Refusal(o), "");  // 512 outputs
  o = TrainOptions();
  o.metrics.eval_every = -5;
  EXPECT_NE(Refusal(o).find("--eval-every"), std::string::npos);
}

}  // namespace
}  // namespace cdt::train
