#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/half.h"

namespace cdt {

TEST(Half, ExactValuesRoundTrip) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /* min normal */,
                  5.9604644775390625e-08f /* min subnormal */, 1024.0f, 2047.0f})
    EXPECT_EQ(HalfToFloat(FloatToHalf(v)), v) << v;
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(HalfToFloat(FloatToHalf(2049.0f)), 2048.0f);  // tie -> even
  EXPECT_EQ(HalfToFloat(FloatToHalf(2051.0f)), 2052.0f);  // tie -> even
  EXPECT_EQ(HalfToFloat(FloatToHalf(1e6f)), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::nanf("")))));
}

TEST(Half, AllHalfBitPatternsSurviveFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << h;
  }
}

TEST(BFloat16, RoundTripAndRounding) {
  for (float v : {0.0f, 1.0f, -3.0f, 256.0f, 0x1p100f}) EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(v)), v);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);  // tie -> even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(259.0f)), 260.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

}  // namespace cdt
