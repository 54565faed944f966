r"""Exact chi-square and Bartlett (Wishart) draws in JAX.

* :func:`chi2`: ``chi^2_df = 2 Gamma(df/2)`` by Marsaglia and Tsang (2000), "A simple method for generating gamma
  variables", ACM TOMS 26(3), with the boost ``Gamma(a) = Gamma(a + 1) U^{1/a}`` for ``a < 1``. Every element takes
  the first accepted candidate of its own iid candidate stream, so the law is exact (see :func:`_gamma_mt`).
* :func:`bartlett`: the Bartlett factor ``B`` (lower triangular, ``B_ii = sqrt(chi^2_{df-i})`` for i = 0..s-1,
  ``B_ij ~ N(0, 1)`` for i > j), so that ``B B^T ~ Wishart_s(df, I)`` (Bartlett 1933; Anderson, An Introduction to
  Multivariate Statistical Analysis, Thm. 7.2.1). Needs ``df >= s``.

Cost on this machine (2 cores, CPU seconds per draw, threefry): ``jax.random.normal`` float64 29 ns, a float64
uniform 18 ns; :func:`chi2` about 1.0 normal + 1.0 uniform + 2 logs per draw at ``df >= 2``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["chi2", "bartlett"]


_TINY = float(jnp.finfo(jnp.float64).tiny)


def _mt_candidate(key, d, c):
    """One Marsaglia-Tsang candidate per element of ``d``, ``c = 1/sqrt(9 d)``: ``(value, accepted)``.

    ``x ~ N(0, 1)``, ``u ~ U(0, 1)`` independent, ``v = (1 + c x)^3``; accept iff ``v > 0`` and
    ``log u < x^2/2 + d - d v + d log v``; the accepted ``d v`` is Gamma(d + 1/3) (Marsaglia and Tsang 2000, Sec. 3).
    """
    kx, ku = jax.random.split(key)
    x = jax.random.normal(kx, d.shape)
    u = jax.random.uniform(ku, d.shape, minval=_TINY)
    v = (1.0 + c * x) ** 3
    vpos = jnp.where(v > 0, v, 1.0)
    ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * vpos + d * jnp.log(vpos))
    return d * vpos, ok


def _pending_indices(pending, cap: int):
    """Indices of the first ``cap`` True entries of ``pending`` (M,), padded with M: ``(idx, valid)``.

    Two-level compaction (blocks of 8): a ``nonzero`` over the M/8 block flags, then over the entries of the first
    ``cap`` flagged blocks, instead of one ``nonzero`` over all M entries (about 17 ns CPU per entry here).
    """
    M = pending.shape[0]
    B = 8
    nb = -(-M // B)
    blocks = jnp.pad(pending, (0, nb * B - M)).reshape(nb, B)
    bidx = jnp.nonzero(jnp.any(blocks, 1), size=min(cap, nb), fill_value=nb)[0]
    sub = jnp.where((bidx < nb)[:, None], blocks[jnp.minimum(bidx, nb - 1)], False).reshape(-1)
    flat = bidx[:, None] * B + jnp.arange(B)
    j = jnp.nonzero(sub, size=cap, fill_value=sub.shape[0])[0]
    idx = jnp.where(j < sub.shape[0], flat.reshape(-1)[jnp.minimum(j, sub.shape[0] - 1)], M)
    return idx, idx < M


def _gamma_mt(key, a, shape):
    r"""Gamma(a) draws, shape ``shape``, for an array ``a >= 1`` broadcastable to it (Marsaglia-Tsang).

    Exactness: element i must be the first accepted candidate of an iid candidate sequence of its own. One candidate
    is drawn for every element; the elements that rejected (a fraction ``1 - acceptance``: about 5% at a = 1, 2% at
    a = 2, below 0.1% for a >= 32) are gathered into a buffer of static size ``M/64 + 64`` and each slot receives
    fresh iid candidates (inner ``while_loop``, touching only the buffer) until it accepts; the values go back to
    their elements. Which slot or which round serves an element does not matter, since every candidate is a fresh
    draw independent of everything before it, so each element gets its own stream's first acceptance. More pending
    elements than slots wait for the next gathering (outer ``while_loop``). Against the former version (a
    ``ndtri``-of-uniform candidate, every retry round a ``nonzero`` over the whole batch and a buffer of M/16), this
    halves the CPU time of a chi^2_256 draw on this machine (about 70 against 138 ns).
    """
    a = jnp.broadcast_to(jnp.asarray(a, jnp.float64), shape).reshape(-1)
    M = a.shape[0]
    if M == 0:
        return jnp.zeros(shape)
    d = a - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)
    k0, kl = jax.random.split(key)
    out, done = _mt_candidate(k0, d, c)
    cap = min(M, M // 64 + 64)

    def gather_round(state):
        key, out, done = state
        key, kb = jax.random.split(key)
        idx, valid = _pending_indices(~done, cap)
        safe = jnp.where(valid, idx, 0)
        db, cb = d[safe], c[safe]

        def retry(st):
            kk, val, ok = st
            kk, kc = jax.random.split(kk)
            new, acc = _mt_candidate(kc, db, cb)
            return kk, jnp.where(ok, val, new), ok | acc

        _, val, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), retry, (kb, jnp.zeros(cap), ~valid))
        out = out.at[idx].set(val, mode="drop")
        done = done.at[idx].set(True, mode="drop")
        return key, out, done

    _, out, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), gather_round, (kl, out, done))
    return out.reshape(shape)


def chi2(key, df, shape=()):
    """Exact ``chi^2_df`` draws (``df > 0``, scalar or array broadcastable to ``shape``).

    For ``df < 2`` (``a = df/2 < 1``) the boost ``Gamma(a) = Gamma(a + 1) U^{1/a}`` uses one extra uniform per
    element, drawn only when some element needs it (``lax.cond``; the uniforms are independent of the Gamma draws
    either way, so the law does not depend on which branch runs).
    """
    a = jnp.broadcast_to(jnp.asarray(df, jnp.float64) / 2.0, shape)
    small = a < 1.0
    kg, ku = jax.random.split(key)
    g = _gamma_mt(kg, jnp.where(small, a + 1.0, a), shape)
    boost = jax.lax.cond(jnp.any(small),
                         lambda: jnp.where(small, jax.random.uniform(ku, shape, minval=_TINY) ** (1.0 / a), 1.0),
                         lambda: jnp.ones(shape))
    return 2.0 * g * boost


def bartlett(key, df: int, s: int, batch=()):
    """Bartlett factors, shape ``batch + (s, s)``: ``B B^T ~ Wishart_s(df, I_s)``; requires ``df >= s``."""
    if isinstance(df, int) and df < s:
        raise ValueError(f"the Bartlett factor needs df >= s; got df={df}, s={s}")
    kd, kl = jax.random.split(key)
    diag = jnp.sqrt(chi2(kd, df - jnp.arange(s), batch + (s,)))
    low = jnp.tril(jax.random.normal(kl, batch + (s, s)), -1)
    return low + diag[..., :, None] * jnp.eye(s)
