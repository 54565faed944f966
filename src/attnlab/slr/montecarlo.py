"""The generic Monte Carlo mean of the SLR papers' risk estimators (Marion's and Dohmatob's)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["mc_mean"]


def mc_mean(key, sample_fn, n: int, chunk: int = 2000):
    """Mean and standard error of the scalar samples ``sample_fn(key, chunk) -> (chunk,)`` over ``n`` draws.

    The draws come in ``ceil(n / chunk)`` chunks (a ``lax.map`` over chunk keys split from ``key``), which bounds
    memory at large d. Returns ``(mean, std / sqrt(count))``.
    """
    n_chunks = max(1, math.ceil(n / chunk))
    keys = jax.random.split(key, n_chunks)
    vals = jax.lax.map(lambda k: sample_fn(k, chunk), keys).reshape(-1)
    return jnp.mean(vals), jnp.std(vals, ddof=1) / jnp.sqrt(vals.size)
