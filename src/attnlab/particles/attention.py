r"""Self-attention on the sphere with O(N) memory: a blocked, online-softmax kernel (spec 1.2, 1.4, 5).

For tokens ``x_i`` (rows of ``X``, shape (N, d)) and d x d matrices Q, K, V, the attention output is

    A_i = sum_j w_ij V x_j,     w_ij = exp(beta <Q x_i, K x_j>) / Z_i,

with Z_i = sum_j exp(beta <Q x_i, K x_j>) (SA, softmax, the sum includes j = i) or Z_i = N (USA, the constant
normalisation of Geshkovski et al.; Bruno et al. Remark 3.10). The SA drift of the particle model is P_{x_i} A_i.

The kernel never forms the N x N score matrix. Queries are processed in blocks of ``block_q`` rows and keys in
blocks of ``block_k`` columns; each query keeps a running maximum m_i, a running sum l_i = sum_j exp(s_ij - m_i) and
a running weighted sum a_i = sum_j exp(s_ij - m_i) V x_j, rescaled by exp(m_old - m_new) whenever the maximum grows
(the online softmax of Milakov & Gimelshein 2018, as in FlashAttention). The sum l_i rides along as a column of ones
appended to V x_j, so one matrix product per block gives both. Then SA: A_i = a_i / l_i and USA:
A_i = exp(m_i) a_i / N (which can overflow for large beta, as the USA model itself does; see ``log_normalizer``).
Scratch memory is O(block_q * block_k); the same code runs on CPU and GPU and is vmapped over independent runs.

``attention_dense`` materialises the N x N softmax and is the reference in the tests.
"""

from __future__ import annotations

from functools import partial
from typing import Literal

import jax
import jax.numpy as jnp

__all__ = ["attention", "attention_dense", "log_normalizer", "log_normalizer_dense", "check_qkv"]

Normalization = Literal["sa", "usa"]


def check_qkv(d: int, Q, K, V) -> None:
    """Raise ValueError unless Q, K, V are d x d matrices (d >= 2)."""
    if d < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {d})")
    for name, M in (("Q", Q), ("K", K), ("V", V)):
        shape = tuple(jnp.shape(M))
        if shape != (d, d):
            raise ValueError(f"{name} must be a square {d} x {d} matrix (got shape {shape})")


def _check(x, beta, block_q, block_k, normalization):
    if x.ndim != 2:
        raise ValueError(f"tokens must have shape (N, d) (got shape {x.shape}); vmap for a batch of runs")
    if x.shape[0] < 1:
        raise ValueError(f"need at least one token (got N = {x.shape[0]})")
    if x.shape[1] < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {x.shape[1]})")
    if isinstance(beta, (int, float)) and not beta > 0:
        raise ValueError(f"beta must be > 0 (got {beta})")
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be >= 1 (got block_q = {block_q}, block_k = {block_k})")
    if normalization not in ("sa", "usa"):
        raise ValueError(f"normalization must be 'sa' or 'usa' (got {normalization!r})")


def _pad(a, n, value=0.0):
    extra = n - a.shape[0]
    return a if extra == 0 else jnp.concatenate([a, jnp.full((extra,) + a.shape[1:], value, a.dtype)])


def _online(q, k, v1, beta, block_q, block_k):
    """Running (m, l, a) for queries q (N, d) against keys k (N, d) and values-with-ones v1 (N, d + 1)."""
    n, dt = q.shape[0], q.dtype
    bq, bk = min(block_q, n), min(block_k, n)
    nq, nk = -(-n // bq), -(-n // bk)
    qb = _pad(q * beta, nq * bq).reshape(nq, bq, -1)
    kb = _pad(k, nk * bk).reshape(nk, bk, -1)
    vb = _pad(v1, nk * bk).reshape(nk, bk, -1)  # padded keys have a zero value row, ones column included
    valid = (jnp.arange(nk * bk) < n).reshape(nk, bk)

    def one_query_block(qi):
        def body(carry, blk):
            m, acc = carry
            kj, vj, ok = blk
            s = qi @ kj.T
            s = jnp.where(ok[None, :], s, -jnp.inf)
            m_new = jnp.maximum(m, jnp.max(s, axis=1))
            p = jnp.exp(s - m_new[:, None])
            acc = acc * jnp.exp(m - m_new)[:, None] + p @ vj
            return (m_new, acc), None

        init = (jnp.full((bq,), -jnp.inf, dt), jnp.zeros((bq, v1.shape[1]), dt))
        if nk == 1:
            (m, acc), _ = body(init, (kb[0], vb[0], valid[0]))
        else:
            (m, acc), _ = jax.lax.scan(body, init, (kb, vb, valid))
        return m, acc

    if nq == 1:
        m, acc = one_query_block(qb[0])
        m, acc = m[None], acc[None]
    else:
        m, acc = jax.lax.map(one_query_block, qb)
    return m.reshape(-1)[:n], acc.reshape(nq * bq, -1)[:n]


def attention(x, Q, K, V, beta, *, normalization: Normalization = "sa", block_q: int = 1024, block_k: int = 2048,
              dtype=None):
    """Attention output A (N, d) of tokens ``x`` (N, d), blocked with an online softmax; never forms N x N.

    ``dtype`` (e.g. ``jnp.float32``) sets the precision of the kernel; the result is cast back to ``x.dtype``.
    """
    _check(x, beta, block_q, block_k, normalization)
    dt = None if dtype is None else jnp.dtype(dtype).name
    return _attention_jit(x, Q, K, V, beta, normalization, block_q, block_k, dt)


@partial(jax.jit, static_argnums=(5, 6, 7, 8))
def _attention_jit(x, Q, K, V, beta, normalization, block_q, block_k, dtype):
    out_dtype = x.dtype
    dt = jnp.dtype(dtype) if dtype is not None else x.dtype
    xc = x.astype(dt)
    q, k = xc @ jnp.asarray(Q, dt).T, xc @ jnp.asarray(K, dt).T
    v1 = jnp.concatenate([xc @ jnp.asarray(V, dt).T, jnp.ones((x.shape[0], 1), dt)], axis=1)
    m, acc = _online(q, k, v1, jnp.asarray(beta, dt), block_q, block_k)
    a, l = acc[:, :-1], acc[:, -1:]
    if normalization == "sa":
        out = a / l
    else:
        out = a * (jnp.exp(m)[:, None] / x.shape[0])
    return out.astype(out_dtype)


def log_normalizer(x, Q, K, beta, *, block_q: int = 1024, block_k: int = 2048, dtype=None):
    """log Z_i = logsumexp_j beta <Q x_i, K x_j> (N,), blocked, overflow-free."""
    _check(x, beta, block_q, block_k, "sa")
    dt = None if dtype is None else jnp.dtype(dtype).name
    return _log_normalizer_jit(x, Q, K, beta, block_q, block_k, dt)


@partial(jax.jit, static_argnums=(4, 5, 6))
def _log_normalizer_jit(x, Q, K, beta, block_q, block_k, dtype):
    dt = jnp.dtype(dtype) if dtype is not None else x.dtype
    xc = x.astype(dt)
    q, k = xc @ jnp.asarray(Q, dt).T, xc @ jnp.asarray(K, dt).T
    m, acc = _online(q, k, jnp.ones((x.shape[0], 1), dt), jnp.asarray(beta, dt), block_q, block_k)
    return (m + jnp.log(acc[:, 0])).astype(x.dtype)


def attention_dense(x, Q, K, V, beta, *, normalization: Normalization = "sa"):
    """Reference: materialise the N x N scores and their softmax (memory O(N^2))."""
    _check(x, beta, 1, 1, normalization)
    s = beta * (x @ Q.T) @ (x @ K.T).T
    vx = x @ V.T
    if normalization == "sa":
        return jax.nn.softmax(s, axis=1) @ vx
    return jnp.exp(s) @ vx / x.shape[0]


def log_normalizer_dense(x, Q, K, beta):
    """Reference log Z_i with the N x N scores materialised."""
    return jax.scipy.special.logsumexp(beta * (x @ Q.T) @ (x @ K.T).T, axis=1)
