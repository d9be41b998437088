// The trainer's framework-free parts: the global sampler (exactly-once coverage, resumable,
// re-partitionable), the idx reader (with files written here), the LR schedule, the BLAS probe.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <set>

#include "cdt/error.h"
#include "train/blas_library.h"
#include "train/global_sampler.h"
#include "train/image_dataset.h"
#include "train/lr_schedule.h"

namespace cdt::train {
namespace {

// Runs one epoch from `pos` with the given per-rank batches; adds every index seen to `seen`.
size_t ConsumeSteps(const GlobalSampler& s, uint64_t epoch, size_t pos,
                    const std::vector<int>& batch, int steps, std::multiset<int64_t>& seen) {
  for (int i = 0; i < steps && pos < s.dataset_size(); ++i) {
    for (int r = 0; r < static_cast<int>(batch.size()); ++r)
      for (int64_t x : s.Indices(epoch, pos, batch, r)) seen.insert(x);
    pos += s.StepSamples(pos, batch);
  }
  return pos;
}

TEST(GlobalSampler, EveryRankTogetherSeesEachSampleOncePerEpoch) {
  GlobalSampler s(1001, 42);
  std::multiset<int64_t> seen;
  size_t pos = ConsumeSteps(s, 0, 0, {7, 7, 7}, 1000, seen);
  EXPECT_EQ(pos, 1001u);
  EXPECT_EQ(seen.size(), 1001u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 1001u);
  // The last step has 1001 % 21 = 14 samples, split in proportion: 5, 5, 4.
  EXPECT_EQ(s.Shares(987, {7, 7, 7}), (std::vector<int>{5, 5, 4}));
}

TEST(GlobalSampler, ReshufflesPerEpochDeterministically) {
  GlobalSampler a(500, 1), b(500, 1), c(500, 2);
  const std::vector<int64_t> a3 = a.Permutation(3);  // copies: the sampler caches one epoch
  EXPECT_EQ(a3, b.Permutation(3));
  EXPECT_NE(a3, a.Permutation(4));
  EXPECT_NE(a3, c.Permutation(3));
  std::vector<int64_t> sorted = a.Permutation(7);
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(500);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  GlobalSampler plain(5, 9, false);
  EXPECT_EQ(plain.Permutation(0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(GlobalSampler, RepartitionsTheRestOfTheEpochAfterTheWorldChanges) {
  GlobalSampler s(2000, 5);
  std::multiset<int64_t> seen;
  size_t pos = ConsumeSteps(s, 0, 0, {16, 16, 16, 16}, 10, seen);  // 4 ranks, 10 steps
  EXPECT_EQ(pos, 640u);
  pos = ConsumeSteps(s, 0, pos, {16, 16, 16}, 5, seen);           // a rank is lost
  pos = ConsumeSteps(s, 0, pos, {30, 9, 12, 20, 1}, 1000, seen);  // rebalanced, grown
  EXPECT_EQ(pos, 2000u);
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 2000u);
}

TEST(GlobalSampler, ResumingFromAPositionGivesTheSameIndices) {
  GlobalSampler a(300, 11), b(300, 11);
  std::vector<int> batch = {8, 8};
  (void)a.Indices(0, 0, batch, 0);
  EXPECT_EQ(a.Indices(2, 48, batch, 1), b.Indices(2, 48, batch, 1));
  EXPECT_THROW(a.Indices(0, 0, batch, 2), Error);
  EXPECT_THROW(a.Shares(0, {4, -1}), Error);
  EXPECT_EQ(a.StepSamples(300, batch), 0u);
}

// Writes an idx file (gzip when the name ends in .gz): the outside world's files, made here.
void WriteIdx(const std::string& path, uint32_t magic, std::vector<uint32_t> dims,
              const std::vector<uint8_t>& data, bool gz) {
  std::vector<uint8_t> bytes;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<uint8_t>(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  bytes.insert(bytes.end(), data.begin(), data.end());
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  } else {
    FILE* f = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
}

std::string Dir() {
  std::string d = ::testing::TempDir() + "cdt_idx_" + std::to_string(getpid());
  std::filesystem::create_directories(d);
  return d;
}

TEST(ImageDataset, ReadsGzipAndPlainIdxFiles) {
  const std::string d = Dir();
  std::vector<uint8_t> px(3 * 2 * 2);
  std::iota(px.begin(), px.end(), 0);
  WriteIdx(d + "/t10k-images-idx3-ubyte.gz", 0x803, {3, 2, 2}, px, true);
  WriteIdx(d + "/t10k-labels-idx1-ubyte", 0x801, {3}, {4, 0, 9}, false);
  ImageDataset ds = LoadFashionMnist(d, false);
  EXPECT_EQ(ds.count, 3);
  EXPECT_EQ(ds.rows, 2);
  EXPECT_EQ(ds.pixels, px);
  EXPECT_EQ(ds.labels, (std::vector<uint8_t>{4, 0, 9}));
}

TEST(ImageDataset, MalformedFilesAreNamedWithWhatIsWrong) {
  const std::string d = Dir();
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  WriteIdx(d + "/img", 0x803, {2, 2, 2}, std::vector<uint8_t>(8), false);
  WriteIdx(d + "/lab_magic", 0x803, {2}, {1, 2}, false);
  WriteIdx(d + "/lab_short", 0x801, {2}, {1}, false);
  WriteIdx(d + "/lab_three", 0x801, {3}, {1, 2, 3}, false);
  WriteIdx(d + "/lab_class", 0x801, {2}, {1, 12}, false);
  EXPECT_NE(message([&] {
              LoadIdx(d + "/img", d + "/lab_magic");
            }).find("lab_magic': idx magic 0x00000803, expected 0x00000801"),
            std::string::npos);
  EXPECT_NE(message([&] {
              LoadIdx(d + "/img", d + "/lab_short");
            }).find("promises 2 bytes of data, the file holds 1"),
            std::string::npos);
  EXPECT_NE(message([&] { LoadIdx(d + "/img", d + "/lab_three"); }).find("has 2 images but"),
            std::string::npos);
  EXPECT_NE(message([&] { LoadIdx(d + "/img", d + "/lab_class"); }).find("label 12 of sample 1"),
            std::string::npos);
  EXPECT_NE(message([&] { LoadIdx(d + "/nope", d + "/lab_class"); }).find("cannot open"),
            std::string::npos);
  // 2^22 images of 2^21 x 2^21 pixels: 2^64 bytes, which wrapped around to 0 and matched an empty
  // payload, so 4 million images were read from none.
  WriteIdx(d + "/img_wrap", 0x803, {1u << 22, 1u << 21, 1u << 21}, {}, false);
  EXPECT_NE(message([&] {
              LoadIdx(d + "/img_wrap", d + "/lab_short");
            }).find("img_wrap': idx dimensions overflow"),
            std::string::npos);
  EXPECT_NE(message([&] { LoadFashionMnist(d + "/empty", true); }).find("dataset-fashion-mnist"),
            std::string::npos);
}

TEST(ImageDataset, SyntheticImagesAreDeterministicAndLabelled) {
  ImageDataset a = SyntheticImages(50, 7), b = SyntheticImages(50, 7);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.pixels.size(), 50u * 28 * 28);
  for (uint8_t l : a.labels) EXPECT_LT(l, 10);
}

TEST(LrSchedule, ScalesWarmsUpAndDecays) {
  LrSchedule s{0.1, 512, 256, 10, 110, true};
  EXPECT_DOUBLE_EQ(s.Peak(), 0.2);
  EXPECT_DOUBLE_EQ(s.At(0), 0.02);
  EXPECT_DOUBLE_EQ(s.At(9), 0.2);
  EXPECT_DOUBLE_EQ(s.At(10), 0.2);
  EXPECT_NEAR(s.At(60), 0.1, 1e-12);
  EXPECT_NEAR(s.At(110), 0.0, 1e-12);
  LrSchedule flat{0.1, 512, 0, 0, 100, false};
  EXPECT_DOUBLE_EQ(flat.At(99), 0.1);
}

TEST(LrSchedule, DescribesWhatIsInForce) {
  EXPECT_EQ((LrSchedule{0.1, 1024, 256, 10, 59, true}.Describe()),
            "peak 0.4 = 0.1 x global batch 1024 / 256, warm-up 10 steps, cosine decay to 0 at "
            "step 59");
  EXPECT_EQ((LrSchedule{0.003, 1024, 0, 0, 59, false}.Describe()),
            "peak 0.003 (not scaled with the global batch), no warm-up, then constant");
  const LrSchedule scaled{0.1, 1024, 256, 0, 59, false};
  EXPECT_EQ(scaled.RateAt(3), "learning rate 0.4 (" + scaled.Describe() + ")");
  EXPECT_NE(scaled.WarmUpHint().find("--warmup-steps"), std::string::npos);
  EXPECT_EQ((LrSchedule{0.1, 1024, 256, 10, 59, true}.WarmUpHint()), "");
  EXPECT_EQ((LrSchedule{0.1, 128, 256, 0, 59, true}.WarmUpHint()), "");
}

TEST(LrSchedule, ScaledUpRatesWarmUpAndBoundEachLayerByDefault) {
  // Nothing changes at the reference batch or below.
  EXPECT_EQ(AutomaticWarmupSteps(1.0, 235), 0);
  EXPECT_EQ(AutomaticWarmupSteps(0.5, 235), 0);
  EXPECT_EQ(AutomaticLarcTrust(1.0), 0.0);
  EXPECT_EQ(AutomaticWarmupSteps(288.0 / 256, 1000), 1);  // 1.125: round(5 log2) = 1
  EXPECT_EQ(AutomaticWarmupSteps(1.05, 1000), 0);         // below 2^0.1: not scaled up enough
  EXPECT_EQ(AutomaticLarcTrust(1.05), 0.0);
  // 8 workers (x2): 5 steps; 16 (x4): 10; 32 (x8): 15, but at most a quarter of a 30-step run.
  EXPECT_EQ(AutomaticWarmupSteps(2.0, 117), 5);
  EXPECT_EQ(AutomaticWarmupSteps(4.0, 59), 10);
  EXPECT_EQ(AutomaticWarmupSteps(8.0, 30), 7);
  EXPECT_EQ(AutomaticWarmupSteps(8.0, 3), 1);
  EXPECT_EQ(AutomaticLarcTrust(4.0), 0.05);
  LrSchedule s{0.1, 1024, 256, 10, 59, true};
  s.warmup_automatic = true;
  EXPECT_DOUBLE_EQ(s.Scale(), 4.0);
  EXPECT_EQ(s.Describe(),
            "peak 0.4 = 0.1 x global batch 1024 / 256, warm-up 10 steps (automatic for a rate "
            "scaled 4x), cosine decay to 0 at step 59");
}

TEST(BlasLibrary, NamesDebiansAlternatives) {
  EXPECT_EQ(ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3").name,
            "OpenBLAS");
  EXPECT_EQ(ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3").name, "BLIS");
  EXPECT_EQ(ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3").name, "ATLAS");
  EXPECT_EQ(ClassifyBlasPath("/opt/intel/oneapi/mkl/lib/libmkl_rt.so.2").name, "MKL");
  const BlasLibrary netlib = ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/blas/libblas.so.3");
  EXPECT_EQ(netlib.name, "reference BLAS (netlib)");
  EXPECT_TRUE(netlib.reference);
  EXPECT_NE(BlasWarning(netlib).find("libopenblas0-openmp"), std::string::npos);
  EXPECT_EQ(BlasWarning(ClassifyBlasPath("/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3")),
            "");
  EXPECT_EQ(ClassifyBlasPath("/usr/local/lib/libblas.so.3").name, "unknown BLAS");
  EXPECT_EQ(ClassifyBlasPath("").name, "not found");
}

}  // namespace
}  // namespace cdt::train
