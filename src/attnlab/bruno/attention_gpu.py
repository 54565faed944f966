r"""The shift kernel's sums as one GPU kernel (Pallas, lowered through Triton): no score ever leaves the registers.

For base-2 queries q_i (rows of ``q``, shape (N, d), beta log2(e) folded in), their shifts m_i, keys k_j (N, d) and
values-with-ones u_j (N, c), the sums of the a-priori-shift kernel (``method="shift"`` of
:mod:`attnlab.bruno.attention`) are

    acc_i = sum_j 2^(<q_i, k_j> - m_i) u_j        (c numbers per query; the last value column is 1: acc_i,c = l_i).

A program of the grid owns ``block_q`` queries. It walks the keys in blocks of ``block_k``; for each it forms the
block_q x block_k scores as d broadcast products, their exp2 and, per value column, the elementwise products with
u_j added into a block_q x block_k accumulator tile, so the loop has no reduction; each tile is summed over its
columns once, at the end. Per pair: d multiply-adds for the score, one exp2, c multiply-adds. Keys and values are
passed transposed ((d, N) and (c, N)), so a block of one component is contiguous; padded keys have a zero value
row (their terms vanish, and 2^(0 - m_i) <= 2^margin stays finite since m_i >= -margin); padded query rows are
dropped.

**Where the exponentials are computed.** A GPU's special-function units evaluate 16 exp2 per clock per
multiprocessor (MUFU.EX2), eight times fewer than its fused multiply-add units' 128 operations, so on Hopper one
exp2 per pair bounds the kernel at (multiprocessors x 16 x clock) pairs per second. Two options move work off that
bound, both off by default (``exp_split=(0, 1)``, ``mufu="exp2"``):

* ``exp_split=(k, g)``: of every g consecutive key blocks, the first k take their exp2 from :func:`exp2_poly`, a
  polynomial on the multiply-add units (as FlashAttention 3 and 4 do on Hopper and Blackwell), the others from the
  special-function units; the loop is unrolled g times, so the compiler can interleave the two. The keys are padded
  to a multiple of g blocks.
* ``mufu``: how the special-function exp2 is asked for: ``"exp2"`` (``jnp.exp2``, libdevice's ``__nv_exp2f``, which
  without flush-to-zero wraps MUFU.EX2 in a test and two products for subnormal results) or ``"ftz"`` (PTX
  ``ex2.approx.ftz.f32`` inline: MUFU.EX2 alone; results below 2^-126 are 0). The interpreter has no PTX and uses
  ``jnp.exp2`` for both.

Per pair the loop issues about 9 instructions in the SASS that Triton compiles for sm_90 (d + c multiply-adds,
the exp2, a share of the loads and the loop's own), so an exp2 on the multiply-add units (about 10 instructions)
costs more issue slots than it frees on the special-function units; the kernel also waits on each key block's
loads, with about 160 registers a thread (at 64 x 32 and 4 warps) leaving few warps to cover them. Hence two more
options, also off by default: ``prefetch=True`` loads the next group of key blocks before summing the current one
(carried in the loop), and smaller tiles per thread (``block_q`` x ``block_k`` / (32 ``num_warps``) scores) take
fewer registers.

Used by :mod:`attnlab.bruno.attention` for ``form="pallas"`` on a GPU; elsewhere ``interpret=True`` runs the same
program on the CPU (the tests).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

__all__ = ["shifted_sums", "exp2_poly", "POLY_COEFFS", "MUFU"]

MUFU = ("exp2", "ftz")
POLY_COEFFS = (1.0, 0.6931470036506653, 0.2402222901582718, 0.05550726130604744, 0.00967212114483118,
               0.0013264063745737076)
"""p(f) ~ 2^f on [-1/2, 1/2], coefficients of f^0 ... f^5, each a float32. Derived with numpy and scipy's linprog: the
minimax fit in relative error, |p(f) 2^-f - 1| <= E on 6001 Chebyshev points, as a linear programme; then with c0
fixed at 1 (so p is exact at integers) and each coefficient in turn rounded to float32 (its two neighbours tried for
c0 and c1) and the later ones fitted again. Max relative error over every float32 f in [-1/2, 1/2]: 1.05e-7 with
p evaluated exactly, 1.49e-7 evaluated in float32 by fused multiply-adds (a GPU), 1.67e-7 by separate products and
sums (as the interpreter may); the float64 minimax coefficients rounded to float32 would give 1.55e-7 exactly and
2.1e-7 by multiply-adds. MUFU.EX2's own relative error is about 2 ulp (2.4e-7)."""
_ROUND = 12582912.0  # 1.5 * 2^23: in float32, t + _ROUND = n + 1.5 * 2^23 with n = round(t), whose bits are
# 0x4B400000 + n for |n| < 2^22; shifted left by 23 they are n << 23 (every bit of 0x4B400000 leaves the word)
_LOWEST = -126.0  # t is clamped here: 2^-126 * p(f) with f >= 0 is the smallest normal float32, never subnormal


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def exp2_poly(t, *, xla: bool = True):
    """2^t in float32 with multiply-adds and integer operations only (no special-function unit): t = n + f with
    n = round(t) by the 1.5 * 2^23 rounding trick and |f| <= 1/2, 2^f by :data:`POLY_COEFFS` (Horner), 2^n added to
    the result's exponent bits. Relative error <= 1.7e-7 for -126 <= t < 128; t < -126 gives 2^-126 ~ 1.2e-38
    (``jnp.exp2`` gives a subnormal or 0). Runs in Pallas's Triton lowering (no round or floor needed).

    ``xla``: the computation goes through XLA (jit, or Pallas's interpreter), whose algebraic simplifier folds
    (t + c) - c to t; an optimization barrier keeps the rounding. Pallas's Triton lowering has no barrier and
    keeps float sums as written (the kernel passes False there)."""
    t = jnp.maximum(t.astype(jnp.float32), _LOWEST)
    j = t + _ROUND
    if xla:
        j = jax.lax.optimization_barrier(j)
    f = t - (j - _ROUND)
    p = jnp.float32(POLY_COEFFS[-1])
    for coeff in POLY_COEFFS[-2::-1]:
        p = p * f + coeff
    bits = jax.lax.bitcast_convert_type(p, jnp.int32) + (jax.lax.bitcast_convert_type(j, jnp.int32) << 23)
    return jax.lax.bitcast_convert_type(bits, jnp.float32)


def _exp2_ftz(t):
    from jax.experimental.pallas import triton as plt

    return plt.elementwise_inline_asm("ex2.approx.ftz.f32 $0, $1;", args=[t], constraints="=f,f", pack=1,
                                      result_shape_dtypes=[jax.ShapeDtypeStruct(t.shape, t.dtype)])[0]


def _kernel(q_ref, m_ref, k_ref, u_ref, o_ref, *, d, c, n_groups, block_k, split, mufu, prefetch, interpret, pl):
    q = [q_ref[i, :] for i in range(d)]
    m = m_ref[:]
    n_poly, group = split

    def load(g):  # the keys and values of group g's blocks
        out = []
        for s in range(group):
            j0 = (g * group + s) * block_k
            j0 = j0 if isinstance(j0, int) else pl.multiple_of(j0, block_k)
            out.append(([k_ref[i, pl.ds(j0, block_k)] for i in range(d)],
                        [u_ref[col, pl.ds(j0, block_k)] for col in range(c)]))
        return out

    def sums(accs, blocks):
        for s, (k, u) in enumerate(blocks):
            t = q[0][:, None] * k[0][None, :] - m[:, None]
            for i in range(1, d):
                t = t + q[i][:, None] * k[i][None, :]
            # jnp.exp2 is the GPU's own (Pallas's Triton lowering has no round, which attention.exp2_f32 needs)
            p = exp2_poly(t, xla=interpret) if s < n_poly else mufu(t)
            accs = tuple(a + p * u[col][None, :] for col, a in enumerate(accs))
        return accs

    zero = jnp.zeros((m.shape[0], block_k), jnp.float32)
    accs = tuple(zero for _ in range(c))
    if prefetch:  # group g + 1's loads are issued before group g's arithmetic, which hides their latency

        def body(g, carry):
            ahead = load(jnp.minimum(g + 1, n_groups - 1))
            return sums(carry[0], carry[1]), ahead

        accs, _ = jax.lax.fori_loop(0, n_groups, body, (accs, load(0)))
    else:
        accs = jax.lax.fori_loop(0, n_groups, lambda g, accs: sums(accs, load(g)), accs)
    for col in range(c):
        o_ref[col, :] = jnp.sum(accs[col], axis=1)


@partial(jax.jit, static_argnames=("block_q", "block_k", "num_warps", "num_stages", "exp_split", "mufu",
                                   "prefetch", "interpret"))
def shifted_sums(q2, m2, k, u, *, block_q: int = 64, block_k: int = 32, num_warps: int = 4, num_stages: int = 1,
                 exp_split: tuple[int, int] = (0, 1), mufu: str = "exp2", prefetch: bool = False,
                 interpret: bool = False):
    """``acc`` (N, c) with acc_i = sum_j 2^(<q2_i, k_j> - m2_i) u_j, float32, by one Pallas kernel (module doc).

    ``q2`` (N, d) base-2 queries, ``m2`` (N,) their shifts, ``k`` (N, d) keys, ``u`` (N, c) values with ones;
    ``block_q``, ``block_k``: powers of two (the defaults, 64 x 32 with 4 warps, are the fastest of the
    configurations bench/gpu.py measures); ``num_stages``: Triton's software pipelining of the key loads (1: none);
    ``exp_split`` ``(k, g)``: of every g key blocks, k take their exp2 from
    the polynomial :func:`exp2_poly` (0 <= k <= g); ``mufu``: ``"exp2"`` or ``"ftz"``, how the others are asked for
    (module doc); ``prefetch``: load the next g key blocks while the current ones are summed (module doc);
    ``interpret``: run on the CPU (tests)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    n_poly, group = exp_split
    if not (group >= 1 and 0 <= n_poly <= group):
        raise ValueError(f"exp_split must be (k, g) with 0 <= k <= g and g >= 1 (got {exp_split})")
    if mufu not in MUFU:
        raise ValueError(f"mufu must be one of {MUFU} (got {mufu!r})")
    n, d = q2.shape
    c = u.shape[1]
    f32 = jnp.float32
    nq = -(-n // block_q)
    n_groups = -(-n // (block_k * group))
    nk = n_groups * group
    dp, cp = _pow2(d), _pow2(c)
    qT = jnp.zeros((dp, nq * block_q), f32).at[:d, :n].set(q2.astype(f32).T)
    mp = jnp.zeros((nq * block_q,), f32).at[:n].set(m2.astype(f32))
    kT = jnp.zeros((dp, nk * block_k), f32).at[:d, :n].set(k.astype(f32).T)
    uT = jnp.zeros((cp, nk * block_k), f32).at[:c, :n].set(u.astype(f32).T)
    ex2 = jnp.exp2 if mufu == "exp2" or interpret else _exp2_ftz  # the interpreter runs no PTX
    kernel = partial(_kernel, d=d, c=c, n_groups=n_groups, block_k=block_k, split=(n_poly, group), mufu=ex2,
                     prefetch=prefetch, interpret=interpret, pl=pl)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((cp, nq * block_q), f32),
        grid=(nq,),
        in_specs=[pl.BlockSpec((dp, block_q), lambda i: (0, i)),
                  pl.BlockSpec((block_q,), lambda i: (i,)),
                  pl.BlockSpec((dp, nk * block_k), lambda i: (0, 0)),
                  pl.BlockSpec((cp, nk * block_k), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((cp, block_q), lambda i: (0, i)),
        compiler_params=None if interpret else plt.CompilerParams(num_warps=num_warps, num_stages=num_stages),
        interpret=interpret,
    )(qT, mp, kT, uT)
    return out[:c, :n].T
