// Vector kernels of the compressors' hot loops (error feedback, PowerSGD's thin products).
//
// They run on the compression threads, which share the cores with training, so their cost is
// training time. Each is compiled twice — for x86-64-v3 (AVX2, every x86 server since 2013) and
// for the baseline — and the loader picks by CPU (GCC target_clones, an ifunc), as glibc does for
// its string functions; the portable binary stays portable. Elsewhere they are plain loops. No
// fused multiply-add (-ffp-contract=off): both builds round alike, so ranks on different CPU
// generations decode the same sums. Sums of squares are taken in float within blocks and added
// up in double.
#pragma once

#include <cstddef>

namespace cdt::compress::kernels {

float Dot(const float* a, const float* b, size_t n);      // Σ a[i] b[i]
void Axpy(float a, const float* x, float* y, size_t n);   // y += a x
void Scale(float a, const float* x, float* y, size_t n);  // y = a x

// Error feedback's first pass: x = g + e, written to both e and out; returns Σ x².
double AddResidual(const float* g, float* e, float* out, size_t n);
// The same with momentum correction: u = m u + g, then x = u + e.
double AddResidualWithMomentum(float m, const float* g, float* u, float* e, float* out, size_t n);
// Error feedback's second pass: e −= local; returns Σ e² (the new residual's).
double SubtractSent(const float* local, float* e, size_t n);

}  // namespace cdt::compress::kernels
