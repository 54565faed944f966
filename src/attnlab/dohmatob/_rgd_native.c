/* Riemannian gradient descent of softmax attention on an empirical risk (Dohmatob, NeurIPS 2025, eq. 29), with the token
   products and the per-token arithmetic in float32 (AVX-512F with 16 lanes, else AVX2 + FMA with 8; OpenMP over
   repeats): see attnlab/dohmatob/rgd_native.py.

   Per repeat: tokens X (nb, L, d, VL) float32, sample-lane layout: block b holds samples VL b..VL b + VL - 1, one per
   lane of every vector x[l][j] (coordinate j of token l); the samples beyond n are zero tokens with label 0, which
   add nothing (sigma(0) = 0 for every link, so their residual is 0). Labels Y (K, VL nb); K runs share the tokens,
   run k with parameters u = W[k], v = W[K + k] (float64) and link link[k]. One step:
       a_l = lam <x_l, u>, b_l = <x_l, v>, w = softmax(a) over the L tokens, g_l = sigma(b_l), f = sum_l w_l g_l,
       r = f - y,  dL/da_l = (2/n) r lam w_l (g_l - f),  dL/db_l = (2/n) r w_l sigma'(b_l),
       grad_u = sum over samples and tokens of dL/da_l x_l, grad_v likewise,
       w <- (w - step_size (g - (w.g) w)) / |.|    for every row (float64).
   With the samples in the lanes, every step is vertical: the scores of a block are tiles of 4 tokens x 3 rows (one
   broadcast coefficient of a row times VL samples' coordinate), the softmax over the L tokens is a max, exp and sum
   across L vectors (no horizontal reduction, no idle lane), and the gradient accumulates per lane (tiles of 4 rows
   x 3 coordinates over the L tokens of a block, the block's tokens still in cache). The float32 lane gradients are
   added into float64 lane accumulators every FLUSH blocks and summed over the lanes once per step. Each repeat runs
   on one thread from start to end, so the result does not depend on the number of threads. The float32 arithmetic
   flushes denormals to zero (flush_denormals): the softmax weights of tokens far below the largest score reach
   2^-125, and their products with the residual fall below 2^-126, where every operation on a denormal costs a
   microcode assist (on the preset's data, several times the time of the whole step); what is flushed is below
   2^-126, under the round-off of any sum it enters. */
#include "../_simd.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>


/* The vector of VL float32 lanes (VL samples) and its operations: 16 lanes where the compiler targets AVX-512F
   (-march=native on such a CPU), else 8 (AVX2). Every lane is one sample, so the per-sample arithmetic is the same at
   both widths; only the float32 partial sums of the gradient over a lane's samples group them differently. */
#if defined(__AVX512F__)
#define VL 16
#define VBYTES 64
typedef __m512 vf;
typedef __m512d vd;
#define vzero() _mm512_setzero_ps()
#define vset1(a) _mm512_set1_ps(a)
#define vbcast(p) _mm512_set1_ps(*(p))
#define vloadu(p) _mm512_loadu_ps(p)
#define vfmadd(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vadd(a, b) _mm512_add_ps(a, b)
#define vsub(a, b) _mm512_sub_ps(a, b)
#define vmul(a, b) _mm512_mul_ps(a, b)
#define vmax(a, b) _mm512_max_ps(a, b)
#define vdiv(a, b) _mm512_div_ps(a, b)
#define vexp2(a) exp2v16(a)
#define vadd_pd(a, b) _mm512_add_pd(a, b)
#define vcvt_lo(a) _mm512_cvtps_pd(_mm512_castps512_ps256(a))
#define vcvt_hi(a) _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)))
/* sigma'(b) of relu: 1 where b > 0, 1/2 where b = 0 (as jax.jvp of jnp.maximum), 0 elsewhere */
static inline vf vrelu_step(vf b) {
    return _mm512_add_ps(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask(b, vzero(), _CMP_GT_OQ), vset1(1.0f)),
                         _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(b, vzero(), _CMP_EQ_OQ), vset1(0.5f)));
}
static double hsum_pd2(vd a, vd b) { return _mm512_reduce_add_pd(_mm512_add_pd(a, b)); }
#else
#define VL 8
#define VBYTES 32
typedef __m256 vf;
typedef __m256d vd;
#define vzero() _mm256_setzero_ps()
#define vset1(a) _mm256_set1_ps(a)
#define vbcast(p) _mm256_broadcast_ss(p)
#define vloadu(p) _mm256_loadu_ps(p)
#define vfmadd(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vadd(a, b) _mm256_add_ps(a, b)
#define vsub(a, b) _mm256_sub_ps(a, b)
#define vmul(a, b) _mm256_mul_ps(a, b)
#define vmax(a, b) _mm256_max_ps(a, b)
#define vdiv(a, b) _mm256_div_ps(a, b)
#define vexp2(a) exp2v(a)
#define vadd_pd(a, b) _mm256_add_pd(a, b)
#define vcvt_lo(a) _mm256_cvtps_pd(_mm256_castps256_ps128(a))
#define vcvt_hi(a) _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1))
static inline vf vrelu_step(vf b) {
    return _mm256_add_ps(_mm256_and_ps(_mm256_cmp_ps(b, vzero(), _CMP_GT_OQ), vset1(1.0f)),
                         _mm256_and_ps(_mm256_cmp_ps(b, vzero(), _CMP_EQ_OQ), vset1(0.5f)));
}
static double hsum_pd2(vd a, vd b) {
    vd s = _mm256_add_pd(a, b);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}
#endif

/* The lanes of this build (the Python side packs the samples in blocks of VL). */
int attnlab_rgd_lanes(void) { return VL; }

#define FLUSH 8 /* blocks of VL samples summed in float32 (8 L terms per lane) before the float64 accumulator */

/* S[r L + t] = sum_j w_r[j] x_t[j] (VL samples per vector) for NT tokens (stride VL d floats) and NR rows (stride d),
   summed in float32 over chunks of at most JB coordinates whose sums are then added (about JB + d / JB roundings
   deep instead of d). */
#define JB 25
static inline __attribute__((always_inline)) void score_tile(const int NT, const int NR, const float *x,
                                                             const float *w, int d, vf *S, int L) {
    for (int j0 = 0; j0 < d; j0 += JB) {
        const int j1 = j0 + JB < d ? j0 + JB : d;
        vf acc[4][3];
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < NR; r++) acc[t][r] = vzero();
        for (int j = j0; j < j1; j++) {
            vf wv[3];
            for (int r = 0; r < NR; r++) wv[r] = vbcast(w + r * d + j);
            for (int t = 0; t < NT; t++) {
                vf xv = vloadu(x + ((size_t)t * d + j) * VL);
                for (int r = 0; r < NR; r++) acc[t][r] = vfmadd(xv, wv[r], acc[t][r]);
            }
        }
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < NR; r++) S[r * L + t] = j0 ? vadd(S[r * L + t], acc[t][r]) : acc[t][r];
    }
}

#define SCORE_ROWS(NT)                                                                                              \
    do {                                                                                                            \
        int r = 0;                                                                                                  \
        for (; r + 3 <= R2; r += 3) score_tile(NT, 3, x + (size_t)t * d * VL, W32 + r * d, d, S + r * L + t, L);     \
        for (; r < R2; r++) score_tile(NT, 1, x + (size_t)t * d * VL, W32 + r * d, d, S + r * L + t, L);             \
    } while (0)

static void scores(const float *x, int L, int d, const float *W32, int R2, vf *S) {
    int t = 0;
    for (; t + 4 <= L; t += 4) SCORE_ROWS(4);
    for (; t < L; t++) SCORE_ROWS(1);
}

/* G[r d + c] += sum_l C[r L + l] x_l[j + c] for NR rows and NC coordinates (x at coordinate j of token 0). */
static inline __attribute__((always_inline)) void grad_tile(const int NR, const int NC, const float *x, int d, int L,
                                                            const vf *C, vf *G) {
    vf acc[4][3];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = G[r * d + c];
    for (int l = 0; l < L; l++) {
        vf xv[3];
        for (int c = 0; c < NC; c++) xv[c] = vloadu(x + ((size_t)l * d + c) * VL);
        for (int r = 0; r < NR; r++) {
            const vf cr = C[r * L + l];
            for (int c = 0; c < NC; c++) acc[r][c] = vfmadd(cr, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) G[r * d + c] = acc[r][c];
}

#define GRAD_COLS(NC)                                                                                               \
    do {                                                                                                            \
        int r = 0;                                                                                                  \
        for (; r + 4 <= R2; r += 4) grad_tile(4, NC, x + VL * j, d, L, C + r * L, G + r * d + j);                   \
        for (; r < R2; r++) grad_tile(1, NC, x + VL * j, d, L, C + r * L, G + r * d + j);                           \
    } while (0)

static void gradient(const float *x, int L, int d, const vf *C, int R2, vf *G) {
    int j = 0;
    for (; j + 3 <= d; j += 3) GRAD_COLS(3);
    switch (d - j) {
    case 2: GRAD_COLS(2); break;
    case 1: GRAD_COLS(1); break;
    }
}

/* Softmax, link and residual of one run on a block (scores Su, Sv: L vectors of VL samples); adds r^2 into the two
   float64 lane accumulators loss; writes the token coefficients Cu, Cv of u and v unless Cu is NULL. E, Gs, Ds:
   scratch, L vectors each. */
static inline __attribute__((always_inline)) void run_block_link(const int link, const vf *Su,
                                                                 const vf *Sv, int L, float lam, vf y,
                                                                 float two_over_n, vf *Cu, vf *Cv,
                                                                 vd *loss, vf *E, vf *Gs, vf *Ds) {
    const vf lv = vset1(lam), zero = vzero();
    vf m = vset1(-INFINITY);
    for (int l = 0; l < L; l++) m = vmax(m, vmul(lv, Su[l]));
    const vf log2e = vset1(1.4426950408889634f);
    vf se = zero, sf = zero;
    for (int l = 0; l < L; l++) {
        const vf e = vexp2(vmul(vsub(vmul(lv, Su[l]), m), log2e));
        const vf b = Sv[l];
        vf g, dg;
        if (link == 0) {
            g = b;
            dg = vset1(1.0f);
        } else if (link == 1) {
            g = vmul(b, b);
            dg = vadd(b, b);
        } else { /* relu; sigma'(0) = 1/2, as jax.jvp of jnp.maximum */
            g = vmax(b, zero);
            dg = vrelu_step(b);
        }
        E[l] = e;
        Gs[l] = g;
        Ds[l] = dg;
        se = vadd(se, e);
        sf = vfmadd(e, g, sf);
    }
    const vf inv = vdiv(vset1(1.0f), se);
    const vf f = vmul(sf, inv);
    const vf r = vsub(f, y);
    const vf r2 = vmul(r, r);
    loss[0] = vadd_pd(loss[0], vcvt_lo(r2));
    loss[1] = vadd_pd(loss[1], vcvt_hi(r2));
    if (Cu) {
        const vf cw = vmul(vset1(two_over_n), vmul(r, inv));
        const vf cwl = vmul(cw, lv);
        for (int l = 0; l < L; l++) {
            Cu[l] = vmul(vmul(cwl, E[l]), vsub(Gs[l], f)); /* (2/n) r lam w_l (g_l - f) */
            Cv[l] = vmul(vmul(cw, E[l]), Ds[l]);                    /* (2/n) r w_l sigma'(b_l) */
        }
    }
}

/* run_block_link with the link as a compile-time constant in each branch */
static void run_block(int link, const vf *Su, const vf *Sv, int L, float lam, vf y, float two_over_n,
                      vf *Cu, vf *Cv, vd *loss, vf *E, vf *Gs, vf *Ds) {
    switch (link) {
    case 0: run_block_link(0, Su, Sv, L, lam, y, two_over_n, Cu, Cv, loss, E, Gs, Ds); break;
    case 1: run_block_link(1, Su, Sv, L, lam, y, two_over_n, Cu, Cv, loss, E, Gs, Ds); break;
    default: run_block_link(2, Su, Sv, L, lam, y, two_over_n, Cu, Cv, loss, E, Gs, Ds); break;
    }
}

/* G64 += G8, G8 = 0 (m vectors of VL floats into 2 m vectors of VL / 2 doubles). */
static void flush(vf *G8, vd *G64, int m) {
    for (int i = 0; i < m; i++) {
        G64[2 * i] = vadd_pd(G64[2 * i], vcvt_lo(G8[i]));
        G64[2 * i + 1] = vadd_pd(G64[2 * i + 1], vcvt_hi(G8[i]));
        G8[i] = vzero();
    }
}

typedef struct {
    float *W32;
    vf *S, *C, *G8, *E, *Gs, *Ds;
    vd *G64, *loss;
    double *grad;
} scratch;

/* One pass over the blocks: losses (K,) in float64, and the gradient grad (2K, d) unless grad is NULL. */
static void pass(const float *X, const float *Y, const int *link, int n, int nb, int L, int d, int K, float lam,
                 scratch *w, double *grad, double *loss) {
    const int R2 = 2 * K;
    const float two_over_n = 2.0f / (float)n;
    memset(w->loss, 0, sizeof(vd) * 2 * K);
    if (grad) {
        memset(w->G8, 0, sizeof(vf) * R2 * d);
        memset(w->G64, 0, sizeof(vd) * 2 * R2 * d);
    }
    for (int b = 0; b < nb; b++) {
        const float *x = X + (size_t)b * L * d * VL;
        scores(x, L, d, w->W32, R2, w->S);
        for (int k = 0; k < K; k++)
            run_block(link[k], w->S + k * L, w->S + (K + k) * L, L, lam, vloadu(Y + (size_t)k * nb * VL + VL * b),
                      two_over_n, grad ? w->C + k * L : NULL, w->C + (K + k) * L, w->loss + 2 * k, w->E, w->Gs, w->Ds);
        if (grad) {
            gradient(x, L, d, w->C, R2, w->G8);
            if (b % FLUSH == FLUSH - 1) flush(w->G8, w->G64, R2 * d);
        }
    }
    if (grad) {
        flush(w->G8, w->G64, R2 * d);
        for (int i = 0; i < R2 * d; i++) grad[i] = hsum_pd2(w->G64[2 * i], w->G64[2 * i + 1]);
    }
    for (int k = 0; k < K; k++) loss[k] = hsum_pd2(w->loss[2 * k], w->loss[2 * k + 1]) / n;
}

static void to_float(const double *W, int m, float *W32) {
    for (int i = 0; i < m; i++) W32[i] = (float)W[i];
}

/* RGD of R repeats: X (R, nb, L, d, VL) with nb = ceil(n / VL), Y (R, K, VL nb), link (K,), W (R, 2K, d) float64
   in/out. Runs n_logs x log_every steps; after each log_every steps writes W to Wlog (R, n_logs, 2K, d) and the
   losses at that W to loss_log (R, n_logs, K). Returns 0, or 1 on bad sizes, 2 when out of memory. */
int attnlab_rgd(int R, int n, int L, int d, int K, const float *X, const float *Y, const int *link, double lam,
                double step_size, int n_logs, int log_every, double *W, double *Wlog, double *loss_log) {
    if (n < 1 || L < 1 || d < 1 || K < 1 || R < 1 || n_logs < 1 || log_every < 0 || (log_every == 0 && n_logs != 1))
        return 1;
    const int nb = (n + VL - 1) / VL;
    int status = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int rep = 0; rep < R; rep++) {
        const int R2 = 2 * K;
        const unsigned csr = flush_denormals(); /* restored below, before the thread leaves the repeat */
        scratch w;
        w.W32 = aligned_alloc(VBYTES, sizeof(float) * ((R2 * d + 31) / 16 * 16));
        w.S = aligned_alloc(VBYTES, sizeof(vf) * R2 * L);
        w.C = aligned_alloc(VBYTES, sizeof(vf) * R2 * L);
        w.E = aligned_alloc(VBYTES, sizeof(vf) * 3 * L);
        w.Gs = w.E ? w.E + L : NULL;
        w.Ds = w.E ? w.E + 2 * L : NULL;
        w.G8 = aligned_alloc(VBYTES, sizeof(vf) * R2 * d);
        w.G64 = aligned_alloc(VBYTES, sizeof(vd) * 2 * R2 * d);
        w.loss = aligned_alloc(VBYTES, sizeof(vd) * 2 * K);
        double *grad = malloc(sizeof(double) * R2 * d), *loss = malloc(sizeof(double) * K);
        if (!w.W32 || !w.S || !w.C || !w.E || !w.G8 || !w.G64 || !w.loss || !grad || !loss) {
#pragma omp atomic write
            status = 2;
        } else {
            const float *Xr = X + (size_t)rep * nb * L * d * VL, *Yr = Y + (size_t)rep * K * nb * VL;
            double *Wr = W + (size_t)rep * R2 * d;
            for (int t = 0; t < n_logs; t++) {
                for (int step = 0; step < log_every; step++) {
                    to_float(Wr, R2 * d, w.W32);
                    pass(Xr, Yr, link, n, nb, L, d, K, (float)lam, &w, grad, loss);
                    if (t > 0 && step == 0) /* the losses at the iterate logged last, from this step's pass */
                        memcpy(loss_log + ((size_t)rep * n_logs + t - 1) * K, loss, sizeof(double) * K);
                    for (int r = 0; r < R2; r++) {
                        double *u = Wr + r * d, *g = grad + r * d, ug = 0.0, nrm = 0.0;
                        for (int j = 0; j < d; j++) ug += u[j] * g[j];
                        for (int j = 0; j < d; j++) {
                            u[j] -= step_size * (g[j] - ug * u[j]);
                            nrm += u[j] * u[j];
                        }
                        nrm = 1.0 / sqrt(nrm);
                        for (int j = 0; j < d; j++) u[j] *= nrm;
                    }
                }
                memcpy(Wlog + ((size_t)rep * n_logs + t) * R2 * d, Wr, sizeof(double) * R2 * d);
            }
            /* the losses at the last iterate: one forward pass */
            to_float(Wr, R2 * d, w.W32);
            pass(Xr, Yr, link, n, nb, L, d, K, (float)lam, &w, NULL, loss);
            memcpy(loss_log + ((size_t)rep * n_logs + n_logs - 1) * K, loss, sizeof(double) * K);
        }
        free(w.W32);
        free(w.S);
        free(w.C);
        free(w.E);
        free(w.G8);
        free(w.G64);
        free(w.loss);
        free(grad);
        free(loss);
        _mm_setcsr(csr);
    }
    return status;
}

/* The CPU's float32 multiply-add bound for this kernel: every thread of the OpenMP pool runs n_iter x 12 independent
   vector FMAs at this build's width (12 chains cover the FMA latency of two ports); returns the floating-point
   operations per second (2 per lane and FMA, wall time) and writes a sum to *sink so that nothing is optimised
   away. */
double attnlab_rgd_fma_flops(long n_iter, float *sink) {
    double t0 = omp_get_wtime();
    long total = 0;
    float acc_all = 0.0f;
#pragma omp parallel reduction(+ : total, acc_all)
    {
        vf a[12];
        const vf b = vset1(0.9999f), c = vset1(1e-6f);
        for (int i = 0; i < 12; i++) a[i] = vset1(0.001f * (float)i);
        for (long k = 0; k < n_iter; k++) {
#pragma GCC unroll 12
            for (int i = 0; i < 12; i++) a[i] = vfmadd(a[i], b, c);
        }
        vf s = vzero();
        for (int i = 0; i < 12; i++) s = vadd(s, a[i]);
        float lanes[VL];
        memcpy(lanes, &s, sizeof lanes);
        acc_all += lanes[0];
        total += n_iter * 12 * VL * 2;
    }
    *sink = acc_all;
    return (double)total / (omp_get_wtime() - t0);
}
