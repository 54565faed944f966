r"""Exact chi-square and Bartlett (Wishart) draws in JAX.

* :func:`chi2`: ``chi^2_df = 2 Gamma(df/2)`` by Marsaglia and Tsang (2000), "A simple method for generating gamma
  variables", ACM TOMS 26(3), with the boost ``Gamma(a) = Gamma(a + 1) U^{1/a}`` for ``a < 1``. Every element takes
  the first accepted candidate of its own iid candidate stream, so the law is exact (a batch ``while_loop`` redraws
  only until every element has accepted; the acceptance rate is above 0.95 for ``a >= 1``). It is several times
  faster on CPU than ``jax.random.gamma``.
* :func:`bartlett`: the Bartlett factor ``B`` (lower triangular, ``B_ii = sqrt(chi^2_{df-i})`` for i = 0..s-1,
  ``B_ij ~ N(0, 1)`` for i > j), so that ``B B^T ~ Wishart_s(df, I)`` (Bartlett 1933; Anderson, An Introduction to
  Multivariate Statistical Analysis, Thm. 7.2.1). Needs ``df >= s``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["chi2", "bartlett"]


def _gamma_mt(key, a, shape):
    """Gamma(a) draws, shape ``shape``, for an array ``a >= 1`` broadcastable to it (Marsaglia-Tsang)."""
    a = jnp.broadcast_to(jnp.asarray(a, jnp.float64), shape)
    d = a - 1.0 / 3.0
    c = 1.0 / jnp.sqrt(9.0 * d)

    def body(state):
        key, out, done = state
        key, kx, ku = jax.random.split(key, 3)
        x = jax.random.normal(kx, shape)
        u = jax.random.uniform(ku, shape, minval=jnp.finfo(jnp.float64).tiny)
        v = (1.0 + c * x) ** 3
        vpos = jnp.where(v > 0, v, 1.0)
        ok = (v > 0) & (jnp.log(u) < 0.5 * x * x + d - d * vpos + d * jnp.log(vpos))
        out = jnp.where(~done & ok, d * vpos, out)
        return key, out, done | ok

    state = body((key, jnp.zeros(shape), jnp.zeros(shape, bool)))
    _, out, _ = jax.lax.while_loop(lambda st: ~jnp.all(st[2]), body, state)
    return out


def chi2(key, df, shape=()):
    """Exact ``chi^2_df`` draws (``df > 0``, scalar or array broadcastable to ``shape``)."""
    a = jnp.broadcast_to(jnp.asarray(df, jnp.float64) / 2.0, shape)
    kg, ku = jax.random.split(key)
    small = a < 1.0
    g = _gamma_mt(kg, jnp.where(small, a + 1.0, a), shape)
    u = jax.random.uniform(ku, shape, minval=jnp.finfo(jnp.float64).tiny)
    return 2.0 * g * jnp.where(small, u ** (1.0 / a), 1.0)


def bartlett(key, df: int, s: int, batch=()):
    """Bartlett factors, shape ``batch + (s, s)``: ``B B^T ~ Wishart_s(df, I_s)``; requires ``df >= s``."""
    if isinstance(df, int) and df < s:
        raise ValueError(f"the Bartlett factor needs df >= s; got df={df}, s={s}")
    kd, kl = jax.random.split(key)
    diag = jnp.sqrt(chi2(kd, df - jnp.arange(s), batch + (s,)))
    low = jnp.tril(jax.random.normal(kl, batch + (s, s)), -1)
    return low + diag[..., :, None] * jnp.eye(s)
