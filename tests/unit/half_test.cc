#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half.h"
#include "common/half_vector.h"

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
  for (float v : {0.0f, 1.0f, -3.0f, 256.0f, 0x1p100f})
    EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(v)), v);
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(257.0f)), 256.0f);  // tie -> even
  EXPECT_EQ(BFloat16ToFloat(FloatToBFloat16(259.0f)), 260.0f);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(FloatToBFloat16(std::nanf("")))));
}

// The buffer routines (hardware conversion where the CPU has it) agree with the scalar ones: every
// half, floats around every rounding boundary and across the whole range, and sums; lengths leave
// a tail after the 8-wide part. NaN stays NaN (its payload may differ).
TEST(HalfVector, MatchesTheScalarConversions) {
  std::vector<uint16_t> halfs(0x10000 + 5);
  for (size_t i = 0; i < halfs.size(); ++i) halfs[i] = static_cast<uint16_t>(i);
  std::vector<float> floats(halfs.size());
  HalfsToFloats(halfs.data(), floats.data(), halfs.size());
  for (size_t i = 0; i < halfs.size(); ++i) {
    const float want = HalfToFloat(halfs[i]);
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(floats[i])) << i;
    else
      EXPECT_EQ(floats[i], want) << std::hex << halfs[i];
  }

  std::vector<float> in;
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, sizeof f);
    in.push_back(f);
  }
  for (float f : floats) {  // every half value and its neighbours: the ties and just off them
    in.push_back(f);
    in.push_back(std::nextafter(f, 0.0f));
    in.push_back(std::nextafter(f, std::numeric_limits<float>::infinity()));
    in.push_back(f * 1.00048828125f);  // halfway to the next half, for normal values
  }
  std::vector<uint16_t> out(in.size());
  FloatsToHalfs(in.data(), out.data(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) {
      EXPECT_TRUE(std::isnan(HalfToFloat(out[i]))) << i;
      continue;
    }
    ASSERT_EQ(out[i], FloatToHalf(in[i])) << std::hexfloat << in[i];
  }

  std::vector<uint16_t> a(1003), b(1003);
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = FloatToHalf(
        std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, static_cast<int>(rng() % 20) - 10));
    b[i] = FloatToHalf(
        std::ldexp(static_cast<float>(rng() % 2001) - 1000.0f, static_cast<int>(rng() % 20) - 10));
  }
  std::vector<uint16_t> sum = a;
  SumHalfs(sum.data(), b.data(), sum.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(sum[i], FloatToHalf(HalfToFloat(a[i]) + HalfToFloat(b[i]))) << i;

  std::vector<uint16_t> bf(in.size());
  FloatsToBFloat16s(in.data(), bf.data(), in.size());
  std::vector<float> back(in.size());
  BFloat16sToFloats(bf.data(), back.data(), bf.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) continue;
    ASSERT_EQ(bf[i], FloatToBFloat16(in[i])) << i;
    ASSERT_EQ(back[i], BFloat16ToFloat(bf[i])) << i;
  }
}

}  // namespace cdt
