"""The generic Monte Carlo mean of the SLR papers' risk estimators (Marion's and Dohmatob's)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["mc_mean", "mc_mean_to_se", "resolving_se"]


def mc_mean(key, sample_fn, n: int, chunk: int = 2000):
    """Mean and standard error of the scalar samples ``sample_fn(key, chunk) -> (chunk,)`` over ``n`` draws.

    The draws come in ``ceil(n / chunk)`` chunks (a ``lax.map`` over chunk keys split from ``key``), which bounds
    memory at large d. Returns ``(mean, std / sqrt(count))``.
    """
    n_chunks = max(1, math.ceil(n / chunk))
    keys = jax.random.split(key, n_chunks)
    vals = jax.lax.map(lambda k: sample_fn(k, chunk), keys).reshape(-1)
    return jnp.mean(vals), jnp.std(vals, ddof=1) / jnp.sqrt(vals.size)


def mc_mean_to_se(key, sample_fn, target_se, n: int, chunk: int = 2000, n_min: int | None = None):
    """:func:`mc_mean` drawn only as far as a standard error needs: chunk after chunk (the chunk keys of
    ``mc_mean(key, sample_fn, n, chunk)``, in order) until ``std / sqrt(count) <= target_se`` with at least ``n_min``
    draws (default two chunks), or ``n`` draws. Returns ``(mean, std / sqrt(count), count)``.

    With ``target_se = resolving_se(theory, control)`` the samples a check needs follow from its control, not from a
    fixed count. Chunks are merged by the parallel
    variance formula (Chan, Golub and LeVeque), one ``lax.while_loop`` in one compiled program. Once all ``n``
    draws are taken, the mean and SE equal :func:`mc_mean`'s up to round-off.
    """
    n_chunks = max(1, math.ceil(n / chunk))
    min_chunks = min(n_chunks, max(2, math.ceil((n_min or 0) / chunk)))
    keys = jax.random.split(key, n_chunks)
    target_se = jnp.asarray(target_se)

    def se(count, m2):
        return jnp.sqrt(m2 / (count - 1) / count)

    def more(state):
        i, count, _, m2 = state
        return (i < n_chunks) & ((i < min_chunks) | ~(se(count, m2) <= target_se))

    def draw(state):
        i, count, mean, m2 = state
        vals = sample_fn(keys[i], chunk).reshape(-1)
        c_mean = jnp.mean(vals)
        c_m2 = jnp.sum((vals - c_mean) ** 2)
        total = count + vals.size
        delta = c_mean - mean
        return (i + 1, total, mean + delta * vals.size / total, m2 + c_m2 + delta**2 * count * vals.size / total)

    zero = jnp.zeros((), dtype=jnp.result_type(float))
    _, count, mean, m2 = jax.lax.while_loop(more, draw, (0, zero, zero, zero))
    return mean, se(count, m2), count


def resolving_se(theory, control) -> float:
    """The standard error at which a check of ``theory`` against a Monte Carlo mean, at a tolerance of 5 SE, rejects
    its ``control``: ``|theory - control| / 12``. If the theory holds, the mean lies within 5 SE of it, hence at least
    12 - 5 = 7 SE from the control, beyond the tolerance. 0 (draw every sample) when the distance is not finite."""
    gap = abs(float(theory) - float(control))
    return gap / 12.0 if math.isfinite(gap) else 0.0
