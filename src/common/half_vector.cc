#include "common/half_vector.h"

#include "common/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define CDT_F16C_VERSIONS 1
#endif

namespace cdt {

namespace {

void FloatsToHalfsPortable(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToHalf(src[i]);
}
void HalfsToFloatsPortable(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = HalfToFloat(src[i]);
}
void SumHalfsPortable(uint16_t* d, const uint16_t* s, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = FloatToHalf(HalfToFloat(d[i]) + HalfToFloat(s[i]));
}

#ifdef CDT_F16C_VERSIONS
#define CDT_F16C __attribute__((target("avx2,f16c")))

CDT_F16C void FloatsToHalfsF16c(const float* src, uint16_t* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = static_cast<uint16_t>(_cvtss_sh(src[i], _MM_FROUND_TO_NEAREST_INT));
}

CDT_F16C void HalfsToFloatsF16c(const uint16_t* src, float* dst, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = _cvtsh_ss(src[i]);
}

CDT_F16C void SumHalfsF16c(uint16_t* d, const uint16_t* s, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d + i)));
    const __m256 b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                     _mm256_cvtps_ph(_mm256_add_ps(a, b), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i)
    d[i] = static_cast<uint16_t>(
        _cvtss_sh(_cvtsh_ss(d[i]) + _cvtsh_ss(s[i]), _MM_FROUND_TO_NEAREST_INT));
}

// Asked per call (a load of the CPU model GCC's runtime filled in at start-up): one branch per
// buffer.
bool HasF16c() { return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"); }
#endif

}  // namespace

void FloatsToHalfs(const float* src, uint16_t* dst, size_t n) {
#ifdef CDT_F16C_VERSIONS
  if (HasF16c()) return FloatsToHalfsF16c(src, dst, n);
#endif
  FloatsToHalfsPortable(src, dst, n);
}

void HalfsToFloats(const uint16_t* src, float* dst, size_t n) {
#ifdef CDT_F16C_VERSIONS
  if (HasF16c()) return HalfsToFloatsF16c(src, dst, n);
#endif
  HalfsToFloatsPortable(src, dst, n);
}

void SumHalfs(uint16_t* d, const uint16_t* s, size_t n) {
#ifdef CDT_F16C_VERSIONS
  if (HasF16c()) return SumHalfsF16c(d, s, n);
#endif
  SumHalfsPortable(d, s, n);
}

// bfloat16 is bit arithmetic on the upper half of a float; these loops vectorise as they are.
void FloatsToBFloat16s(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = FloatToBFloat16(src[i]);
}

void BFloat16sToFloats(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = BFloat16ToFloat(src[i]);
}

}  // namespace cdt
