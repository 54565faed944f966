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

Used by :mod:`attnlab.bruno.attention` for ``form="pallas"`` on a GPU; elsewhere ``interpret=True`` runs the same
program on the CPU (the tests).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

__all__ = ["shifted_sums"]


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def _kernel(q_ref, m_ref, k_ref, u_ref, o_ref, *, d, c, n_key_blocks, block_k, pl):
    q = [q_ref[i, :] for i in range(d)]
    m = m_ref[:]

    def body(j, accs):
        j0 = pl.multiple_of(j * block_k, block_k)
        t = q[0][:, None] * k_ref[0, pl.ds(j0, block_k)][None, :] - m[:, None]
        for i in range(1, d):
            t = t + q[i][:, None] * k_ref[i, pl.ds(j0, block_k)][None, :]
        p = jnp.exp2(t)  # the GPU's exp2 (Pallas's Triton lowering has no round, which exp2_f32 needs)
        return tuple(a + p * u_ref[col, pl.ds(j0, block_k)][None, :] for col, a in enumerate(accs))

    zero = jnp.zeros((m.shape[0], block_k), jnp.float32)
    accs = jax.lax.fori_loop(0, n_key_blocks, body, tuple(zero for _ in range(c)))
    for col in range(c):
        o_ref[col, :] = jnp.sum(accs[col], axis=1)


@partial(jax.jit, static_argnames=("block_q", "block_k", "num_warps", "interpret"))
def shifted_sums(q2, m2, k, u, *, block_q: int = 64, block_k: int = 32, num_warps: int = 4, interpret: bool = False):
    """``acc`` (N, c) with acc_i = sum_j 2^(<q2_i, k_j> - m2_i) u_j, float32, by one Pallas kernel (module doc).

    ``q2`` (N, d) base-2 queries, ``m2`` (N,) their shifts, ``k`` (N, d) keys, ``u`` (N, c) values with ones;
    ``block_q``, ``block_k``: powers of two (the defaults, 64 x 32 with 4 warps, are the fastest of the
    configurations bench/gpu.py measures); ``interpret``: run on the CPU (tests)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plt

    n, d = q2.shape
    c = u.shape[1]
    f32 = jnp.float32
    nq = -(-n // block_q)
    nk = -(-n // block_k)
    dp, cp = _pow2(d), _pow2(c)
    qT = jnp.zeros((dp, nq * block_q), f32).at[:d, :n].set(q2.astype(f32).T)
    mp = jnp.zeros((nq * block_q,), f32).at[:n].set(m2.astype(f32))
    kT = jnp.zeros((dp, nk * block_k), f32).at[:d, :n].set(k.astype(f32).T)
    uT = jnp.zeros((cp, nk * block_k), f32).at[:c, :n].set(u.astype(f32).T)
    kernel = partial(_kernel, d=d, c=c, n_key_blocks=nk, block_k=block_k, pl=pl)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((cp, nq * block_q), f32),
        grid=(nq,),
        in_specs=[pl.BlockSpec((dp, block_q), lambda i: (0, i)),
                  pl.BlockSpec((block_q,), lambda i: (i,)),
                  pl.BlockSpec((dp, nk * block_k), lambda i: (0, 0)),
                  pl.BlockSpec((cp, nk * block_k), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((cp, block_q), lambda i: (0, i)),
        compiler_params=None if interpret else plt.CompilerParams(num_warps=num_warps, num_stages=1),
        interpret=interpret,
    )(qT, mp, kT, uT)
    return out[:c, :n].T
