// LARC clip mode (train/larc.h): a layer whose step lr x g would exceed `trust` of its weights'
// norm is shortened to exactly that; one whose step is already small, or that has no gradient,
// is left alone.
#include <gtest/gtest.h>

#include "train/larc.h"

namespace cdt::train {
namespace {

TEST(Larc, ShortensOnlyTheStepsAboveTheTrustRatio) {
  torch::Tensor big = torch::full({4}, 0.5);   // ||w|| = 1
  big.mutable_grad() = torch::full({4}, 5.0);  // ||g|| = 10: lr x ||g|| = 1 > 0.02
  torch::Tensor small = torch::full({4}, 0.5);
  small.mutable_grad() = torch::full({4}, 0.001);  // lr x ||g|| = 0.002 < 0.02: unchanged
  torch::Tensor no_grad = torch::ones({3});
  torch::Tensor zero_w = torch::zeros({2});
  zero_w.mutable_grad() = torch::ones({2});

  ClipByTrustRatio({big, small, no_grad, zero_w}, 0.02, 0.1);

  EXPECT_NEAR(big.grad().norm().item<double>() * 0.1, 0.02 * 1.0, 1e-7);
  EXPECT_TRUE(torch::allclose(big.grad(), torch::full({4}, 5.0 * 0.02 / (0.1 * 10.0))));
  EXPECT_TRUE(torch::equal(small.grad(), torch::full({4}, 0.001)));
  EXPECT_FALSE(no_grad.grad().defined());
  EXPECT_TRUE(torch::equal(zero_w.grad(), torch::ones({2})));
}

}  // namespace
}  // namespace cdt::train
