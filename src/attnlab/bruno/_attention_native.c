/* Symmetric softmax-attention sums on the CPU (AVX-512F, else AVX2 + FMA; OpenMP), float32: see
   attnlab/bruno/native.py.

   For tokens i = 0..Np-1 (structure of arrays, Np a multiple of ATTNLAB_PAD: 32 with AVX-512F, else 16):
       g_ij = 2^(<q_i, x_j> - c_i - c_j)      (symmetric in i, j when <q_i, x_j> = x_i^T S x_j with S = S^T)
       out[a][i] = sum_j g_ij u[a][j],  a = 0..D   (u[D] carries the weights of the normaliser)
   Each unordered pair {i, j} costs one exponential and feeds both rows: row i by a register reduction, row j through
   a per-chunk buffer of column sums (fixed chunks, so the result does not depend on the thread count). Two rows x 16
   columns per inner step with AVX2, four rows x 32 columns with AVX-512F, give four (eight) independent exponentials,
   which is what lets the out-of-order core overlap their latency chains; with four rows each column block loaded from
   cache serves twice as many pairs.
   exp2 is a degree-5 minimax polynomial on [-1/2, 1/2] after rounding t = n + f, and 2^n is added to the exponent
   bits of the polynomial (valid for -125 <= t < 128; t is clamped below at -125, so a term below 2^-125 becomes at
   most 2^-125 * 1.42, and the caller guarantees t <= 64 or so). Padded tokens have u = 0 and c = 1e30.
   Denormals are flushed to zero in the chunks' arithmetic (flush_denormals): at large beta most pairs' terms g_ij u_j
   fall below 2^-126, and each operation on a denormal costs a microcode assist (several times the kernel's time). */
#include "../_simd.h"
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* Row pairs are dealt to ATTNLAB_CHUNKS fixed chunks (pair p to chunk p mod ATTNLAB_CHUNKS), each with its own column
   buffer, and the buffers are summed in chunk order: the result is the same for any number of OpenMP threads. */
#define ATTNLAB_CHUNKS 8

#if defined(__AVX512F__)
#define ATTNLAB_PAD 32
#define ATTNLAB_VECTOR_BITS 512
/* AVX-512F: 16 lanes, four rows x 32 columns per inner step (eight independent exponentials). Each load of a column
   block (its c, x, u and the column buffer) serves four rows: per pair, half the cache traffic of two rows. */
#define DEFINE_SYM(D)                                                                                                 \
int attnlab_sym_d##D(int Np, const float *q, const float *c, const float *x, const float *u, float *out) {           \
    enum { NV = D + 1, R = 4 };                                                                                     \
    if (Np % 32) return 1;                                                                                          \
    const int T = ATTNLAB_CHUNKS; /* fixed, so the sums do not depend on the number of threads */                    \
    float *buf = aligned_alloc(64, sizeof(float) * NV * (size_t)Np * T);                                            \
    if (!buf) return 2;                                                                                             \
    memset(buf, 0, sizeof(float) * NV * (size_t)Np * T);                                                            \
    _Pragma("omp parallel for schedule(dynamic, 1)")                                                                 \
        for (int th = 0; th < T; th++) {                                                                          \
        const unsigned csr = flush_denormals(); /* restored at the end of the chunk */                              \
        float *B = buf + (size_t)th * NV * Np;                                                                      \
        const __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);                \
        for (int i = R * th; i < Np; i += R * T) {                                                                   \
            __m512 qv[R][D], nc[R], s[R][NV];                                                                       \
            float w[R][NV];                                                                                         \
            for (int e = 0; e < R; e++) {                                                                           \
                for (int k = 0; k < D; k++) qv[e][k] = _mm512_set1_ps(q[(size_t)k * Np + i + e]);                   \
                nc[e] = _mm512_set1_ps(-c[i + e]);                                                                  \
                for (int a = 0; a < NV; a++) {                                                                      \
                    w[e][a] = u[(size_t)a * Np + i + e];                                                            \
                    s[e][a] = _mm512_setzero_ps();                                                                  \
                }                                                                                                   \
            }                                                                                                       \
            const int j0 = i & ~31;                                                                                 \
            for (int j = j0; j < Np; j += 32) {                                                                     \
                const __m512 c0 = _mm512_loadu_ps(c + j), c1 = _mm512_loadu_ps(c + j + 16);                        \
                __m512 g0[R], g1[R];                                                                                \
                for (int e = 0; e < R; e++) {                                                                       \
                    g0[e] = _mm512_sub_ps(nc[e], c0);                                                               \
                    g1[e] = _mm512_sub_ps(nc[e], c1);                                                               \
                }                                                                                                   \
                for (int k = D - 1; k >= 0; k--) {                                                                  \
                    const __m512 xk = _mm512_loadu_ps(x + (size_t)k * Np + j);                                      \
                    const __m512 xk1 = _mm512_loadu_ps(x + (size_t)k * Np + j + 16);                                \
                    for (int e = 0; e < R; e++) {                                                                   \
                        g0[e] = _mm512_fmadd_ps(qv[e][k], xk, g0[e]);                                               \
                        g1[e] = _mm512_fmadd_ps(qv[e][k], xk1, g1[e]);                                              \
                    }                                                                                               \
                }                                                                                                   \
                for (int e = 0; e < R; e++) {                                                                       \
                    g0[e] = exp2v16(g0[e]);                                                                         \
                    g1[e] = exp2v16(g1[e]);                                                                         \
                }                                                                                                   \
                if (j == j0) { /* strictly upper triangle: keep j > i (the diagonal is added once below) */         \
                    const __m512i jj = _mm512_add_epi32(idx, _mm512_set1_epi32(j));                                 \
                    const __m512i jj1 = _mm512_add_epi32(jj, _mm512_set1_epi32(16));                                \
                    for (int e = 0; e < R; e++) {                                                                   \
                        const __m512i ie = _mm512_set1_epi32(i + e);                                                \
                        g0[e] = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(jj, ie), g0[e]);                        \
                        g1[e] = _mm512_maskz_mov_ps(_mm512_cmpgt_epi32_mask(jj1, ie), g1[e]);                       \
                    }                                                                                               \
                }                                                                                                   \
                for (int a = 0; a < NV; a++) {                                                                      \
                    const float *ua = u + (size_t)a * Np + j;                                                       \
                    float *Ba = B + (size_t)a * Np + j;                                                             \
                    const __m512 v = _mm512_loadu_ps(ua), v1 = _mm512_loadu_ps(ua + 16);                            \
                    __m512 b0 = _mm512_load_ps(Ba), b1 = _mm512_load_ps(Ba + 16);                                   \
                    for (int e = 0; e < R; e++) {                                                                   \
                        s[e][a] = _mm512_fmadd_ps(g0[e], v, _mm512_fmadd_ps(g1[e], v1, s[e][a]));                   \
                        const __m512 W = _mm512_set1_ps(w[e][a]);                                                   \
                        b0 = _mm512_fmadd_ps(g0[e], W, b0);                                                         \
                        b1 = _mm512_fmadd_ps(g1[e], W, b1);                                                         \
                    }                                                                                               \
                    _mm512_store_ps(Ba, b0);                                                                        \
                    _mm512_store_ps(Ba + 16, b1);                                                                   \
                }                                                                                                   \
            }                                                                                                       \
            for (int e = 0; e < R; e++) { /* the diagonal terms g_ii, and the row sums */                           \
                int ii = i + e;                                                                                     \
                float t = -2.0f * c[ii];                                                                            \
                for (int k = 0; k < D; k++) t += q[(size_t)k * Np + ii] * x[(size_t)k * Np + ii];                   \
                float gii = _mm512_cvtss_f32(exp2v16(_mm512_set1_ps(t)));                                           \
                for (int a = 0; a < NV; a++)                                                                        \
                    B[(size_t)a * Np + ii] += hsum16(s[e][a]) + gii * u[(size_t)a * Np + ii];                       \
            }                                                                                                       \
        }                                                                                                           \
        _mm_setcsr(csr);                                                                                            \
    }                                                                                                               \
    for (size_t k = 0; k < (size_t)NV * Np; k++) {                                                                  \
        float sum = 0.0f;                                                                                           \
        for (int th = 0; th < T; th++) sum += buf[(size_t)th * NV * Np + k];                                        \
        out[k] = sum;                                                                                               \
    }                                                                                                               \
    free(buf);                                                                                                      \
    return 0;                                                                                                       \
}

#else
#define ATTNLAB_PAD 16
#define ATTNLAB_VECTOR_BITS 256
/* AVX2: 8 lanes, two rows x 16 columns per inner step */
#define DEFINE_SYM(D)                                                                                                 \
int attnlab_sym_d##D(int Np, const float *q, const float *c, const float *x, const float *u, float *out) {           \
    enum { NV = D + 1 };                                                                                            \
    if (Np % 16) return 1;                                                                                          \
    const int T = ATTNLAB_CHUNKS; /* fixed, so the sums do not depend on the number of threads */                    \
    float *buf = aligned_alloc(32, sizeof(float) * NV * (size_t)Np * T);                                            \
    if (!buf) return 2;                                                                                             \
    memset(buf, 0, sizeof(float) * NV * (size_t)Np * T);                                                            \
    _Pragma("omp parallel for schedule(dynamic, 1)")                                                                 \
        for (int th = 0; th < T; th++) {                                                                          \
        const unsigned csr = flush_denormals(); /* restored at the end of the chunk */                              \
        float *B = buf + (size_t)th * NV * Np;                                                                      \
        const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);                                              \
        for (int i = 2 * th; i < Np; i += 2 * T) {                                                                   \
            __m256 qa[D], qb[D];                                                                                    \
            for (int k = 0; k < D; k++) {                                                                           \
                qa[k] = _mm256_set1_ps(q[(size_t)k * Np + i]);                                                      \
                qb[k] = _mm256_set1_ps(q[(size_t)k * Np + i + 1]);                                                  \
            }                                                                                                       \
            const __m256 nca = _mm256_set1_ps(-c[i]), ncb = _mm256_set1_ps(-c[i + 1]);                             \
            float wa[NV], wb[NV];                                                                                   \
            __m256 s[NV], r[NV];                                                                                    \
            for (int a = 0; a < NV; a++) {                                                                          \
                wa[a] = u[(size_t)a * Np + i];                                                                      \
                wb[a] = u[(size_t)a * Np + i + 1];                                                                  \
                s[a] = _mm256_setzero_ps();                                                                         \
                r[a] = _mm256_setzero_ps();                                                                         \
            }                                                                                                       \
            const int j0 = i & ~15;                                                                                 \
            for (int j = j0; j < Np; j += 16) {                                                                     \
                __m256 ta = _mm256_sub_ps(nca, _mm256_loadu_ps(c + j)), tb = _mm256_sub_ps(ncb, _mm256_loadu_ps(c + j)); \
                __m256 ta8 = _mm256_sub_ps(nca, _mm256_loadu_ps(c + j + 8));                                         \
                __m256 tb8 = _mm256_sub_ps(ncb, _mm256_loadu_ps(c + j + 8));                                         \
                for (int k = D - 1; k >= 0; k--) {                                                                  \
                    __m256 xk = _mm256_loadu_ps(x + (size_t)k * Np + j), xk8 = _mm256_loadu_ps(x + (size_t)k * Np + j + 8); \
                    ta = _mm256_fmadd_ps(qa[k], xk, ta);                                                            \
                    tb = _mm256_fmadd_ps(qb[k], xk, tb);                                                            \
                    ta8 = _mm256_fmadd_ps(qa[k], xk8, ta8);                                                         \
                    tb8 = _mm256_fmadd_ps(qb[k], xk8, tb8);                                                         \
                }                                                                                                   \
                __m256 g = exp2v(ta), h = exp2v(tb), g8 = exp2v(ta8), h8 = exp2v(tb8);                              \
                if (j == j0) { /* strictly upper triangle: keep j > i (the diagonal is added once below) */         \
                    __m256i jj = _mm256_add_epi32(idx, _mm256_set1_epi32(j));                                       \
                    __m256i jj8 = _mm256_add_epi32(jj, _mm256_set1_epi32(8));                                       \
                    __m256i ia = _mm256_set1_epi32(i), ib = _mm256_set1_epi32(i + 1);                               \
                    g = _mm256_and_ps(g, _mm256_castsi256_ps(_mm256_cmpgt_epi32(jj, ia)));                          \
                    h = _mm256_and_ps(h, _mm256_castsi256_ps(_mm256_cmpgt_epi32(jj, ib)));                          \
                    g8 = _mm256_and_ps(g8, _mm256_castsi256_ps(_mm256_cmpgt_epi32(jj8, ia)));                       \
                    h8 = _mm256_and_ps(h8, _mm256_castsi256_ps(_mm256_cmpgt_epi32(jj8, ib)));                       \
                }                                                                                                   \
                for (int a = 0; a < NV; a++) {                                                                      \
                    const float *ua = u + (size_t)a * Np + j;                                                       \
                    float *Ba = B + (size_t)a * Np + j;                                                             \
                    __m256 v = _mm256_loadu_ps(ua), v8 = _mm256_loadu_ps(ua + 8);                                     \
                    s[a] = _mm256_fmadd_ps(g, v, _mm256_fmadd_ps(g8, v8, s[a]));                                    \
                    r[a] = _mm256_fmadd_ps(h, v, _mm256_fmadd_ps(h8, v8, r[a]));                                    \
                    __m256 WA = _mm256_set1_ps(wa[a]), WB = _mm256_set1_ps(wb[a]);                                  \
                    _mm256_store_ps(Ba, _mm256_fmadd_ps(g, WA, _mm256_fmadd_ps(h, WB, _mm256_load_ps(Ba))));        \
                    _mm256_store_ps(Ba + 8, _mm256_fmadd_ps(g8, WA, _mm256_fmadd_ps(h8, WB, _mm256_load_ps(Ba + 8)))); \
                }                                                                                                   \
            }                                                                                                       \
            for (int e = 0; e < 2; e++) { /* the diagonal terms g_ii, and the row sums */                           \
                int ii = i + e;                                                                                     \
                float t = -2.0f * c[ii];                                                                            \
                for (int k = 0; k < D; k++) t += q[(size_t)k * Np + ii] * x[(size_t)k * Np + ii];                   \
                float gii = _mm256_cvtss_f32(exp2v(_mm256_set1_ps(t)));                                             \
                for (int a = 0; a < NV; a++)                                                                        \
                    B[(size_t)a * Np + ii] += hsum(e ? r[a] : s[a]) + gii * u[(size_t)a * Np + ii];                 \
            }                                                                                                       \
        }                                                                                                           \
        _mm_setcsr(csr);                                                                                            \
    }                                                                                                               \
    for (size_t k = 0; k < (size_t)NV * Np; k++) {                                                                  \
        float sum = 0.0f;                                                                                           \
        for (int th = 0; th < T; th++) sum += buf[(size_t)th * NV * Np + k];                                        \
        out[k] = sum;                                                                                               \
    }                                                                                                               \
    free(buf);                                                                                                      \
    return 0;                                                                                                       \
}

#endif

DEFINE_SYM(2)
DEFINE_SYM(3)
DEFINE_SYM(4)
DEFINE_SYM(5)
DEFINE_SYM(6)
DEFINE_SYM(7)
DEFINE_SYM(8)

/* The same sums as an XLA FFI handler (``attnlab_sym_ffi``), called by XLA inside a compiled program (no Python
   callback, no host transfer): args q (d, Np), c (Np,), x (d, Np), u (d + 1, Np); result out (d + 1, Np); all
   float32, row-major. Built only where the build finds XLA's FFI C header (jax.ffi.include_dir()). */
#if defined(__has_include)
#if __has_include("xla/ffi/api/c_api.h")
#include "xla/ffi/api/c_api.h"
#define ATTNLAB_HAS_FFI 1

static XLA_FFI_Error *ffi_error(const XLA_FFI_Api *api, const char *message) {
    XLA_FFI_Error_Create_Args args = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, message,
                                      XLA_FFI_Error_Code_INVALID_ARGUMENT};
    return api->XLA_FFI_Error_Create(&args);
}

XLA_FFI_Error *attnlab_sym_ffi(XLA_FFI_CallFrame *frame) {
    XLA_FFI_Extension_Base *ext = frame->extension_start;
    if (ext != NULL && ext->type == XLA_FFI_Extension_Metadata) { /* registration: the FFI version of this build */
        XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
        m->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
        m->api_version.extension_start = NULL;
        m->api_version.major_version = XLA_FFI_API_MAJOR;
        m->api_version.minor_version = XLA_FFI_API_MINOR;
        m->traits = 0;
        m->state_type_id.type_id = 0;
        return NULL;
    }
    if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;
    if (frame->args.size != 4 || frame->rets.size != 1) return ffi_error(frame->api, "attnlab_sym_ffi: 4 args, 1 result");
    XLA_FFI_Buffer *q = (XLA_FFI_Buffer *)frame->args.args[0], *c = (XLA_FFI_Buffer *)frame->args.args[1];
    XLA_FFI_Buffer *x = (XLA_FFI_Buffer *)frame->args.args[2], *u = (XLA_FFI_Buffer *)frame->args.args[3];
    XLA_FFI_Buffer *out = (XLA_FFI_Buffer *)frame->rets.rets[0];
    XLA_FFI_Buffer *all[5] = {q, c, x, u, out};
    for (int i = 0; i < 5; i++)
        if (all[i]->dtype != XLA_FFI_DataType_F32) return ffi_error(frame->api, "attnlab_sym_ffi: float32 only");
    if (q->rank != 2 || x->rank != 2 || u->rank != 2 || c->rank != 1 || out->rank != 2)
        return ffi_error(frame->api, "attnlab_sym_ffi: ranks (2, 1, 2, 2) -> 2");
    const int64_t d = q->dims[0], Np = q->dims[1];
    if (x->dims[0] != d || u->dims[0] != d + 1 || out->dims[0] != d + 1 || c->dims[0] != Np || x->dims[1] != Np
        || u->dims[1] != Np || out->dims[1] != Np || Np % ATTNLAB_PAD || Np > 2147483647)
        return ffi_error(frame->api, "attnlab_sym_ffi: shapes q (d, Np), c (Np,), x (d, Np), u (d+1, Np)");
    const float *qp = q->data, *cp = c->data, *xp = x->data, *up = u->data;
    float *op = out->data;
    int status;
    switch (d) {
        case 2: status = attnlab_sym_d2((int)Np, qp, cp, xp, up, op); break;
        case 3: status = attnlab_sym_d3((int)Np, qp, cp, xp, up, op); break;
        case 4: status = attnlab_sym_d4((int)Np, qp, cp, xp, up, op); break;
        case 5: status = attnlab_sym_d5((int)Np, qp, cp, xp, up, op); break;
        case 6: status = attnlab_sym_d6((int)Np, qp, cp, xp, up, op); break;
        case 7: status = attnlab_sym_d7((int)Np, qp, cp, xp, up, op); break;
        case 8: status = attnlab_sym_d8((int)Np, qp, cp, xp, up, op); break;
        default: return ffi_error(frame->api, "attnlab_sym_ffi: 2 <= d <= 8");
    }
    return status ? ffi_error(frame->api, "attnlab_sym_ffi: the kernel failed (padding or memory)") : NULL;
}
#endif
#endif

/* Whether this build has the FFI handler ``attnlab_sym_ffi``. */
#if defined(ATTNLAB_HAS_FFI)
int attnlab_sym_has_ffi(void) { return 1; }
#else
int attnlab_sym_has_ffi(void) { return 0; }
#endif

/* The padding of Np and the vector width this build uses (512: the AVX-512F variant above, 256: AVX2). */
int attnlab_sym_pad(void) { return ATTNLAB_PAD; }
int attnlab_sym_vector_bits(void) { return ATTNLAB_VECTOR_BITS; }

/* The CPU's exponential throughput bound for this kernel: every thread of the OpenMP pool evaluates n_iter x 4
   independent vectors of exp2 (the kernel's polynomial, at the kernel's vector width) and sums them; returns the
   exponentials per second (wall time) and writes the sum to *sink so that nothing is optimised away. */
double attnlab_exp2_per_second(long n_iter, float *sink) {
    double t0 = omp_get_wtime();
    long total = 0;
    float acc_all = 0.0f;
    _Pragma("omp parallel reduction(+ : total, acc_all)")
    {
#if defined(__AVX512F__)
        const __m512 lane = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        __m512 t0v = _mm512_fmadd_ps(lane, _mm512_set1_ps(-0.01f), _mm512_set1_ps(-1.0f));
        __m512 t1v = _mm512_sub_ps(t0v, _mm512_set1_ps(0.25f)), t2v = _mm512_sub_ps(t0v, _mm512_set1_ps(0.5f));
        __m512 t3v = _mm512_sub_ps(t0v, _mm512_set1_ps(0.75f)), step = _mm512_set1_ps(-1e-6f);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long k = 0; k < n_iter; k++) {
            a0 = _mm512_add_ps(a0, exp2v16(t0v)); a1 = _mm512_add_ps(a1, exp2v16(t1v));
            a2 = _mm512_add_ps(a2, exp2v16(t2v)); a3 = _mm512_add_ps(a3, exp2v16(t3v));
            t0v = _mm512_add_ps(t0v, step); t1v = _mm512_add_ps(t1v, step);
            t2v = _mm512_add_ps(t2v, step); t3v = _mm512_add_ps(t3v, step);
        }
        acc_all += hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
        total += n_iter * 4 * 16;
#else
        const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
        __m256 t0v = _mm256_fmadd_ps(lane, _mm256_set1_ps(-0.01f), _mm256_set1_ps(-1.0f));
        __m256 t1v = _mm256_sub_ps(t0v, _mm256_set1_ps(0.25f)), t2v = _mm256_sub_ps(t0v, _mm256_set1_ps(0.5f));
        __m256 t3v = _mm256_sub_ps(t0v, _mm256_set1_ps(0.75f)), step = _mm256_set1_ps(-1e-6f);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (long k = 0; k < n_iter; k++) {
            a0 = _mm256_add_ps(a0, exp2v(t0v)); a1 = _mm256_add_ps(a1, exp2v(t1v));
            a2 = _mm256_add_ps(a2, exp2v(t2v)); a3 = _mm256_add_ps(a3, exp2v(t3v));
            t0v = _mm256_add_ps(t0v, step); t1v = _mm256_add_ps(t1v, step);
            t2v = _mm256_add_ps(t2v, step); t3v = _mm256_add_ps(t3v, step);
        }
        acc_all += hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
        total += n_iter * 4 * 8;
#endif
    }
    *sink = acc_all;
    return (double)total / (omp_get_wtime() - t0);
}
