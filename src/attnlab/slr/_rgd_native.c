/* Riemannian gradient descent of softmax attention on an empirical risk (Dohmatob, spec B6-B7), with the token
   products and the per-token arithmetic in float32 (AVX2 + FMA, OpenMP over repeats): see attnlab/slr/rgd_native.py.

   Per repeat: tokens X (n, L, dp) float32 (sample-major, d zero-padded to dp, a multiple of 8), labels Y (K, n), K
   runs sharing the tokens, run k with parameters u = W[k], v = W[K + k] (float64) and link link[k]. One step:
       a_l = lam <x_l, u>, b_l = <x_l, v>, w = softmax(a) over the L tokens, g_l = sigma(b_l), f = sum_l w_l g_l,
       r = f - y,  dL/da_l = (2/n) r lam w_l (g_l - f),  dL/db_l = (2/n) r w_l sigma'(b_l),
       grad_u = sum over samples and tokens of dL/da_l x_l, grad_v likewise,
       w <- (w - s (g - (w.g) w)) / |.|    for every row (float64).
   The scores of one sample are formed in registers (4 tokens x 3 rows per tile), its softmax and residuals in 8-lane
   vectors over the tokens (two runs interleaved), and the gradient of a block of 4 samples while their tokens are
   still in cache (3 rows x 32 coordinates per tile); a last chunk of at most 4 coordinates takes 128-bit products.
   The float32 block gradients are added into a float64 accumulator every 8 blocks. Each repeat runs on one thread
   from start to end, so the result does not depend on the number of threads. */
#include "../_simd.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>


#define BLOCK 4    /* samples per gradient block: their tokens (33 KB at L = 20, d = 100) stay in L1/L2 */
#define FLUSH 8    /* blocks summed in float32 before they are added into the float64 gradient */
#define PF_AHEAD 3 /* the tokens of the sample this far ahead are prefetched while a sample's scores are formed */

static inline float hmax(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

/* The sums of the 8 lanes of v0..v3, as the 4 lanes of one vector. */
static inline __m128 hsum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
    __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* S[r][t] = <x_t, w_r> for NT tokens (stride dp) and NR rows (stride dp); S has row stride ls. NT is 4 or 1.
   nfull chunks of 8 coordinates, then (half = 1) a last chunk whose upper 4 coordinates are zero padding, taken with
   128-bit products (half the cost of a 256-bit FMA on Zen 1: d = 100 costs 12.5 chunks, not 13). */
static inline __attribute__((always_inline)) void score_tile(const int NT, const int NR, const float *x,
                                                             const float *w, int dp, int nfull, int half, float *S,
                                                             int ls) {
    __m256 acc[4][3];
    if (half) {
        const int j = 8 * nfull;
        for (int r = 0; r < NR; r++) {
            __m128 wv = _mm_load_ps(w + r * dp + j);
            for (int t = 0; t < NT; t++)
                acc[t][r] = _mm256_zextps128_ps256(_mm_mul_ps(_mm_loadu_ps(x + t * dp + j), wv));
        }
    } else {
        for (int t = 0; t < NT; t++)
            for (int r = 0; r < NR; r++) acc[t][r] = _mm256_setzero_ps();
    }
    for (int j = 0; j < 8 * nfull; j += 8) {
        __m256 wv[3];
        for (int r = 0; r < NR; r++) wv[r] = _mm256_load_ps(w + r * dp + j);
        for (int t = 0; t < NT; t++) {
            __m256 xv = _mm256_loadu_ps(x + t * dp + j);
            for (int r = 0; r < NR; r++) acc[t][r] = _mm256_fmadd_ps(xv, wv[r], acc[t][r]);
        }
    }
    if (NT == 4)
        for (int r = 0; r < NR; r++) _mm_storeu_ps(S + r * ls, hsum4(acc[0][r], acc[1][r], acc[2][r], acc[3][r]));
    else
        for (int r = 0; r < NR; r++) S[r * ls] = hsum(acc[0][r]);
}

/* G[r][j..j+8 NC) += sum_t C[r][t] x_t[j..j+8 NC) for NR rows (C row stride lc), T tokens, float32 G. */
static inline __attribute__((always_inline)) void grad_tile(const int NR, const int NC, const float *x, int dp, int T,
                                                            const float *C, int lc, float *G) {
    __m256 acc[3][4];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) acc[r][c] = _mm256_load_ps(G + r * dp + 8 * c);
    for (int t = 0; t < T; t++) {
        __m256 xv[4];
        for (int c = 0; c < NC; c++) xv[c] = _mm256_loadu_ps(x + t * dp + 8 * c);
        for (int r = 0; r < NR; r++) {
            __m256 cr = _mm256_broadcast_ss(C + r * lc + t);
            for (int c = 0; c < NC; c++) acc[r][c] = _mm256_fmadd_ps(cr, xv[c], acc[r][c]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < NC; c++) _mm256_store_ps(G + r * dp + 8 * c, acc[r][c]);
}

/* The half chunk (4 coordinates at j) of the gradient, 128-bit: G[r][j..j+4) += sum_t C[r][t] x_t[j..j+4). */
static inline __attribute__((always_inline)) void grad_half_tile(const int NR, const float *x, int dp, int T,
                                                                 const float *C, int lc, float *G) {
    __m128 acc[6];
    for (int r = 0; r < NR; r++) acc[r] = _mm_load_ps(G + r * dp);
    for (int t = 0; t < T; t++) {
        __m128 xv = _mm_loadu_ps(x + t * dp);
        for (int r = 0; r < NR; r++) acc[r] = _mm_fmadd_ps(_mm_broadcast_ss(C + r * lc + t), xv, acc[r]);
    }
    for (int r = 0; r < NR; r++) _mm_store_ps(G + r * dp, acc[r]);
}

/* G64 += Gf, Gf = 0 (m floats). */
static void flush(float *Gf, double *G64, int m) {
    for (int j = 0; j < m; j++) {
        G64[j] += Gf[j];
        Gf[j] = 0.0f;
    }
}

static void scores(const float *x, int L, const float *W32, int R2, int dp, int nfull, int half, float *S, int ls,
                   const float *pf) {
    const int lines = (L * dp + 15) / 16, per_tile = (lines + (L + 3) / 4 - 1) / ((L + 3) / 4);
    int t = 0, next = 0;
    for (; t + 4 <= L; t += 4) {
        for (int q = 0; q < per_tile && next < lines; q++, next++) _mm_prefetch((const char *)(pf + 16 * next), _MM_HINT_T0);
        int r = 0;
        for (; r + 3 <= R2; r += 3) score_tile(4, 3, x + t * dp, W32 + r * dp, dp, nfull, half, S + r * ls + t, ls);
        for (; r < R2; r++) score_tile(4, 1, x + t * dp, W32 + r * dp, dp, nfull, half, S + r * ls + t, ls);
    }
    for (; next < lines; next++) _mm_prefetch((const char *)(pf + 16 * next), _MM_HINT_T0);
    for (; t < L; t++) {
        int r = 0;
        for (; r + 3 <= R2; r += 3) score_tile(1, 3, x + t * dp, W32 + r * dp, dp, nfull, half, S + r * ls + t, ls);
        for (; r < R2; r++) score_tile(1, 1, x + t * dp, W32 + r * dp, dp, nfull, half, S + r * ls + t, ls);
    }
}

#define GRAD_ROWS(NR)                                                                                               \
    do {                                                                                                            \
        int c = 0;                                                                                                  \
        for (; c + 4 <= nc; c += 4) grad_tile(NR, 4, x + 8 * c, dp, T, C + r * lc, lc, G + r * dp + 8 * c);       \
        switch (nc - c) {                                                                                           \
        case 3: grad_tile(NR, 3, x + 8 * c, dp, T, C + r * lc, lc, G + r * dp + 8 * c); break;                     \
        case 2: grad_tile(NR, 2, x + 8 * c, dp, T, C + r * lc, lc, G + r * dp + 8 * c); break;                     \
        case 1: grad_tile(NR, 1, x + 8 * c, dp, T, C + r * lc, lc, G + r * dp + 8 * c); break;                     \
        }                                                                                                           \
    } while (0)

static void gradient(const float *x, int T, const float *C, int lc, int R2, int dp, int nfull, int half, float *G) {
    const int nc = nfull;
    int r = 0;
    for (; r + 3 <= R2; r += 3) GRAD_ROWS(3);
    for (; r < R2; r++) GRAD_ROWS(1);
    if (half) {
        const int j = 8 * nfull;
        for (r = 0; r + 6 <= R2; r += 6) grad_half_tile(6, x + j, dp, T, C + r * lc, lc, G + r * dp + j);
        for (; r < R2; r++) grad_half_tile(1, x + j, dp, T, C + r * lc, lc, G + r * dp + j);
    }
}

/* Softmax, link and residual of run k on one sample (scores S, row stride ls >= 8 nv); writes the token
   coefficients of u (Cu) and v (Cv) unless they are NULL (8 nv floats each, zero beyond L); returns r. */
static inline __attribute__((always_inline)) float run_sample(const float *Su, const float *Sv, int L, int nv, float lam, int link, float y,
                               float two_over_n, float *Cu, float *Cv) {
    const __m256 neg = _mm256_set1_ps(-INFINITY);
    __m256 a[4], e[4], g[4], dg[4], mask[4];
    __m256 mx = neg;
    for (int v = 0; v < nv; v++) {
        __m256i lane = _mm256_add_epi32(_mm256_set1_epi32(8 * v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        mask[v] = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(L), lane));
        a[v] = _mm256_blendv_ps(neg, _mm256_mul_ps(_mm256_set1_ps(lam), _mm256_loadu_ps(Su + 8 * v)), mask[v]);
        mx = _mm256_max_ps(mx, a[v]);
    }
    const __m256 m = _mm256_set1_ps(hmax(mx));
    const __m256 lc1 = _mm256_set1_ps(link == 0), lc2 = _mm256_set1_ps(link == 1), lc3 = _mm256_set1_ps(link == 2);
    const __m256 log2e = _mm256_set1_ps(1.4426950408889634f);
    __m256 se = _mm256_setzero_ps(), sf = _mm256_setzero_ps();
    for (int v = 0; v < nv; v++) {
        e[v] = _mm256_and_ps(exp2v(_mm256_mul_ps(_mm256_sub_ps(a[v], m), log2e)), mask[v]);
        __m256 b = _mm256_and_ps(_mm256_loadu_ps(Sv + 8 * v), mask[v]);
        /* g = c1 b + c2 b^2 + c3 relu(b), sigma' = c1 + 2 c2 b + c3 step(b) (step = 1/2 at 0, as jax.jvp of
           jnp.maximum): branch-free, so two inlined runs interleave */
        const __m256 zero = _mm256_setzero_ps();
        __m256 step = _mm256_add_ps(_mm256_and_ps(_mm256_cmp_ps(b, zero, _CMP_GT_OQ), _mm256_set1_ps(1.0f)),
                                    _mm256_and_ps(_mm256_cmp_ps(b, zero, _CMP_EQ_OQ), _mm256_set1_ps(0.5f)));
        g[v] = _mm256_fmadd_ps(lc3, _mm256_max_ps(b, zero), _mm256_mul_ps(b, _mm256_fmadd_ps(lc2, b, lc1)));
        dg[v] = _mm256_fmadd_ps(lc3, step, _mm256_fmadd_ps(_mm256_add_ps(lc2, lc2), b, lc1));
        se = _mm256_add_ps(se, e[v]);
        sf = _mm256_fmadd_ps(e[v], g[v], sf);
    }
    const float inv = 1.0f / hsum(se);
    const float f = hsum(sf) * inv;
    const float r = f - y;
    if (Cu) {
        const __m256 cw = _mm256_set1_ps(two_over_n * r * inv);
        const __m256 fv = _mm256_set1_ps(f), lv = _mm256_set1_ps(lam);
        for (int v = 0; v < nv; v++) {
            __m256 c = _mm256_mul_ps(cw, e[v]); /* (2/n) r w_l, zero on the padding */
            _mm256_storeu_ps(Cu + 8 * v, _mm256_mul_ps(_mm256_mul_ps(lv, c), _mm256_sub_ps(g[v], fv)));
            _mm256_storeu_ps(Cv + 8 * v, _mm256_mul_ps(c, dg[v]));
        }
    }
    return r;
}

/* One pass over the samples: losses (K,) in float64, and the gradient G (2K, dp) when G is not NULL. */
static void pass(const float *X, const float *Y, const int *link, int n, int L, int d, int dp, int K, float lam,
                 const float *W32, float *S, float *C, int lc, float *Gf, double *G, double *loss) {
    const int half = d % 8 >= 1 && d % 8 <= 4, nfull = dp / 8 - half;
    const int ls = 8 * ((L + 7) / 8) + 8, nv = (L + 7) / 8, R2 = 2 * K;
    const float two_over_n = 2.0f / (float)n;
    for (int k = 0; k < K; k++) loss[k] = 0.0;
    if (G) {
        memset(G, 0, sizeof(double) * R2 * dp);
        memset(Gf, 0, sizeof(float) * R2 * dp);
    }
    for (int i0 = 0; i0 < n; i0 += BLOCK) {
        const int nb = n - i0 < BLOCK ? n - i0 : BLOCK;
        for (int b = 0; b < nb; b++) {
            const int i = i0 + b;
            const int ipf = i + PF_AHEAD < n ? i + PF_AHEAD : n - 1;
            scores(X + (size_t)i * L * dp, L, W32, R2, dp, nfull, half, S, ls, X + (size_t)ipf * L * dp);
            int k = 0;
            for (; k + 2 <= K; k += 2) { /* two runs in one block of code: their latency chains interleave */
                float r0 = run_sample(S + k * ls, S + (K + k) * ls, L, nv, lam, link[k], Y[(size_t)k * n + i],
                                      two_over_n, G ? C + k * lc + b * L : NULL, G ? C + (K + k) * lc + b * L : NULL);
                float r1 = run_sample(S + (k + 1) * ls, S + (K + k + 1) * ls, L, nv, lam, link[k + 1],
                                      Y[(size_t)(k + 1) * n + i], two_over_n, G ? C + (k + 1) * lc + b * L : NULL,
                                      G ? C + (K + k + 1) * lc + b * L : NULL);
                loss[k] += (double)r0 * (double)r0;
                loss[k + 1] += (double)r1 * (double)r1;
            }
            for (; k < K; k++) {
                float r = run_sample(S + k * ls, S + (K + k) * ls, L, nv, lam, link[k], Y[(size_t)k * n + i],
                                     two_over_n, G ? C + k * lc + b * L : NULL, G ? C + (K + k) * lc + b * L : NULL);
                loss[k] += (double)r * (double)r;
            }
        }
        if (G) {
            gradient(X + (size_t)i0 * L * dp, nb * L, C, lc, R2, dp, nfull, half, Gf);
            if ((i0 / BLOCK) % FLUSH == FLUSH - 1) flush(Gf, G, R2 * dp);
        }
    }
    if (G) flush(Gf, G, R2 * dp);
    for (int k = 0; k < K; k++) loss[k] /= n;
}

static void to_float(const double *W, int R2, int d, int dp, float *W32) {
    for (int r = 0; r < R2; r++)
        for (int j = 0; j < dp; j++) W32[r * dp + j] = j < d ? (float)W[r * d + j] : 0.0f;
}

/* RGD of R repeats: X (R, n, L, dp), Y (R, K, n), link (K,), W (R, 2K, d) float64 in/out. Runs n_logs x log_every
   steps; after each log_every steps writes W to Wlog (R, n_logs, 2K, d) and the losses at that W to loss_log
   (R, n_logs, K). Returns 0, or 1 on bad sizes, 2 when out of memory. */
int attnlab_rgd(int R, int n, int L, int d, int dp, int K, const float *X, const float *Y, const int *link,
                double lam, double s, int n_logs, int log_every, double *W, double *Wlog, double *loss_log) {
    if (dp % 8 || dp < d || n < 1 || L < 1 || L > 32 || K < 1 || R < 1 || n_logs < 1 || log_every < 0 ||
        (log_every == 0 && n_logs != 1))
        return 1;
    int status = 0;
#pragma omp parallel for schedule(dynamic, 1)
    for (int rep = 0; rep < R; rep++) {
        const int R2 = 2 * K, ls = 8 * ((L + 7) / 8) + 8, lc = BLOCK * L + 8;
        float *W32 = aligned_alloc(32, sizeof(float) * R2 * dp);
        float *S = aligned_alloc(32, sizeof(float) * R2 * ls);
        float *C = aligned_alloc(32, sizeof(float) * R2 * lc);
        double *G = aligned_alloc(32, sizeof(double) * R2 * dp);
        float *Gf = aligned_alloc(32, sizeof(float) * R2 * dp);
        double *loss = malloc(sizeof(double) * K);
        if (!W32 || !S || !C || !G || !Gf || !loss) {
#pragma omp atomic write
            status = 2;
        } else {
            memset(S, 0, sizeof(float) * R2 * ls);
            memset(C, 0, sizeof(float) * R2 * lc);
            const float *Xr = X + (size_t)rep * n * L * dp, *Yr = Y + (size_t)rep * K * n;
            double *Wr = W + (size_t)rep * R2 * d;
            for (int t = 0; t < n_logs; t++) {
                for (int step = 0; step < log_every; step++) {
                    to_float(Wr, R2, d, dp, W32);
                    pass(Xr, Yr, link, n, L, d, dp, K, (float)lam, W32, S, C, lc, Gf, G, loss);
                    if (t > 0 && step == 0) /* the losses at the iterate logged last, from this step's pass */
                        memcpy(loss_log + ((size_t)rep * n_logs + t - 1) * K, loss, sizeof(double) * K);
                    for (int r = 0; r < R2; r++) {
                        double *w = Wr + r * d, *g = G + r * dp, wg = 0.0, nrm = 0.0;
                        for (int j = 0; j < d; j++) wg += w[j] * g[j];
                        for (int j = 0; j < d; j++) {
                            w[j] -= s * (g[j] - wg * w[j]);
                            nrm += w[j] * w[j];
                        }
                        nrm = 1.0 / sqrt(nrm);
                        for (int j = 0; j < d; j++) w[j] *= nrm;
                    }
                }
                memcpy(Wlog + ((size_t)rep * n_logs + t) * R2 * d, Wr, sizeof(double) * R2 * d);
            }
            /* the losses at the last iterate: one forward pass */
            to_float(Wr, R2, d, dp, W32);
            pass(Xr, Yr, link, n, L, d, dp, K, (float)lam, W32, S, C, lc, NULL, NULL, loss);
            memcpy(loss_log + ((size_t)rep * n_logs + n_logs - 1) * K, loss, sizeof(double) * K);
        }
        free(W32);
        free(S);
        free(C);
        free(G);
        free(Gf);
        free(loss);
    }
    return status;
}
