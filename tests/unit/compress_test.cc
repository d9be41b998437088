// Gradient compressors (src/compress/): every compressor at sizes {0, 1, odd, large} and world
// sizes {1, 2, 3, 4}, over real communicators (threads in one process, TCP on loopback).
// Properties: each result is within its compressor's bound of the exact sum (exact for none,
// top-k, random-k and sign, whose decoding is exact arithmetic); every rank gets the same bits;
// error feedback conserves mass; PowerSGD reproduces rank-r sums; int8 rounding is unbiased;
// top-k keeps the largest magnitudes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <numeric>
#include <random>

#include "cdt/error.h"
#include "comm_test_util.h"
#include "compress/compressor.h"
#include "compress/compressors.h"
#include "compress/error_feedback.h"
#include "compress/kernels.h"
#include "compress/registry.h"
#include "compress_test_util.h"

namespace cdt::compress {
namespace {

const std::vector<size_t> kSizes = {0, 1, 1001, 100000};

// Runs `name` once on `world` ranks with rank r's Gradient(r, n); returns every rank's result and
// local contribution.
struct Outcome {
  std::vector<std::vector<float>> result, local;
  std::vector<size_t> wire;
};
Outcome RunOnce(const std::string& name, int world, size_t n, CompressorOptions o = NoFeedback(),
                std::vector<TensorView> tensors = {}) {
  Outcome out;
  out.result.resize(static_cast<size_t>(world));
  out.local.resize(static_cast<size_t>(world));
  out.wire.resize(static_cast<size_t>(world));
  testing::RunRanks(world, [&](Communicator& comm) {
    auto c = MakeCompressor(name, o, tensors);
    auto g = Gradient(comm.rank(), n);
    std::vector<float> local(n);
    const size_t r = static_cast<size_t>(comm.rank());
    out.wire[r] = c->Reduce(comm, g.data(), local.data(), n);
    out.result[r] = g;
    out.local[r] = local;
  });
  return out;
}

void ExpectSameOnEveryRank(const Outcome& o, const std::string& what) {
  for (size_t r = 1; r < o.result.size(); ++r)
    EXPECT_EQ(o.result[r], o.result[0]) << what << ": rank " << r << " differs";
}

TEST(Compress, EveryCompressorWithinItsBoundAtEverySizeAndWorld) {
  for (int world = 1; world <= 4; ++world)
    for (size_t n : kSizes)
      for (const std::string& name : CompressorNames()) {
        const std::string what =
            name + " n=" + std::to_string(n) + " world=" + std::to_string(world);
        Outcome o = RunOnce(name, world, n);
        ExpectSameOnEveryRank(o, what);
        if (n == 0) continue;
        const auto exact = ExactSum(world, n);
        // The local contributions add up to the result (rounding of 16-bit sums aside).
        double worst_mass = 0, worst_err = 0, sum_abs = 0;
        for (size_t i = 0; i < n; ++i) {
          double s = 0;
          for (const auto& l : o.local) s += l[i];
          worst_mass = std::max(worst_mass, std::fabs(s - o.result[0][i]));
          worst_err = std::max(worst_err, std::fabs(o.result[0][i] - exact[i]));
          sum_abs += std::fabs(exact[i]);
        }
        const double mean_abs = sum_abs / static_cast<double>(n);
        if (name == "none") {
          EXPECT_LE(worst_err, 1e-6) << what;
        } else if (name == "fp16") {
          EXPECT_LE(worst_err, 4e-3 * 0.05 * world) << what;  // |g| < 0.05: 11-bit mantissa
          EXPECT_LE(worst_mass, 1e-3 * 0.05 * world) << what;
        } else if (name == "bf16") {
          EXPECT_LE(worst_err, 3e-2 * 0.05 * world) << what;  // 8-bit mantissa
        } else if (name == "int8") {
          // Each code is off by less than one level of its chunk's shared scale.
          double max_abs = 0;
          for (int r = 0; r < world; ++r)
            for (float x : Gradient(r, n)) max_abs = std::max(max_abs, std::fabs(double(x)));
          EXPECT_LE(worst_err, world * max_abs / (127 / world) + 1e-7) << what;
          EXPECT_LE(worst_mass, 1e-6) << what;
        } else {
          // topk, randomk, signsgd, powersgd: decoding is exact; what they drop is error
          // feedback's business. Their results are the sum of the local contributions.
          EXPECT_LE(worst_mass, 1e-5 + 1e-4 * mean_abs * world) << what;
        }
        EXPECT_LE(o.wire[0], 4 * n + 64) << what;
      }
}

TEST(Compress, TopKKeepsTheLargestMagnitudes) {
  for (int world : {1, 3}) {
    const size_t n = 1001;
    CompressorOptions opt = NoFeedback();
    opt.ratio = 0.01;  // k = 11
    Outcome o = RunOnce("topk", world, n, opt);
    for (int r = 0; r < world; ++r) {
      auto g = Gradient(r, n);
      std::vector<float> mags(n);
      for (size_t i = 0; i < n; ++i) mags[i] = std::fabs(g[i]);
      std::vector<float> sorted = mags;
      std::sort(sorted.rbegin(), sorted.rend());
      const float kth = sorted[10];
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i) {
        const float l = o.local[static_cast<size_t>(r)][i];
        if (l != 0.0f) {
          ++kept;
          EXPECT_GE(mags[i], kth);
          EXPECT_EQ(l, g[i]);
        }
      }
      EXPECT_EQ(kept, 11u);
      EXPECT_EQ(o.wire[static_cast<size_t>(r)], 8u * 11u);
    }
  }
}

TEST(Compress, TopKOnLargeBucketsStaysExact) {
  // Past 64K elements top-k selects among the elements above a sampled threshold. Gaussian values,
  // and values large exactly where the sample looks (so the threshold overestimates and the full
  // selection must take over): the k kept are the k largest either way.
  const size_t n = 200003;
  for (bool adversarial : {false, true}) {
    std::vector<float> g = Gradient(0, n);
    if (adversarial)
      for (size_t i = 0; i < n; i += n / 16384) g[i] = 1.0f + static_cast<float>(i % 7);
    const double ratio = adversarial ? 0.1 : 0.01;
    const size_t k = SparseCount(ratio, n);
    testing::RunRanks(1, [&](Communicator& comm) {
      auto c = MakeTopK(ratio);
      std::vector<float> x = g, local(n);
      c->Reduce(comm, x.data(), local.data(), n);
      std::vector<float> mags(n);
      for (size_t i = 0; i < n; ++i) mags[i] = std::fabs(g[i]);
      std::vector<float> sorted = mags;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(k - 1), sorted.end(),
                       std::greater<float>());
      const float kth = sorted[k - 1];
      size_t kept = 0;
      for (size_t i = 0; i < n; ++i)
        if (local[i] != 0.0f) {
          ++kept;
          ASSERT_GE(mags[i], kth) << i;
          ASSERT_EQ(local[i], g[i]);
          ASSERT_EQ(x[i], g[i]);  // one rank: the sum is its own sparse vector
        }
      EXPECT_EQ(kept, k) << (adversarial ? "adversarial" : "gaussian");
    });
  }
}

TEST(Compress, SignAndRandomKEncodeWhatTheySay) {
  const size_t n = 1001;
  Outcome sign = RunOnce("signsgd", 3, n);
  Outcome rk = RunOnce("randomk", 3, n);  // ratio 0.05: k = 51
  std::vector<size_t> first_indices;
  for (int r = 0; r < 3; ++r) {
    auto g = Gradient(r, n);
    double l1 = 0;
    for (float x : g) l1 += std::fabs(x);
    const double scale = l1 / n;
    std::vector<size_t> indices;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(sign.local[static_cast<size_t>(r)][i], g[i] < 0 ? -scale : scale, 1e-7);
      const float l = rk.local[static_cast<size_t>(r)][i];
      if (l != 0.0f) {
        EXPECT_EQ(l, g[i]);
        indices.push_back(i);
      }
    }
    EXPECT_EQ(indices.size(), 51u);
    if (r == 0) first_indices = indices;
    EXPECT_EQ(indices, first_indices) << "random-k ranks must pick the same indices";
  }
  EXPECT_EQ(sign.wire[0], 4u + (n + 7) / 8);  // no layout: one scale
  EXPECT_EQ(rk.wire[0], 4u * 51u);
  // Past half the elements random-k draws the ones it leaves out: still k, the same on every rank,
  // each value this rank's own.
  CompressorOptions most = NoFeedback();
  most.ratio = 0.75;  // k = 751
  Outcome rk75 = RunOnce("randomk", 3, n, most);
  std::vector<size_t> kept0;
  for (int r = 0; r < 3; ++r) {
    auto g = Gradient(r, n);
    std::vector<size_t> kept;
    for (size_t i = 0; i < n; ++i)
      if (rk75.local[static_cast<size_t>(r)][i] != 0.0f) {
        EXPECT_EQ(rk75.local[static_cast<size_t>(r)][i], g[i]);
        kept.push_back(i);
      }
    EXPECT_EQ(kept.size(), 751u);
    if (r == 0) kept0 = kept;
    EXPECT_EQ(kept, kept0);
  }
  EXPECT_EQ(rk75.wire[0], 4u * 751u);
}

TEST(Compress, SparseValuesTravelIn16BitFloats) {
  // Top-k and random-k with 16-bit values pick the same elements as with float32; this rank's
  // contribution is each kept value rounded to the wire type; the result is the sum of the
  // contributions (top-k adds the decoded values in float32, random-k's 16-bit allreduce rounds
  // at every hop); every rank gets the same bits; the wire holds 2 bytes a value.
  for (DataType values : {DataType::kFloat16, DataType::kBFloat16})
    for (const std::string& name : {std::string("topk"), std::string("randomk")})
      for (int world = 1; world <= 4; ++world)
        for (size_t n : kSizes) {
          const std::string what = name + " " + DataTypeName(values) + " n=" + std::to_string(n) +
                                   " world=" + std::to_string(world);
          CompressorOptions o = NoFeedback();
          Outcome f32 = RunOnce(name, world, n, o);
          o.sparse_values = values;
          Outcome h = RunOnce(name, world, n, o);
          ExpectSameOnEveryRank(h, what);
          if (n == 0) {
            EXPECT_EQ(h.wire[0], 0u) << what;
            continue;
          }
          const size_t k = SparseCount(o.ratio, n);
          const bool dense = name == "topk" && static_cast<size_t>(world) * 6 * k >= 2 * n;
          EXPECT_EQ(h.wire[0], dense ? 2 * n : (name == "topk" ? 6 * k : 2 * k)) << what;
          for (int r = 0; r < world; ++r) {
            const auto g = Gradient(r, n);
            std::vector<uint16_t> wire(n);
            std::vector<float> rounded(n);
            EncodeWireValues(values, g.data(), wire.data(), n);
            DecodeWireValues(values, wire.data(), rounded.data(), n);
            size_t kept = 0;
            for (size_t i = 0; i < n; ++i) {
              const float l = h.local[static_cast<size_t>(r)][i];
              ASSERT_EQ(l != 0.0f, f32.local[static_cast<size_t>(r)][i] != 0.0f)
                  << what << " i=" << i;
              if (l != 0.0f) {
                ++kept;
                ASSERT_EQ(l, rounded[i]) << what << " i=" << i;
              }
            }
            EXPECT_EQ(kept, k) << what;
          }
          // 16-bit sums round at each of the world - 1 additions: half an ulp of |sum| < 0.2 each.
          const double ulp =
              values == DataType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
          const bool summed_in_16_bits = name == "randomk" || dense;
          for (size_t i = 0; i < n; ++i) {
            double s = 0;
            for (const auto& l : h.local) s += l[i];
            ASSERT_NEAR(h.result[0][i], s, (summed_in_16_bits ? world * ulp * 0.2 : 0) + 1e-7)
                << what << " i=" << i;
          }
        }
  CompressorOptions bad = NoFeedback();
  bad.sparse_values = DataType::kInt8;
  EXPECT_THROW(MakeCompressor("topk", bad, {}), Error);
  EXPECT_THROW(MakeCompressor("randomk", bad, {}), Error);
}

TEST(Compress, SignScalesEachTensorByItsOwnMagnitude) {
  const size_t n = 300;
  std::vector<TensorView> tensors = {{0, 10, 10}, {100, 200, 1}};
  testing::RunRanks(2, [&](Communicator& comm) {
    auto c = MakeCompressor("signsgd", NoFeedback(), tensors);
    std::vector<float> g(n), local(n);
    for (size_t i = 0; i < n; ++i) g[i] = (i % 3 == 0 ? -1.0f : 1.0f) * (i < 100 ? 1.0f : 0.01f);
    const size_t wire = c->Reduce(comm, g.data(), local.data(), n);
    EXPECT_EQ(wire, 4u * 3u + (n + 7) / 8);  // two tensors and the (empty) rest
    for (size_t i = 0; i < n; ++i)
      EXPECT_FLOAT_EQ(std::fabs(local[i]), i < 100 ? 1.0f : 0.01f) << i;
  });
}

TEST(Compress, TopKPastDensityOneStaysCorrect) {
  // k × world > n: the dense path; the result is still the sum of the local contributions.
  CompressorOptions opt = NoFeedback();
  opt.ratio = 0.6;
  Outcome o = RunOnce("topk", 4, 101, opt);
  ExpectSameOnEveryRank(o, "topk dense");
  for (size_t i = 0; i < 101; ++i) {
    double s = 0;
    for (const auto& l : o.local) s += l[i];
    EXPECT_NEAR(o.result[0][i], s, 1e-6);
  }
}

TEST(Compress, PowerSgdIsExactOnRankRSums) {
  // Every rank holds u_r v_rᵀ with v_r from a 2-dimensional space: the sum has rank <= 2. The wide
  // shape spans several of the column blocks Qᵀ = (Mᵀ P)ᵀ is summed in.
  for (auto [rows, cols] : {std::pair<size_t, size_t>{64, 48}, {7, 2500}}) {
    const size_t n = rows * cols + 5;  // + a bias of 5, sent uncompressed
    std::vector<TensorView> tensors = {{0, rows, cols}, {rows * cols, 5, 1}};
    for (int world : {1, 2, 3, 4}) {
      std::vector<std::vector<float>> inputs(static_cast<size_t>(world));
      std::mt19937_64 rng(5);
      std::normal_distribution<float> d(0, 1);
      std::vector<float> b1(cols), b2(cols);
      for (auto& x : b1) x = d(rng);
      for (auto& x : b2) x = d(rng);
      std::vector<double> exact(n, 0);
      for (auto& in : inputs) {
        in.resize(n);
        std::vector<float> u(rows), w(rows);
        for (auto& x : u) x = d(rng);
        for (auto& x : w) x = d(rng);
        for (size_t i = 0; i < rows; ++i)
          for (size_t j = 0; j < cols; ++j) in[i * cols + j] = u[i] * b1[j] + w[i] * b2[j];
        for (size_t i = rows * cols; i < n; ++i) in[i] = d(rng);
        for (size_t i = 0; i < n; ++i) exact[i] += in[i];
      }
      std::vector<std::vector<float>> results(static_cast<size_t>(world));
      testing::RunRanks(world, [&](Communicator& comm) {
        CompressorOptions o = NoFeedback();
        o.powersgd_rank = 2;
        o.powersgd_min_saved_bytes = 0;  // the 64x48 matrix saves 11 KiB
        auto c = MakeCompressor("powersgd", o, tensors);
        auto g = inputs[static_cast<size_t>(comm.rank())];
        std::vector<float> local(n);
        const size_t wire = c->Reduce(comm, g.data(), local.data(), n);
        EXPECT_EQ(wire, 4 * ((rows + cols) * 2 + 5));
        EXPECT_EQ(PowerSgdWireBytes(tensors, 2, 0),
                  wire);  // what the adaptive controller predicts from
        results[static_cast<size_t>(comm.rank())] = g;
      });
      double scale = 0;
      for (double x : exact) scale = std::max(scale, std::fabs(x));
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(results[0][i], exact[i], 1e-4 * scale)
            << rows << "x" << cols << " world " << world << " i " << i;
      for (int r = 1; r < world; ++r) EXPECT_EQ(results[static_cast<size_t>(r)], results[0]);
    }
  }
}

TEST(Compress, PowerSgdSendsSmallBucketsAsTheyAre) {
  // 64x48 at rank 2 would save 11 KiB, under the default 16 KiB: the bucket travels uncompressed,
  // in one allreduce, and the sum is exact.
  const size_t rows = 64, cols = 48, n = rows * cols + 5;
  std::vector<TensorView> tensors = {{0, rows, cols}, {rows * cols, 5, 1}};
  testing::RunRanks(3, [&](Communicator& comm) {
    auto c = MakeCompressor("powersgd", NoFeedback(), tensors);
    auto g = Gradient(comm.rank(), n);
    std::vector<float> local(n);
    EXPECT_EQ(c->Reduce(comm, g.data(), local.data(), n), 4 * n);
    EXPECT_EQ(PowerSgdWireBytes(tensors, 2, CompressorOptions().powersgd_min_saved_bytes), 4 * n);
    const std::vector<double> exact = ExactSum(3, n);
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(g[i], exact[i], 1e-6) << i;
    EXPECT_TRUE(c->GetState().empty());  // no Q to keep
  });
}

TEST(Compress, Int8HandlesSubnormalChunks) {
  // A chunk of near-zero gradients has a subnormal scale, where levels / scale overflows; the
  // result and the residual must stay finite (a NaN residual would silence those elements for
  // good).
  const size_t n = 1024;
  testing::RunRanks(2, [&](Communicator& comm) {
    ErrorFeedback ef(MakeInt8(512, 1));
    std::vector<float> g(n), local(n);
    for (size_t i = 0; i < n; ++i)  // zeros among them: 0 x (levels / scale) = 0 x inf = NaN
      g[i] = i % 5 == 0 ? 0.0f : (i < 512 ? 1e-39f : 1e-3f) * (i % 3 == 0 ? -1.0f : 1.0f);
    ef.Reduce(comm, g.data(), local.data(), n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(g[i])) << i;
      ASSERT_TRUE(std::isfinite(ef.residual()[i])) << i;
    }
    EXPECT_TRUE(std::isfinite(ef.residual_norm()));
    EXPECT_NEAR(g[701], 2e-3f, 2e-3f / 63);  // the normal chunk: within one level of the sum
  });
}

TEST(Compress, ErrorFeedbackStopsOnANonFiniteResidual) {
  // A compressor that decodes a finite gradient into NaN (a defect, as int8 had) must not leave a
  // NaN residual behind silently: the wrapper throws kDiverged naming it. Stands in for such a
  // defect; a non-finite gradient itself is the trainer's kDiverged, not this one.
  class Broken : public Compressor {
   public:
    std::string name() const override { return "broken"; }
    size_t Reduce(Communicator&, float* grad, float* local, size_t n) override {
      for (size_t i = 0; i < n; ++i) local[i] = i == n / 2 ? std::nanf("") : grad[i];
      return 4 * n;
    }
  };
  testing::RunRanks(1, [&](Communicator& comm) {
    ErrorFeedback ef(std::make_unique<Broken>());
    std::vector<float> g = Gradient(0, 100), local(100);
    try {
      ef.Reduce(comm, g.data(), local.data(), 100);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kDiverged);
      EXPECT_NE(std::string(e.what()).find("'broken'"), std::string::npos) << e.what();
    }
  });
}

TEST(Compress, KernelsMatchPlainLoops) {
  // compress/kernels.h against double-precision loops, at sizes that leave vector remainders and
  // span several partial-sum blocks; the output may alias the input, as error feedback uses it.
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, size_t{10007}}) {
    std::vector<float> a = Gradient(0, n), b = Gradient(1, n), c = Gradient(2, n);
    double dot = 0;
    for (size_t i = 0; i < n; ++i) dot += static_cast<double>(a[i]) * b[i];
    EXPECT_NEAR(kernels::Dot(a.data(), b.data(), n), dot, 1e-6 + 1e-5 * std::fabs(dot)) << n;
    std::vector<float> y = b;
    kernels::Axpy(0.5f, a.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], b[i] + 0.5f * a[i]) << n;
    kernels::Scale(-2.0f, a.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y[i], -2.0f * a[i]) << n;

    // Error feedback's passes: x = g + e into e and (aliased) g; then e -= local.
    std::vector<float> g = a, e = b, u = c;
    double x2 = 0;
    for (size_t i = 0; i < n; ++i) x2 += std::pow(static_cast<double>(a[i]) + b[i], 2);
    EXPECT_NEAR(kernels::AddResidual(g.data(), e.data(), g.data(), n), x2, 1e-9 + 1e-5 * x2) << n;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(g[i], a[i] + b[i]) << n;
    EXPECT_EQ(e, g);
    double r2 = 0;
    for (size_t i = 0; i < n; ++i) r2 += std::pow(static_cast<double>(e[i]) - c[i], 2);
    const std::vector<float> before = e;
    EXPECT_NEAR(kernels::SubtractSent(c.data(), e.data(), n), r2, 1e-9 + 1e-5 * r2) << n;
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(e[i], before[i] - c[i]) << n;

    g = a, e = b;
    double m2 = 0;
    for (size_t i = 0; i < n; ++i) {
      const float v = 0.9f * c[i] + a[i];
      m2 += std::pow(static_cast<double>(v) + b[i], 2);
    }
    EXPECT_NEAR(kernels::AddResidualWithMomentum(0.9f, g.data(), u.data(), e.data(), g.data(), n),
                m2, 1e-9 + 1e-5 * m2)
        << n;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_FLOAT_EQ(u[i], 0.9f * c[i] + a[i]) << n;
      ASSERT_EQ(g[i], u[i] + b[i]) << n;
    }
  }
}

TEST(Compress, ErrorFeedbackConservesMass) {
  // Over several steps: what every rank sent (its local contributions) plus its final residual
  // equals the sum of its gradients; and the wrapper's norms are those of x = g + e and of e.
  std::vector<std::pair<std::string, DataType>> cases;
  for (const std::string& name : CompressorNames())
    if (name != "none") cases.emplace_back(name, DataType::kFloat32);
  for (const char* sparse : {"topk", "randomk"})
    for (DataType values : {DataType::kFloat16, DataType::kBFloat16})
      cases.emplace_back(sparse, values);
  for (size_t n : {size_t{1001}, size_t{9001}})
    for (const auto& [name, values] : cases) {
      testing::RunRanks(3, [&](Communicator& comm) {
        CompressorOptions o;
        o.ratio = 0.05;
        o.sparse_values = values;
        auto c = MakeCompressor(name, o, {});
        auto* ef = dynamic_cast<ErrorFeedback*>(c.get());
        ASSERT_NE(ef, nullptr) << name;
        std::vector<double> sent(n, 0), fed(n, 0);
        for (uint64_t step = 0; step < 6; ++step) {
          auto g = Gradient(comm.rank(), n, step);
          for (size_t i = 0; i < n; ++i) fed[i] += g[i];
          double x2 = 0, e2 = 0;
          for (size_t i = 0; i < n; ++i)
            x2 += std::pow(g[i] + (ef->residual().empty() ? 0.0 : ef->residual()[i]), 2);
          std::vector<float> local(n);
          c->Reduce(comm, g.data(), local.data(), n);
          for (size_t i = 0; i < n; ++i) sent[i] += local[i];
          for (float e : ef->residual()) e2 += static_cast<double>(e) * e;
          EXPECT_NEAR(ef->input_norm(), std::sqrt(x2), 1e-5 * std::sqrt(x2)) << name;
          EXPECT_NEAR(ef->residual_norm(), std::sqrt(e2), 1e-9 + 1e-5 * std::sqrt(e2)) << name;
          // Every one of them drops something of a Gaussian gradient (int8: its rounding), but
          // PowerSGD, which sends a bucket without matrices as it is.
          if (name != "powersgd") {
            EXPECT_GT(ef->residual_norm(), 1e-4 * ef->input_norm()) << name;
          }
        }
        for (size_t i = 0; i < n; ++i)
          ASSERT_NEAR(sent[i] + ef->residual()[i], fed[i], 1e-5) << name << " element " << i;
      });
    }
}

TEST(Compress, MomentumCorrectionSendsMomentumSgdsUpdate) {
  // With an exact inner compressor, the wrapper with momentum m sends each step the sum over
  // ranks of the velocities u = m·u + g: momentum SGD's direction, applied by a momentum-free
  // optimizer. With a lossy one, what was sent plus the residual is the sum of the velocities.
  const size_t n = 1001;
  const double m = 0.9;
  testing::RunRanks(3, [&](Communicator& comm) {
    ErrorFeedback exact(MakePlainAllreduce(), m);
    ErrorFeedback sparse(MakeRandomK(0.05, 3), m);
    std::vector<std::vector<double>> u(3, std::vector<double>(n, 0));  // every rank's velocity
    std::vector<double> own_u(n, 0), velocity_sum(n, 0), sent(n, 0);
    for (uint64_t step = 0; step < 6; ++step) {
      std::vector<double> expect(n, 0);
      for (int r = 0; r < 3; ++r) {
        auto g = Gradient(r, n, step);
        for (size_t i = 0; i < n; ++i) {
          u[r][i] = m * u[r][i] + g[i];
          expect[i] += u[r][i];
        }
      }
      auto g = Gradient(comm.rank(), n, step);
      auto g2 = g;
      std::vector<float> local(n);
      exact.Reduce(comm, g.data(), local.data(), n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_NEAR(g[i], expect[i], 1e-5) << "step " << step << " i " << i;
      sparse.Reduce(comm, g2.data(), local.data(), n);
      for (size_t i = 0; i < n; ++i) {
        own_u[i] = m * own_u[i] + Gradient(comm.rank(), n, step)[i];
        velocity_sum[i] += own_u[i];
        sent[i] += local[i];
      }
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(exact.residual()[i], 0.0, 1e-6);
      ASSERT_NEAR(sparse.velocity()[i], own_u[i], 1e-5);
      ASSERT_NEAR(sent[i] + sparse.residual()[i], velocity_sum[i], 1e-5) << "element " << i;
    }
    // The velocity is state: a copy restored from it continues identically.
    ErrorFeedback copy(MakeRandomK(0.05, 3), m);
    copy.SetState(sparse.GetState());
    EXPECT_EQ(copy.velocity(), sparse.velocity());
    EXPECT_EQ(copy.residual(), sparse.residual());
    auto a = Gradient(comm.rank(), n, 9), b = a;
    std::vector<float> la(n), lb(n);
    sparse.Reduce(comm, a.data(), la.data(), n);
    copy.Reduce(comm, b.data(), lb.data(), n);
    EXPECT_EQ(a, b);
  });
}

TEST(Compress, Int8RoundingIsUnbiased) {
  const size_t n = 257;
  testing::RunRanks(2, [&](Communicator& comm) {
    CompressorOptions o = NoFeedback();
    auto c = MakeCompressor("int8", o, {});
    const auto g = Gradient(comm.rank(), n);
    std::vector<double> mean(n, 0);
    const int draws = 2000;
    for (int t = 0; t < draws; ++t) {
      auto x = g;
      std::vector<float> local(n);
      c->Reduce(comm, x.data(), local.data(), n);
      for (size_t i = 0; i < n; ++i) mean[i] += local[i] / draws;
    }
    double max_abs = 0;
    for (float x : g) max_abs = std::max(max_abs, std::fabs(double(x)));
    // One level is max|g| / 63 here (shared scale >= own max); the mean of 2000 draws is within a
    // few standard errors (level / 2 / sqrt(2000)) of the input.
    for (size_t i = 0; i < n; ++i) EXPECT_NEAR(mean[i], g[i], 0.1 * 2 * max_abs / 63) << i;
  });
}

// Begin/End (compressor.h): three buckets begun one after the other on one communicator and
// ended later, in an order the gradient reducer's two threads per channel can produce (Begin 0,
// Begin 1, End 0, Begin 2, End 1, End 2), give bit for bit what three Reduce calls give: every
// compressor, with error feedback, over two steps (the second starts from the residuals and
// PowerSGD's warm Q). On one algorithm: the autotuner alternates algorithms between calls of one
// size, and three ranks' sums then round differently from one call to the next.
TEST(Compress, PipelinedBucketsMatchOneAtATime) {
  const std::vector<std::vector<TensorView>> layouts = {
      {{0, 96, 200}, {96 * 200, 96, 1}}, {{0, 1, 1}}, {{0, 40, 30}}};
  testing::RankSetup fixed;
  fixed.base.default_algorithm = AllreduceAlgorithm::kRing;
  for (int world : {1, 2, 3})
    for (const std::string& name : CompressorNames())
      testing::RunRanks(
          world,
          [&](Communicator& comm) {
            CompressorOptions o;
            o.ratio = 0.05;
            o.powersgd_min_saved_bytes = 0;
            std::vector<std::unique_ptr<Compressor>> serial, piped;
            std::vector<size_t> n;
            for (const auto& t : layouts) {
              serial.push_back(MakeCompressor(name, o, t));
              piped.push_back(MakeCompressor(name, o, t));
              n.push_back(t.back().offset + t.back().numel());
            }
            for (uint64_t step = 0; step < 2; ++step) {
              std::vector<std::vector<float>> ga, gb, la, lb;
              std::vector<size_t> wa, wb(3);
              for (size_t k = 0; k < 3; ++k) {
                ga.push_back(Gradient(comm.rank() + 10 * static_cast<int>(k), n[k], step));
                gb.push_back(ga.back());
                la.emplace_back(n[k]);
                lb.emplace_back(n[k]);
                wa.push_back(serial[k]->Reduce(comm, ga[k].data(), la[k].data(), n[k]));
              }
              const auto begin = [&](size_t k) {
                piped[k]->Begin(comm, gb[k].data(), lb[k].data(), n[k]);
              };
              begin(0);
              begin(1);
              wb[0] = piped[0]->End();
              begin(2);
              wb[1] = piped[1]->End();
              wb[2] = piped[2]->End();
              const std::string what =
                  name + " world " + std::to_string(world) + " step " + std::to_string(step);
              EXPECT_EQ(wb, wa) << what;
              for (size_t k = 0; k < 3; ++k) {
                EXPECT_EQ(gb[k], ga[k]) << what << " bucket " << k;
                EXPECT_EQ(lb[k], la[k]) << what << " bucket " << k;
              }
            }
          },
          fixed);
}

TEST(Compress, UnknownNamesAndBadRatiosAreRejected) {
  EXPECT_THROW(MakeCompressor("zip", {}, {}), Error);
  CompressorOptions o;
  o.ratio = 0;
  EXPECT_THROW(MakeCompressor("topk", o, {}), Error);
}

}  // namespace
}  // namespace cdt::compress
