#include "compress/kernels.h"

#include <algorithm>

// Two builds of each kernel where GCC can dispatch at load time (see kernels.h). Not under a
// sanitizer: the ifunc resolver runs while the loader relocates, before the sanitizer's runtime
// is up, and instrumented it crashed every TSan test binary at load (`make tsan`). Sanitized
// builds test the portable kernels, which round as the vector ones do.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && !defined(__SANITIZE_ADDRESS__)
#define CDT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define CDT_VECTOR_CLONES
#endif

namespace cdt::compress::kernels {
namespace {

// Inlined into each build of the kernels that call them, so they vectorise for that build's CPU.
#define CDT_INLINE __attribute__((always_inline))

// Runs element(i) for every i < n — it writes what it must and returns a value — and returns the
// sum of the squares of those values: in float within blocks of 4096, the blocks added in double.
template <typename Element>
inline CDT_INLINE double SumOfSquares(size_t n, Element element) {
  constexpr size_t kBlock = 4096;
  double total = 0;
  for (size_t at = 0; at < n; at += kBlock) {
    const size_t end = std::min(n, at + kBlock);
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (size_t i = at; i < end; ++i) {
      const float x = element(i);
      s += x * x;
    }
    total += s;
  }
  return total;
}

}  // namespace

CDT_VECTOR_CLONES float Dot(const float* a, const float* b, size_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (size_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

CDT_VECTOR_CLONES void Axpy(float a, const float* x, float* y, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

CDT_VECTOR_CLONES void Scale(float a, const float* x, float* y, size_t n) {
#pragma omp simd
  for (size_t i = 0; i < n; ++i) y[i] = a * x[i];
}

CDT_VECTOR_CLONES double AddResidual(const float* g, float* e, float* out, size_t n) {
  return SumOfSquares(n, [=](size_t i) CDT_INLINE {
    const float x = g[i] + e[i];
    e[i] = x;
    out[i] = x;
    return x;
  });
}

CDT_VECTOR_CLONES double AddResidualWithMomentum(float m, const float* g, float* u, float* e,
                                                 float* out, size_t n) {
  return SumOfSquares(n, [=](size_t i) CDT_INLINE {
    const float v = m * u[i] + g[i];
    u[i] = v;
    const float x = v + e[i];
    e[i] = x;
    out[i] = x;
    return x;
  });
}

CDT_VECTOR_CLONES double SubtractSent(const float* local, float* e, size_t n) {
  return SumOfSquares(n, [=](size_t i) CDT_INLINE {
    const float r = e[i] - local[i];
    e[i] = r;
    return r;
  });
}

}  // namespace cdt::compress::kernels
