/* Shared AVX2 + FMA helpers of attnlab's C kernels (included by bruno/_attention_native.c, dohmatob/_rgd_native.c and
   sakai/_sampler_native.c; see attnlab/native.py, which folds this header into the build hash).
   exp2v: 2^t for 8 floats, a degree-5 minimax polynomial on [-1/2, 1/2] after rounding t = n + f, with 2^n added to
   the exponent bits of the polynomial (valid for -125 <= t < 128; t is clamped below at -125). hsum: the sum of the
   8 lanes. Where the compiler targets AVX-512F (-march=native on such a CPU), exp2v16 and hsum16 do the same on 16
   floats (the same polynomial, so the same value in every lane). */
#ifndef ATTNLAB_SIMD_H
#define ATTNLAB_SIMD_H
#include <immintrin.h>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "attnlab native kernel needs AVX2 and FMA"
#endif

static inline __m256 exp2v(__m256 t) {
    t = _mm256_max_ps(t, _mm256_set1_ps(-125.0f));
    __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_sub_ps(t, n);
    __m256 p = _mm256_set1_ps(0.0013276471782286067f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.009675541332786721f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.055507132741486324f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.2402211972388161f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.6931469670643617f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0000000716546733f));
    __m256i b = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), b));
}

/* Flush-to-zero and denormals-are-zero for the calling thread (MXCSR bits 15 and 6): results and operands below
   2^-126 in magnitude are taken as 0 instead of denormal numbers, whose every operation costs a microcode assist of
   about a hundred cycles on x86 cores. XLA's CPU threads run so; a kernel sets it for its own work and puts back the
   returned state with _mm_setcsr before it returns. */
static inline unsigned flush_denormals(void) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
    return csr;
}

static inline float hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

#if defined(__AVX512F__)
static inline __m512 exp2v16(__m512 t) {
    t = _mm512_max_ps(t, _mm512_set1_ps(-125.0f));
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_set1_ps(0.0013276471782286067f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.009675541332786721f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.055507132741486324f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.2402211972388161f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.6931469670643617f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0000000716546733f));
    __m512i b = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), b));
}

static inline float hsum16(__m512 v) { return _mm512_reduce_add_ps(v); }
#endif

#endif
