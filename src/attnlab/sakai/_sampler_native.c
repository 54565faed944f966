/* C kernels of the Sakai presets (see attnlab/sakai/native.py): the exact first-token sampler of the attention layer
   (the derivation in the docstring of attnlab/sakai/sampler.py) for inputs on the Wishart path (psi = clip/identity,
   n >= s), explicit clip/ReLU inputs and the n -> infinity limit law, in float64, one network per iteration, OpenMP
   over networks; the exact score probe and the brute-force reference statistic Y[0, 0]; and the presets' distances
   (the official KDE on a uniform grid, the Poisson bootstrap of KS/W1, KS/W1 of sorted samples), at the end of this
   file.

   Per network (its own random stream, keyed by (seed, stream, network index), so the numbers do not depend on the
   thread count):
       finite n:  r = chi^2_n/n,  L = sqrt(r) (tril(N, -1)/sqrt(n) + diag(sqrt(chi^2_{n-i}/n)))   (L L^T = X X^T/n)
       limit:     L = Linf (the Cholesky factor of the limit input Gram, given)
       per head a < H:  c_Q, c_V ~ chi^2_d/d (1 in the limit),  nu ~ N(0, I_s),
                        s_a = softmax(sqrt(Gamma_00 c_Q) L nu),  v += c_V |L^T s_a|^2
       v /= H,  y = sqrt(v) eps,  eps ~ N(0, 1).
   At s = 4 two steps run in AVX2 vectors with the same laws: four heads per vector (heads_sum4, H >= 3) and the
   ReLU input Gram by sign pattern (relu_gram4).
   Normals: the ziggurat of Marsaglia and Tsang (2000) with 128 boxes, in Doornik's (2005) form (ZIGNOR: the box
   index and the uniform from disjoint bits of one 64-bit word); chi-squares: 2 Gamma(df/2) by Marsaglia and Tsang
   (2000), with Gamma(a) = Gamma(a + 1) U^(1/a) for a < 1; bits: xoshiro256++ (Blackman and Vigna 2021), its state
   seeded by splitmix64. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define ZIG_C 128
#define ZIG_R 3.442619855899
#define ZIG_V 9.91256303526217e-3
#define MAX_S 16
#ifndef HEADS4_MIN
#define HEADS4_MIN 3 /* heads from which s = 4 draws 4 heads per vector */
#endif

static double zig_x[ZIG_C + 1], zig_ratio[ZIG_C];
static int zig_ready = 0;

static void zig_init(void) {
    double f = exp(-0.5 * ZIG_R * ZIG_R);
    zig_x[0] = ZIG_V / f; /* the bottom box and the tail, as a box of width V / f(R) */
    zig_x[1] = ZIG_R;
    zig_x[ZIG_C] = 0.0;
    for (int i = 2; i < ZIG_C; i++) {
        zig_x[i] = sqrt(-2.0 * log(ZIG_V / zig_x[i - 1] + f));
        f = exp(-0.5 * zig_x[i] * zig_x[i]);
    }
    for (int i = 0; i < ZIG_C; i++) zig_ratio[i] = zig_x[i + 1] / zig_x[i];
}

typedef struct {
    uint64_t s[4];
} rng_t;

static inline uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void rng_seed(rng_t *g, uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t x = seed;
    x ^= splitmix64(&x) + stream * 0xD1B54A32D192ED03ull;
    x ^= splitmix64(&x) + index * 0x8CB92BA72F3D8DD7ull;
    for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline __attribute__((always_inline)) uint64_t next64(rng_t *g) {
    uint64_t *s = g->s;
    const uint64_t result = rotl(s[0] + s[3], 23) + s[0];
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* uniform in (0, 1): 53 bits, (m + 1/2) 2^-53 */
static inline __attribute__((always_inline)) double uniform(rng_t *g) { return ((double)(int64_t)(next64(g) >> 11) + 0.5) * 0x1.0p-53; }

static inline __attribute__((always_inline)) double normal_tail(rng_t *g, int negative) {
    double x, y;
    do {
        x = log(uniform(g)) / ZIG_R;
        y = log(uniform(g));
    } while (-2.0 * y < x * x);
    return negative ? x - ZIG_R : ZIG_R - x;
}

static inline __attribute__((always_inline)) double normal(rng_t *g) {
    for (;;) {
        const uint64_t w = next64(g);
        const int i = (int)(w & 0x7F);
        const double u = 2.0 * ((double)(int64_t)(w >> 11) * 0x1.0p-53) - 1.0; /* [-1, 1), bits 11..63 */
        if (fabs(u) < zig_ratio[i]) return u * zig_x[i];
        if (i == 0) return normal_tail(g, u < 0);
        const double x = u * zig_x[i];
        const double f0 = exp(-0.5 * (zig_x[i] * zig_x[i] - x * x));
        const double f1 = exp(-0.5 * (zig_x[i + 1] * zig_x[i + 1] - x * x));
        if (f1 + uniform(g) * (f0 - f1) < 1.0) return x;
    }
}

/* Gamma(a), a > 0, Marsaglia-Tsang; for a < 1, Gamma(a + 1) U^(1/a). Inlined (no recursion), so that no generator
   state escapes to memory and the compiler keeps it in registers. */
static inline __attribute__((always_inline)) double gamma_mt(rng_t *g, double a) {
    const double b = a < 1.0 ? a + 1.0 : a;
    const double dd = b - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * dd);
    double out;
    for (;;) {
        double x, v;
        do {
            x = normal(g);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        const double u = uniform(g), x2 = x * x;
        if (u < 1.0 - 0.0331 * x2 * x2 || log(u) < 0.5 * x2 + dd * (1.0 - v + log(v))) {
            out = dd * v;
            break;
        }
    }
    return a < 1.0 ? out * pow(uniform(g), 1.0 / a) : out;
}

/* exp(x) for x <= 0 (a softmax after its maximum is subtracted), branch-free: x = k ln 2 + t with |t| <= ln2/2
   (ln 2 in two parts, Cody and Waite), exp(t) by its Taylor polynomial of degree 13 (truncation below 3e-18
   relative), times 2^k through the exponent bits; x is clamped at -700 (exp(-700) = 1e-304 against the largest
   term, 1). Relative error a few ulp; unlike libm's exp it has no branch and no special-case handling. */
static inline double exp_neg(double x) {
    x = x < -700.0 ? -700.0 : x;
    const double k = (x * 1.4426950408889634 + 0x1.8p52) - 0x1.8p52; /* round to nearest, |x| < 2^51 */
    const double t = (x - k * 0.693147180369123816490) - k * 1.90821492927058770002e-10;
    /* Estrin's scheme (depth 5 instead of Horner's 14: the FMA latency, not the count, bounds a softmax) */
    const double t2 = t * t, t4 = t2 * t2, t8 = t4 * t4;
    const double a01 = 1.0 + t, a23 = 0.5 + t * (1.0 / 6.0), a45 = 1.0 / 24.0 + t * (1.0 / 120.0),
                 a67 = 1.0 / 720.0 + t * (1.0 / 5040.0), a89 = 1.0 / 40320.0 + t * (1.0 / 362880.0),
                 a1011 = 1.0 / 3628800.0 + t * (1.0 / 39916800.0), a1213 = 1.0 / 479001600.0 + t * (1.0 / 6227020800.0);
    const double b03 = a01 + t2 * a23, b47 = a45 + t2 * a67, b811 = a89 + t2 * a1011;
    const double c07 = b03 + t4 * b47, c813 = b811 + t4 * a1213;
    const double p = c07 + t8 * c813;
    union {
        double d;
        int64_t i;
    } u = {p};
    u.i += (int64_t)((uint64_t)(int64_t)k << 52); /* the shift on unsigned bits (a negative k: defined) */
    return u.d;
}

/* chi^2_df / df */
static inline double chi2_mean(rng_t *g, double df) { return 2.0 * gamma_mt(g, 0.5 * df) / df; }

/* sum over H heads of c_V |L^T softmax(scale sqrt(c_Q) L nu)|^2 for one network, S tokens (a compile-time constant in
   each instance, so the token loops unroll and the arrays stay in registers) */
static inline __attribute__((always_inline)) double heads_sum(const int S, rng_t *g, const double (*L)[MAX_S],
                                                              double scale, int H, int limit, double d) {
    double acc = 0.0;
    for (int a = 0; a < H; a++) {
        const double cq = limit ? 1.0 : chi2_mean(g, d), cv = limit ? 1.0 : chi2_mean(g, d);
        const double sc = limit ? scale : scale * sqrt(cq);
        double nu[MAX_S], t[MAX_S];
        for (int j = 0; j < S; j++) nu[j] = normal(g);
        double mx = -INFINITY;
        for (int i = 0; i < S; i++) {
            double ti = 0.0;
            for (int j = 0; j <= i; j++) ti += L[i][j] * nu[j];
            t[i] = sc * ti;
            mx = t[i] > mx ? t[i] : mx;
        }
        double se = 0.0;
        for (int i = 0; i < S; i++) {
            t[i] = exp_neg(t[i] - mx);
            se += t[i];
        }
        double q2 = 0.0;
        for (int j = 0; j < S; j++) {
            double qj = 0.0;
            for (int i = j; i < S; i++) qj += L[i][j] * t[i];
            q2 += qj * qj;
        }
        acc += cv * q2 / (se * se);
    }
    return acc;
}

/* G[i][j] (j <= i) = sum over the n columns of x_i x_j, x = relu(Xi_0 column) (inputs 2) or
   clip(sqrt(r) Xi_0 column, -100, 100) (inputs 1); S tokens, a compile-time constant in each instance so that the
   s(s + 1)/2 sums stay in registers. */
static inline __attribute__((always_inline)) void explicit_gram(const int S, rng_t *g, long n, int inputs, double sr,
                                                                double (*G)[MAX_S]) {
    double acc[MAX_S][MAX_S];
    for (int i = 0; i < S; i++)
        for (int j = 0; j <= i; j++) acc[i][j] = 0.0;
    if (inputs == 2) {
        /* (drawing the signs as bits and a half-normal for the positive entries only halves the normals, but its
           coin-flip branch mispredicts half the time, which costs more than the normals it saves) */
        for (long c = 0; c < n; c++) {
            double x[MAX_S];
            for (int i = 0; i < S; i++) {
                const double z = normal(g);
                x[i] = 0.5 * (z + fabs(z)); /* relu, exact and branch-free (its sign is a coin flip) */
            }
            for (int i = 0; i < S; i++)
                for (int j = 0; j <= i; j++) acc[i][j] += x[i] * x[j];
        }
    } else {
        for (long c = 0; c < n; c++) {
            double x[MAX_S];
            for (int i = 0; i < S; i++) {
                const double z = sr * normal(g);
                x[i] = z > 100.0 ? 100.0 : z < -100.0 ? -100.0 : z;
            }
            for (int i = 0; i < S; i++)
                for (int j = 0; j <= i; j++) acc[i][j] += x[i] * x[j];
        }
    }
    for (int i = 0; i < S; i++)
        for (int j = 0; j <= i; j++) G[i][j] = acc[i][j];
}

/* AVX2 vectors of draws (4 lanes, float64). Bits: 4 xoshiro256++ streams in the lanes, seeded from the network's
   stream g. Normals (normal4): the ziggurat's box step vectorised (the uniform from bits 12..63 as a 52-bit
   mantissa, the box index from bits 0..6; the 8 table entries by scalar loads, since AVX2's gather is microcoded
   and slow on some x86 cores);
   a lane whose box step rejects (about 1.2%) continues the ziggurat in scalar code with its own (i, u) (wedge or
   tail test; a full rejection restarts with a fresh scalar normal from g, as the ziggurat's loop does), so each lane
   has exactly the ziggurat's law. Chi-squares (gamma4): Marsaglia-Tsang's first candidate in the lanes (squeeze
   test), a lane that fails the squeeze finishes in scalar code (the log test, then fresh scalar candidates from g
   until one is accepted: the law of the rejection sampler, whose candidates are iid). exp4_neg: exp_neg in the
   lanes. */
#include <immintrin.h>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "attnlab native kernel needs AVX2 and FMA"
#endif

typedef struct {
    __m256i s0, s1, s2, s3;
} rng4_t;

static inline __attribute__((always_inline)) __m256i rotl4(__m256i x, int k) {
    return _mm256_or_si256(_mm256_slli_epi64(x, k), _mm256_srli_epi64(x, 64 - k));
}

/* 16 words of g, the first word of each lane made odd (no lane's state is zero) */
static inline void rng4_seed(rng4_t *r, rng_t *g) {
    uint64_t w[16];
    for (int k = 0; k < 16; k++) w[k] = next64(g) | (uint64_t)(k < 4);
    r->s0 = _mm256_loadu_si256((const __m256i *)w);
    r->s1 = _mm256_loadu_si256((const __m256i *)(w + 4));
    r->s2 = _mm256_loadu_si256((const __m256i *)(w + 8));
    r->s3 = _mm256_loadu_si256((const __m256i *)(w + 12));
}

static inline __attribute__((always_inline)) __m256i next4(rng4_t *r) {
    const __m256i w = _mm256_add_epi64(rotl4(_mm256_add_epi64(r->s0, r->s3), 23), r->s0);
    const __m256i t = _mm256_slli_epi64(r->s1, 17);
    r->s2 = _mm256_xor_si256(r->s2, r->s0);
    r->s3 = _mm256_xor_si256(r->s3, r->s1);
    r->s1 = _mm256_xor_si256(r->s1, r->s2);
    r->s0 = _mm256_xor_si256(r->s0, r->s3);
    r->s2 = _mm256_xor_si256(r->s2, t);
    r->s3 = rotl4(r->s3, 45);
    return w;
}

/* bits 12..63 as the double m in [0, 2^52) (exact: 2^52 + m built in the mantissa, minus 2^52) */
static inline __attribute__((always_inline)) __m256d top52(__m256i w) {
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(_mm256_srli_epi64(w, 12),
                                                             _mm256_set1_epi64x(0x4330000000000000ll))),
                         _mm256_set1_pd(0x1.0p52));
}

/* uniform in (0, 1): (m + 1/2) 2^-52 */
static inline __attribute__((always_inline)) __m256d uniform4(rng4_t *r) {
    return _mm256_mul_pd(_mm256_add_pd(top52(next4(r)), _mm256_set1_pd(0.5)), _mm256_set1_pd(0x1.0p-52));
}

static double zig_continue(rng_t *g, int i, double u) {
    if (i == 0) return normal_tail(g, u < 0);
    const double x = u * zig_x[i];
    const double f0 = exp(-0.5 * (zig_x[i] * zig_x[i] - x * x));
    const double f1 = exp(-0.5 * (zig_x[i + 1] * zig_x[i + 1] - x * x));
    if (f1 + uniform(g) * (f0 - f1) < 1.0) return x;
    return normal(g);
}

static inline __attribute__((always_inline)) __m256d normal4(rng4_t *r, rng_t *g) {
    const __m256i w = next4(r);
    const __m256d u = _mm256_sub_pd(_mm256_mul_pd(top52(w), _mm256_set1_pd(0x1.0p-51)), _mm256_set1_pd(1.0));
    const uint64_t w0 = (uint64_t)_mm256_extract_epi64(w, 0) & 0x7F, w1 = (uint64_t)_mm256_extract_epi64(w, 1) & 0x7F,
                   w2 = (uint64_t)_mm256_extract_epi64(w, 2) & 0x7F, w3 = (uint64_t)_mm256_extract_epi64(w, 3) & 0x7F;
    const __m256d ratio = _mm256_set_pd(zig_ratio[w3], zig_ratio[w2], zig_ratio[w1], zig_ratio[w0]),
                  xi = _mm256_set_pd(zig_x[w3], zig_x[w2], zig_x[w1], zig_x[w0]);
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll));
    const __m256d ok = _mm256_cmp_pd(_mm256_and_pd(u, absmask), ratio, _CMP_LT_OQ);
    __m256d z = _mm256_mul_pd(u, xi);
    const int acc = _mm256_movemask_pd(ok);
    if (__builtin_expect(acc != 0xF, 0)) {
        double zs[4], us[4];
        _mm256_storeu_pd(zs, z);
        _mm256_storeu_pd(us, u);
        const int is[4] = {(int)w0, (int)w1, (int)w2, (int)w3};
        for (int l = 0; l < 4; l++)
            if (!(acc >> l & 1)) zs[l] = zig_continue(g, is[l], us[l]);
        z = _mm256_loadu_pd(zs);
    }
    return z;
}

/* Gamma(a) in the lanes, a >= 1 (Marsaglia-Tsang, d = a - 1/3, c = 1/sqrt(9 d)) */
static inline __attribute__((always_inline)) __m256d gamma4(rng4_t *r, rng_t *g, double a) {
    const double dd = a - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * dd);
    const __m256d x = normal4(r, g), one = _mm256_set1_pd(1.0);
    const __m256d v = _mm256_fmadd_pd(_mm256_set1_pd(c), x, one), v3 = _mm256_mul_pd(_mm256_mul_pd(v, v), v);
    const __m256d u = uniform4(r), x2 = _mm256_mul_pd(x, x);
    const __m256d sq = _mm256_fnmadd_pd(_mm256_set1_pd(0.0331), _mm256_mul_pd(x2, x2), one);
    const __m256d ok = _mm256_and_pd(_mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_GT_OQ),
                                     _mm256_cmp_pd(u, sq, _CMP_LT_OQ));
    __m256d out = _mm256_mul_pd(_mm256_set1_pd(dd), v3);
    const int acc = _mm256_movemask_pd(ok);
    if (acc != 0xF) {
        double os[4], xs[4], vs[4], us[4];
        _mm256_storeu_pd(os, out);
        _mm256_storeu_pd(xs, x2);
        _mm256_storeu_pd(vs, v3);
        _mm256_storeu_pd(us, u);
        for (int l = 0; l < 4; l++) {
            if (acc >> l & 1) continue;
            if (!(vs[l] > 0.0 && log(us[l]) < 0.5 * xs[l] + dd * (1.0 - vs[l] + log(vs[l])))) os[l] = gamma_mt(g, a);
        }
        out = _mm256_loadu_pd(os);
    }
    return out;
}

/* exp_neg in the lanes (the same reduction and polynomial) */
static inline __attribute__((always_inline)) __m256d exp4_neg(__m256d x) {
    x = _mm256_max_pd(x, _mm256_set1_pd(-700.0));
    const __m256d magic = _mm256_set1_pd(0x1.8p52);
    const __m256d kk = _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)), magic);
    const __m256d k = _mm256_sub_pd(kk, magic);
    __m256d t = _mm256_fnmadd_pd(k, _mm256_set1_pd(0.693147180369123816490), x);
    t = _mm256_fnmadd_pd(k, _mm256_set1_pd(1.90821492927058770002e-10), t);
#define C_(v) _mm256_set1_pd(v)
    const __m256d t2 = _mm256_mul_pd(t, t), t4 = _mm256_mul_pd(t2, t2), t8 = _mm256_mul_pd(t4, t4);
    const __m256d a01 = _mm256_add_pd(C_(1.0), t), a23 = _mm256_fmadd_pd(t, C_(1.0 / 6.0), C_(0.5)),
                  a45 = _mm256_fmadd_pd(t, C_(1.0 / 120.0), C_(1.0 / 24.0)),
                  a67 = _mm256_fmadd_pd(t, C_(1.0 / 5040.0), C_(1.0 / 720.0)),
                  a89 = _mm256_fmadd_pd(t, C_(1.0 / 362880.0), C_(1.0 / 40320.0)),
                  a1011 = _mm256_fmadd_pd(t, C_(1.0 / 39916800.0), C_(1.0 / 3628800.0)),
                  a1213 = _mm256_fmadd_pd(t, C_(1.0 / 6227020800.0), C_(1.0 / 479001600.0));
#undef C_
    const __m256d b03 = _mm256_fmadd_pd(t2, a23, a01), b47 = _mm256_fmadd_pd(t2, a67, a45),
                  b811 = _mm256_fmadd_pd(t2, a1011, a89);
    const __m256d c07 = _mm256_fmadd_pd(t4, b47, b03), c813 = _mm256_fmadd_pd(t4, a1213, b811);
    const __m256d p = _mm256_fmadd_pd(t8, c813, c07);
    /* 2^k: the low bits of kk's mantissa hold k (two's complement), shifted into the exponent field */
    return _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(p), _mm256_slli_epi64(_mm256_castpd_si256(kk), 52)));
}

static inline double hsum4(__m256d v) {
    __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(a, _mm_unpackhi_pd(a, a)));
}

/* heads_sum for s = 4 with 4 heads in the lanes (H not a multiple of 4: the last vector's extra lanes are drawn and
   dropped); d >= 2 for a finite width (chi^2_d/d = Gamma(d/2) 2/d with d/2 >= 1) */
static double heads_sum4(rng_t *g, const double (*L)[MAX_S], double scale, int H, int limit, double d) {
    rng4_t r;
    rng4_seed(&r, g);
    const double a = 0.5 * d;
    const __m256d cs = _mm256_set1_pd(2.0 / d), sc0 = _mm256_set1_pd(scale);
    const __m256d l00 = _mm256_set1_pd(L[0][0]), l10 = _mm256_set1_pd(L[1][0]), l11 = _mm256_set1_pd(L[1][1]),
                  l20 = _mm256_set1_pd(L[2][0]), l21 = _mm256_set1_pd(L[2][1]), l22 = _mm256_set1_pd(L[2][2]),
                  l30 = _mm256_set1_pd(L[3][0]), l31 = _mm256_set1_pd(L[3][1]), l32 = _mm256_set1_pd(L[3][2]),
                  l33 = _mm256_set1_pd(L[3][3]);
    __m256d acc = _mm256_setzero_pd();
    for (int h = 0; h < H; h += 4) {
        __m256d sc = sc0, cv = _mm256_set1_pd(1.0);
        if (!limit) {
            const __m256d cq = _mm256_mul_pd(gamma4(&r, g, a), cs);
            cv = _mm256_mul_pd(gamma4(&r, g, a), cs);
            sc = _mm256_mul_pd(sc, _mm256_sqrt_pd(cq));
        }
        const __m256d nu0 = normal4(&r, g), nu1 = normal4(&r, g), nu2 = normal4(&r, g), nu3 = normal4(&r, g);
        const __m256d t0 = _mm256_mul_pd(sc, _mm256_mul_pd(l00, nu0)),
                      t1 = _mm256_mul_pd(sc, _mm256_fmadd_pd(l10, nu0, _mm256_mul_pd(l11, nu1))),
                      t2 = _mm256_mul_pd(sc, _mm256_fmadd_pd(l20, nu0, _mm256_fmadd_pd(l21, nu1, _mm256_mul_pd(l22, nu2)))),
                      t3 = _mm256_mul_pd(sc, _mm256_fmadd_pd(l30, nu0, _mm256_fmadd_pd(l31, nu1,
                                                             _mm256_fmadd_pd(l32, nu2, _mm256_mul_pd(l33, nu3)))));
        const __m256d mx = _mm256_max_pd(_mm256_max_pd(t0, t1), _mm256_max_pd(t2, t3));
        const __m256d e0 = exp4_neg(_mm256_sub_pd(t0, mx)), e1 = exp4_neg(_mm256_sub_pd(t1, mx)),
                      e2 = exp4_neg(_mm256_sub_pd(t2, mx)), e3 = exp4_neg(_mm256_sub_pd(t3, mx));
        const __m256d se = _mm256_add_pd(_mm256_add_pd(e0, e1), _mm256_add_pd(e2, e3));
        const __m256d q0 = _mm256_fmadd_pd(l00, e0, _mm256_fmadd_pd(l10, e1, _mm256_fmadd_pd(l20, e2, _mm256_mul_pd(l30, e3)))),
                      q1 = _mm256_fmadd_pd(l11, e1, _mm256_fmadd_pd(l21, e2, _mm256_mul_pd(l31, e3))),
                      q2 = _mm256_fmadd_pd(l22, e2, _mm256_mul_pd(l32, e3)), q3 = _mm256_mul_pd(l33, e3);
        const __m256d qq = _mm256_fmadd_pd(q0, q0, _mm256_fmadd_pd(q1, q1, _mm256_fmadd_pd(q2, q2, _mm256_mul_pd(q3, q3))));
        __m256d term = _mm256_div_pd(_mm256_mul_pd(cv, qq), _mm256_mul_pd(se, se));
        if (H - h < 4) {
            const __m256d lane = _mm256_set_pd(3.0, 2.0, 1.0, 0.0);
            term = _mm256_and_pd(term, _mm256_cmp_pd(lane, _mm256_set1_pd((double)(H - h)), _CMP_LT_OQ));
        }
        acc = _mm256_add_pd(acc, term);
    }
    return hsum4(acc);
}

/* The ReLU Gram of 4 tokens, sum over the n columns z of Xi_0 of relu(z) relu(z)^T, grouped by sign pattern: the
   pattern P of a column (the set of its positive entries) is uniform on the 16 subsets and independent of |z|,
   whose entries are iid half-normals; so with m_P the number of columns of pattern P (4 bits per column, counted),
     |P| = 1: the column adds z_i^2 to G_ii, and the m_P of them add chi^2_{m_P} (one draw);
     |P| = 2: 2 columns per vector of 4 half-normals (a, b, a', b'), adding a^2, b^2 and a b;
     |P| >= 3: one column per vector of 4 half-normals, the lanes outside P zeroed, adding x x^T as
               x * x, x * rot1(x), x * rot2(x).
   Exact (the same law as drawing the s n normals), with 2n half-normals per network on average instead of 4n. */
static void relu_gram4(rng_t *g, long n, double (*G)[MAX_S]) {
    long m[16] = {0};
    for (long c = 0; c < n; c += 16) {
        uint64_t w = next64(g);
        const int k = n - c < 16 ? (int)(n - c) : 16;
        for (int j = 0; j < k; j++, w >>= 4) m[w & 15]++;
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j <= i; j++) G[i][j] = 0.0;
    for (int i = 0; i < 4; i++)
        if (m[1 << i] > 0) G[i][i] = 2.0 * gamma_mt(g, 0.5 * (double)m[1 << i]);
    rng4_t r;
    rng4_seed(&r, g);
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll)),
                  low = _mm256_castsi256_pd(_mm256_set_epi64x(0, 0, -1, -1)), zero = _mm256_setzero_pd();
    for (int P = 3; P < 16; P++) {
        if (__builtin_popcount(P) != 2 || m[P] == 0) continue;
        const int i = __builtin_ctz(P), j = 31 - __builtin_clz(P);
        __m256d sq = zero, cr = zero;
        for (long c = 0; c < m[P]; c += 2) {
            __m256d z = _mm256_and_pd(normal4(&r, g), absmask);
            if (m[P] - c == 1) z = _mm256_and_pd(z, low);
            sq = _mm256_fmadd_pd(z, z, sq);
            cr = _mm256_fmadd_pd(z, _mm256_permute_pd(z, 0x5), cr);
        }
        double a[4], b[4];
        _mm256_storeu_pd(a, sq);
        _mm256_storeu_pd(b, cr);
        G[i][i] += a[0] + a[2];
        G[j][j] += a[1] + a[3];
        G[j][i] += b[0] + b[2];
    }
    __m256d a0 = zero, a1 = zero, a2 = zero;
    for (int P = 7; P < 16; P++) {
        if (__builtin_popcount(P) < 3) continue;
        const __m256d mask = _mm256_castsi256_pd(_mm256_set_epi64x(-(long long)(P >> 3 & 1), -(long long)(P >> 2 & 1),
                                                                   -(long long)(P >> 1 & 1), -(long long)(P & 1)));
        for (long c = 0; c < m[P]; c++) {
            const __m256d x = _mm256_and_pd(_mm256_and_pd(normal4(&r, g), absmask), mask);
            a0 = _mm256_fmadd_pd(x, x, a0);
            a1 = _mm256_fmadd_pd(x, _mm256_permute4x64_pd(x, 0x39), a1); /* lanes (1, 2, 3, 0) */
            a2 = _mm256_fmadd_pd(x, _mm256_permute4x64_pd(x, 0x4E), a2); /* lanes (2, 3, 0, 1) */
        }
    }
    double d0[4], d1[4], d2[4];
    _mm256_storeu_pd(d0, a0);
    _mm256_storeu_pd(d1, a1);
    _mm256_storeu_pd(d2, a2);
    for (int i = 0; i < 4; i++) G[i][i] += d0[i];
    G[1][0] += d1[0];
    G[2][1] += d1[1];
    G[3][2] += d1[2];
    G[3][0] += d1[3];
    G[2][0] += d2[0];
    G[3][1] += d2[1];
}

/* Lower-triangular L with L L^T = G (s x s, PSD), a pivot below rtol * max diag set to zero with its column (as
   attnlab.sakai.sampler.semidefinite_cholesky: exact when the Schur complement column is zero, e.g. a ReLU input row
   that is identically 0, probability 2^-n per token). */
static void semidefinite_cholesky(int s, const double (*G)[MAX_S], double (*L)[MAX_S]) {
    double scale = 0.0;
    for (int i = 0; i < s; i++) scale = G[i][i] > scale ? G[i][i] : scale;
    for (int j = 0; j < s; j++) {
        for (int i = 0; i < j; i++) L[i][j] = 0.0;
        double piv = G[j][j];
        for (int k = 0; k < j; k++) piv -= L[j][k] * L[j][k];
        if (piv > 1e-12 * scale) {
            const double ljj = sqrt(piv);
            L[j][j] = ljj;
            for (int i = j + 1; i < s; i++) {
                double c = G[i][j];
                for (int k = 0; k < j; k++) c -= L[i][k] * L[j][k];
                L[i][j] = c / ljj;
            }
        } else {
            for (int i = j; i < s; i++) L[i][j] = 0.0;
        }
    }
}

/* The factor L (s x s, lower triangular) of the input Gram X X^T/n of one network: the limit factor Linf when given,
   else the Wishart path (inputs 0, n >= s) or explicit inputs (1 clip, 2 ReLU; see attnlab_sakai_first). */
static inline __attribute__((always_inline)) void input_factor(rng_t *g, int s, double n, int inputs,
                                                                const double *Linf, double (*L)[MAX_S]) {
    if (Linf) {
        for (int i = 0; i < s; i++)
            for (int j = 0; j < s; j++) L[i][j] = Linf[i * s + j];
    } else if (inputs == 0) {
        const double r = chi2_mean(g, n), sr = sqrt(r), isn = 1.0 / sqrt(n);
        for (int i = 0; i < s; i++) {
            for (int j = 0; j < i; j++) L[i][j] = sr * normal(g) * isn;
            L[i][i] = sr * sqrt(chi2_mean(g, n - i) * (n - i) / n);
            for (int j = i + 1; j < s; j++) L[i][j] = 0.0;
        }
    } else {
        double G[MAX_S][MAX_S];
        const double r = chi2_mean(g, n), sr = sqrt(r);
        switch (s) {
        case 1: explicit_gram(1, g, (long)n, inputs, sr, G); break;
        case 2: explicit_gram(2, g, (long)n, inputs, sr, G); break;
        case 3: explicit_gram(3, g, (long)n, inputs, sr, G); break;
        case 4:
            if (inputs == 2) relu_gram4(g, (long)n, G);
            else explicit_gram(4, g, (long)n, inputs, sr, G);
            break;
        case 5: explicit_gram(5, g, (long)n, inputs, sr, G); break;
        case 6: explicit_gram(6, g, (long)n, inputs, sr, G); break;
        case 8: explicit_gram(8, g, (long)n, inputs, sr, G); break;
        default: explicit_gram(s, g, (long)n, inputs, sr, G); break;
        }
        /* X = psi(sqrt(r) Xi_0): relu is positively homogeneous, so its Gram is r relu(Xi_0) relu(Xi_0)^T/n;
           clip is applied to sqrt(r) Xi_0 itself (inside explicit_gram, with r folded in below) */
        for (int i = 0; i < s; i++)
            for (int j = 0; j <= i; j++) G[j][i] = G[i][j] = (inputs == 2 ? r : 1.0) * G[i][j] / n;
        semidefinite_cholesky(s, (const double (*)[MAX_S])G, L);
    }
}

/* Fill y, v (m networks) for one row of a sweep: width n, per-head width d (both <= 0: the limit, with factor Linf,
   s x s row-major), H heads, s tokens. inputs: 0 the Wishart path (n >= s), 1 explicit clip inputs
   X = clip(sqrt(r) Xi_0, -100, 100), 2 explicit ReLU inputs X = relu(sqrt(r) Xi_0) (Xi_0 s x n iid N(0, 1), cost
   O(s n)), whose Gram X X^T/n is factored by semidefinite_cholesky. Networks index0 .. index0 + m - 1 of stream
   `stream`. Returns 0, or 1 on bad sizes. */
int attnlab_sakai_first(uint64_t seed, uint64_t stream, long index0, long m, int s, int H, double n, double d,
                        int inputs, const double *Linf, double *y, double *v) {
    if (s < 1 || s > MAX_S || H < 1 || m < 0 || ((n > 0) != (d > 0)) || inputs < 0 || inputs > 2 ||
        (n > 0 && inputs == 0 && n < s) || (n > 0 && inputs > 0 && (n != floor(n) || n > 1e9)) || (n <= 0 && !Linf))
        return 1;
#pragma omp critical(attnlab_zig_init)
    if (!zig_ready) {
        zig_init();
        zig_ready = 1;
    }
    const int limit = n <= 0;
#pragma omp parallel for schedule(static)
    for (long k = 0; k < m; k++) {
        rng_t g;
        rng_seed(&g, seed, stream, (uint64_t)(index0 + k));
        double L[MAX_S][MAX_S];
        input_factor(&g, s, n, inputs, limit ? Linf : NULL, L);
        double g00 = 0.0;
        for (int j = 0; j < s; j++) g00 += L[0][j] * L[0][j];
        const double scale = sqrt(g00);
        double acc;
        switch (s) {
        case 1: acc = heads_sum(1, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        case 2: acc = heads_sum(2, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        case 3: acc = heads_sum(3, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        case 4:
            acc = H >= HEADS4_MIN && (limit || d >= 2.0) ? heads_sum4(&g, (const double (*)[MAX_S])L, scale, H, limit, d)
                                                        : heads_sum(4, &g, (const double (*)[MAX_S])L, scale, H, limit, d);
            break;
        case 5: acc = heads_sum(5, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        case 6: acc = heads_sum(6, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        case 8: acc = heads_sum(8, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break;
        default: acc = heads_sum(s, &g, (const double (*)[MAX_S])L, scale, H, limit, d); break; /* s = 7, 9..16 */
        }
        v[k] = acc / H;
        y[k] = sqrt(v[k]) * normal(&g);
    }
    return 0;
}

/* The score probe (Sakai et al. Fig. 2a), one network per draw: g[k] = Gamma_00 sqrt(chi^2_n/n) N(0, 1), the score
   (Q K^T)_00/sqrt(n) given the input Gram (Q_0, K_0 in R^n with iid N(0, Gamma_00) entries, so Q_0 . K_0 =
   Gamma_00 |a| N(0, 1), |a|^2 ~ chi^2_n), with Gamma_00 = (L L^T)_00 from input_factor. Networks index0 ..
   index0 + m - 1 of stream `stream`. Returns 0, or 1 on bad sizes. */
int attnlab_sakai_scores(uint64_t seed, uint64_t stream, long index0, long m, int s, double n, int inputs, double *out) {
    if (s < 1 || s > MAX_S || m < 0 || !(n >= 1) || inputs < 0 || inputs > 2 || (inputs == 0 && n < s) ||
        (inputs > 0 && (n != floor(n) || n > 1e9)))
        return 1;
#pragma omp critical(attnlab_zig_init)
    if (!zig_ready) {
        zig_init();
        zig_ready = 1;
    }
#pragma omp parallel for schedule(static)
    for (long k = 0; k < m; k++) {
        rng_t g;
        rng_seed(&g, seed, stream, (uint64_t)(index0 + k));
        double L[MAX_S][MAX_S];
        input_factor(&g, s, n, inputs, NULL, L);
        double g00 = 0.0;
        for (int j = 0; j < s; j++) g00 += L[0][j] * L[0][j];
        out[k] = g00 * sqrt(chi2_mean(&g, n)) * normal(&g);
    }
    return 0;
}

/* The brute-force reference (attnlab.sakai.reference, the official single_run), Y[0, 0] of m networks in float64 with
   plain loops: h ~ N(0, I_n); x_i = psi(W_i h / sqrt(n)) (psi: act 1 clip at +-100, act 2 ReLU), W_i n x n; per
   head W_Q, W_K, W_V (n x d) and column 0 of W_O (d; Y[0, 0] depends on W_O through that column only, so the others
   are not drawn), all standard normals; Q_0 = x_0 W_Q / sqrt(n), K = X W_K / sqrt(n), V = X W_V / sqrt(n),
   a = softmax_j(Q_0 . K_j / sqrt(d)), Y[0, 0] = H^-1/2 sum over heads of sum_j a_j V_j . W_O[:, 0] / sqrt(d).
   Every weight that Y[0, 0] depends on is drawn (s n^2 + 3H n d + n + H d normals per network; the ziggurat normals
   of this file). Network k from the stream (seed, stream, k). Returns 0, 1 on bad sizes, 2 when out of memory. */
int attnlab_sakai_brute(uint64_t seed, uint64_t stream, long m, long n, long d, int H, int s, int act, double *out) {
    if (m < 0 || n < 1 || d < 1 || H < 1 || s < 1 || s > MAX_S || act < 1 || act > 2 || n > 100000 || d > 100000)
        return 1;
#pragma omp critical(attnlab_zig_init)
    if (!zig_ready) {
        zig_init();
        zig_ready = 1;
    }
    int status = 0;
#pragma omp parallel
    {
        double *buf = malloc(sizeof(double) * (size_t)(n + s * n + d + 2 * s * d));
        if (!buf) {
#pragma omp atomic write
            status = 2;
        }
#pragma omp for schedule(static)
        for (long k = 0; k < m; k++) {
            if (!buf) continue;
            double *h = buf, *X = h + n, *q0 = X + s * n, *K = q0 + d, *V = K + s * d;
            rng_t g;
            rng_seed(&g, seed, stream, (uint64_t)k);
            const double isn = 1.0 / sqrt((double)n), isd = 1.0 / sqrt((double)d);
            for (long b = 0; b < n; b++) h[b] = normal(&g);
            for (int i = 0; i < s; i++)
                for (long c = 0; c < n; c++) {
                    double t = 0.0;
                    for (long b = 0; b < n; b++) t += normal(&g) * h[b];
                    t *= isn;
                    X[i * n + c] = act == 2 ? (t > 0.0 ? t : 0.0) : (t > 100.0 ? 100.0 : t < -100.0 ? -100.0 : t);
                }
            double acc = 0.0;
            for (int a = 0; a < H; a++) {
                for (long c = 0; c < d; c++) q0[c] = 0.0;
                for (long c = 0; c < s * d; c++) K[c] = V[c] = 0.0;
                for (long r = 0; r < n; r++) /* W_Q, row r */
                    for (long c = 0; c < d; c++) q0[c] += X[r] * normal(&g);
                for (long r = 0; r < n; r++) /* W_K */
                    for (long c = 0; c < d; c++) {
                        const double w = normal(&g);
                        for (int i = 0; i < s; i++) K[i * d + c] += X[i * n + r] * w;
                    }
                for (long r = 0; r < n; r++) /* W_V */
                    for (long c = 0; c < d; c++) {
                        const double w = normal(&g);
                        for (int i = 0; i < s; i++) V[i * d + c] += X[i * n + r] * w;
                    }
                double sc[MAX_S], mx = -INFINITY, se = 0.0, y = 0.0;
                for (int j = 0; j < s; j++) {
                    double t = 0.0;
                    for (long c = 0; c < d; c++) t += q0[c] * K[j * d + c];
                    sc[j] = t * isn * isn * isd; /* Q_0 . K_j / sqrt(d), with Q and K each / sqrt(n) */
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j < s; j++) se += (sc[j] = exp(sc[j] - mx));
                double vo[MAX_S] = {0.0};
                for (long c = 0; c < d; c++) { /* W_O[:, 0] */
                    const double w = normal(&g);
                    for (int j = 0; j < s; j++) vo[j] += V[j * d + c] * w;
                }
                for (int j = 0; j < s; j++) y += sc[j] / se * vo[j] * isn * isd;
                acc += y;
            }
            out[k] = acc / sqrt((double)H);
        }
        free(buf);
    }
    return status;
}

/* m draws of one generator (for the tests): kind 0 the normal, kind 1 chi^2_df/df, draw k from the stream
   (seed, 0, index k); kinds 2 and 3 the same from the 4-lane generators (normal4, gamma4; df >= 2), draws 4b..4b+3
   from the lanes seeded by the stream (seed, 0, b); kind 4: m ReLU Grams relu(Xi_0) relu(Xi_0)^T of s = 4 tokens
   and n = df columns (relu_gram4), 16 numbers each (row-major, symmetric), Gram k from the stream (seed, 0, k).
   Returns 0, or 1 on a bad kind or df. */
int attnlab_sakai_draws(uint64_t seed, int kind, double df, long m, double *out) {
    if (kind < 0 || kind > 4 || (kind == 1 && !(df > 0)) || (kind == 3 && !(df >= 2)) ||
        (kind == 4 && !(df >= 1 && df == floor(df) && df <= 1e9)))
        return 1;
#pragma omp critical(attnlab_zig_init)
    if (!zig_ready) {
        zig_init();
        zig_ready = 1;
    }
    if (kind == 4) {
#pragma omp parallel for schedule(static)
        for (long k = 0; k < m; k++) {
            rng_t g;
            rng_seed(&g, seed, 0, (uint64_t)k);
            double G[MAX_S][MAX_S];
            relu_gram4(&g, (long)df, G);
            for (int i = 0; i < 4; i++)
                for (int j = 0; j <= i; j++) out[16 * k + 4 * i + j] = out[16 * k + 4 * j + i] = G[i][j];
        }
        return 0;
    }
    if (kind >= 2) {
#pragma omp parallel for schedule(static)
        for (long b = 0; b < (m + 3) / 4; b++) {
            rng_t g;
            rng4_t r;
            rng_seed(&g, seed, 0, (uint64_t)b);
            rng4_seed(&r, &g);
            double o[4];
            _mm256_storeu_pd(o, kind == 2 ? normal4(&r, &g) : _mm256_mul_pd(gamma4(&r, &g, 0.5 * df),
                                                                             _mm256_set1_pd(2.0 / df)));
            for (int l = 0; l < 4 && 4 * b + l < m; l++) out[4 * b + l] = o[l];
        }
        return 0;
    }
#pragma omp parallel for schedule(static)
    for (long k = 0; k < m; k++) {
        rng_t g;
        rng_seed(&g, seed, 0, (uint64_t)k);
        out[k] = kind == 0 ? normal(&g) : chi2_mean(&g, df);
    }
    return 0;
}

/* Gaussian kernel sums on a uniform grid, for the official KDE (attnlab.sakai.distances.kde): for each of R rows of
   N points x (already divided by sqrt(2) h), acc[r][g] = sum_i exp(-(g0 + g dg - x_i)^2), g < G. The exponent is
   quadratic in g (row r: grid point g at g0[r] + g dg[r]), so from the grid point nearest x the terms follow v_{g+1} = v_g q_g, q_{g+1} = q_g exp(-2 dg^2):
   one exp per point and direction and two products per term; a direction stops once v < 1e-40 (the terms only
   decrease away from the nearest point; what is dropped is below 1e-40 per point, against the official 1e-12
   density floor). OpenMP over rows (each row its own sums: the same numbers for any thread count). */
void attnlab_kde_rows(long R, long N, const double *x, long G, const double *g0s, const double *dgs, double *acc) {
    const double cut = 1e-40;
#pragma omp parallel for schedule(dynamic, 1)
    for (long r = 0; r < R; r++) {
        const double g0 = g0s[r], dg = dgs[r], c = exp(-2.0 * dg * dg);
        double *a = acc + r * G;
        for (long g = 0; g < G; g++) a[g] = 0.0;
        const double *xr = x + r * N;
        for (long i = 0; i < N; i++) {
            const double xi = xr[i];
            if (!(xi == xi) || isinf(xi)) continue;
            long k = lround((xi - g0) / dg);
            k = k < 0 ? 0 : k >= G ? G - 1 : k;
            const double z = g0 + k * dg - xi, e0 = exp(-z * z);
            if (e0 < cut) continue;
            a[k] += e0;
            double v = e0, q = exp(-(2.0 * z * dg + dg * dg));
            for (long g = k + 1; g < G; g++) {
                v *= q;
                q *= c;
                if (v < cut) break;
                a[g] += v;
            }
            v = e0;
            q = exp(2.0 * z * dg - dg * dg);
            for (long g = k - 1; g >= 0; g--) {
                v *= q;
                q *= c;
                if (v < cut) break;
                a[g] += v;
            }
        }
    }
}

/* Poisson(1) bootstrap of the two-sample KS statistic and 1-Wasserstein distance (as
   attnlab.sakai.distances.bootstrap_ks_w1): zs (N) the pooled points sorted, is_x (N) 1 for a point of the first
   sample; replicate b gives every point an independent Poisson(1) weight (inversion of its CDF, one uniform each)
   and returns the KS and W1 of the two weighted empirical laws. Replicate b uses the stream (seed, 0, b), so the
   numbers do not depend on the thread count. The inversion looks up the uniform's top 8 bits in a guide table (the
   weight where no CDF value falls inside the bucket, else the search), and both passes are branch-free in is_x (a
   branch on is_x would go either way at random and mispredict often). Scratch (the weights per thread, is_x as 0/1
   doubles and the gaps of zs) is allocated here. Returns 0, or 2 when out of memory. */
int attnlab_bootstrap_ks_w1(uint64_t seed, long N, const double *zs, const unsigned char *is_x, long n_boot,
                            double *ks, double *w1) {
    double cdf[18], term = exp(-1.0), c = 0.0; /* the Poisson(1) CDF at 0..17 (1 - 1e-17 at 17) */
    for (int k = 0; k < 18; k++) {
        c += term;
        cdf[k] = c;
        term /= k + 1;
    }
    int guide[256]; /* u in [b/256, (b+1)/256): the weight #{k: u >= cdf[k]} if constant there, else -1 */
    for (int b = 0; b < 256; b++) {
        const double lo = b / 256.0, hi = (b + 1) / 256.0;
        int k = 0, inside = 0;
        for (int j = 0; j < 18; j++) {
            k += cdf[j] <= lo;
            inside |= cdf[j] > lo && cdf[j] < hi;
        }
        guide[b] = inside ? -1 : k;
    }
    const long M = N > 0 ? N : 1;
    double *fx_w = malloc(sizeof(double) * M), *dz = malloc(sizeof(double) * M);
    if (!fx_w || !dz) {
        free(fx_w);
        free(dz);
        return 2;
    }
    for (long i = 0; i < N; i++) {
        fx_w[i] = is_x[i] ? 1.0 : 0.0;
        dz[i] = i + 1 < N ? zs[i + 1] - zs[i] : 0.0;
    }
    const double *isx = fx_w;
    int status = 0;
#pragma omp parallel
    {
        double *w = malloc(sizeof(double) * M);
        if (!w) {
#pragma omp atomic write
            status = 2;
        }
#pragma omp for schedule(dynamic, 1)
        for (long b = 0; b < n_boot; b++) {
            if (!w) continue;
            rng_t g;
            rng_seed(&g, seed, 0, (uint64_t)b);
            double sx = 0.0, st = 0.0;
            for (long i = 0; i < N; i++) {
                const uint64_t x = next64(&g);
                int k = guide[x >> 56];
                if (__builtin_expect(k < 0, 0)) {
                    const double u = ((double)(int64_t)(x >> 11) + 0.5) * 0x1.0p-53;
                    k = 0;
                    while (k < 18 && u >= cdf[k]) k++;
                }
                const double wk = k;
                w[i] = wk;
                st += wk;
                sx += wk * isx[i];
            }
            if (sx == 0.0 || st == sx) { /* a sample with no weight: no empirical law (NaN, as the JAX bootstrap) */
                ks[b] = w1[b] = NAN;
                continue;
            }
            const double ix = 1.0 / sx, iy = 1.0 / (st - sx);
            double fx = 0.0, ft = 0.0, d = 0.0, area = 0.0;
            for (long i = 0; i < N; i++) {
                fx += w[i] * isx[i];
                ft += w[i];
                const double gap = fabs(fx * ix - (ft - fx) * iy);
                d = gap > d ? gap : d;
                area += gap * dz[i];
            }
            ks[b] = d;
            w1[b] = area;
        }
        free(w);
    }
    free(fx_w);
    free(dz);
    return status;
}

/* KS statistic and 1-Wasserstein distance of two samples given sorted (xs: nx points, ys: ny points), by merging
   them in the order of a stable sort of (x, y) (a point of x before an equal point of y), as
   attnlab.sakai.distances.ks_w1_rows does with its pooled argsort: out[0] = max |F_x - F_y| over the merged points,
   out[1] = sum of |F_x - F_y| times the gap to the next merged point. */
void attnlab_ks_w1_sorted(long nx, const double *xs, long ny, const double *ys, double *out) {
    long i = 0, j = 0;
    double d = 0.0, area = 0.0, prev = 0.0, prev_gap = 0.0;
    const long N = nx + ny;
    for (long k = 0; k < N; k++) {
        double z;
        if (j >= ny || (i < nx && xs[i] <= ys[j])) z = xs[i++];
        else z = ys[j++];
        if (k > 0) area += prev_gap * (z - prev);
        const double gap = fabs((double)i / nx - (double)j / ny);
        d = gap > d ? gap : d;
        prev = z;
        prev_gap = gap;
    }
    out[0] = d;
    out[1] = area;
}
