r"""Finite-width reference sampler: the multi-head attention layer exactly as the official code runs it.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846, Algorithm 1 (Example 3.1); official ``single_run`` of
``src/multihead_attention.py`` (full rank), ``src/low_rank_attention.py`` (low rank), ``multihead_attention_relu.py``
(ReLU inputs) and ``src/score_distribution.py`` (score probe). For one network draw:

.. math::

    h \sim N(0, I_n),\quad x_i = \psi(W_i h),\quad Q^a = X W_Q^a,\ K^a = X W_K^a,\ V^a = X W_V^a,\\
    G^a = Q^a K^{a\top}/\sqrt{d},\quad A^a = \mathrm{softmax}_{\text{rows}}(G^a),\quad
    Y = H^{-1/2} \textstyle\sum_a A^a V^a W_O^a .

Notation: ``n`` is the width, ``s = n_tokens`` (rows of X), ``H = n_heads``, ``d`` the per-head width
(``d = n`` full rank; ``d = head_width = n_H`` low rank). ``W_i`` (n x n), ``W_Q, W_K, W_V`` (n x d) have variance
1/n; ``W_O`` (d x n) has variance 1/d. Everything is redrawn per network and X is shared by the heads.

This is the brute-force path (``(s + 4H) n^2`` normals per network): slow, obviously correct, kept for tests and
benchmarks. The exact fast sampler with the same law is :mod:`attnlab.width.exact`.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from attnlab.width._common import check_model, psi

__all__ = ["reference_network", "sample_reference", "sample_reference_scores"]


def reference_network(key, n: int, n_heads: int, n_tokens: int, activation: str = "clip",
                      head_width: int | None = None):
    """One network draw: the full output ``Y`` (s x n) of the layer, computed in full as the official code does."""
    d = n if head_width is None else head_width
    s = n_tokens
    kh, kw, kheads = jax.random.split(key, 3)
    h = jax.random.normal(kh, (n,))
    W_in = jax.random.normal(kw, (s, n, n)) / math.sqrt(n)
    X = psi(W_in @ h, activation)  # (s, n): row i is psi(W_i h)

    def head(Y, k):
        kq, kk, kv, ko = jax.random.split(k, 4)
        Q = X @ (jax.random.normal(kq, (n, d)) / math.sqrt(n))
        K = X @ (jax.random.normal(kk, (n, d)) / math.sqrt(n))
        V = X @ (jax.random.normal(kv, (n, d)) / math.sqrt(n))
        W_O = jax.random.normal(ko, (d, n)) / math.sqrt(d)
        A = jax.nn.softmax(Q @ K.T / math.sqrt(d), axis=-1)
        return Y + A @ V @ W_O, None

    Y, _ = jax.lax.scan(head, jnp.zeros((s, n)), jax.random.split(kheads, n_heads))
    return Y / math.sqrt(n_heads)


def sample_reference(key, *, n: int, n_heads: int, n_tokens: int = 4, activation: str = "clip",
                     head_width: int | None = None, n_samples: int, n_out: int = 1, batch_size: int = 64):
    """``n_samples`` independent networks by brute force; returns ``Y[:, :, :n_out]`` of shape (n_samples, s, n_out).

    ``Y[:, 0, 0]`` is the official statistic (first token, first output feature). Networks are mapped in batches
    of ``batch_size`` (``lax.map``) to bound memory at large n.
    """
    check_model(n=n, n_heads=n_heads, n_tokens=n_tokens, activation=activation, head_width=head_width,
                n_samples=n_samples)
    if not 1 <= n_out <= n:
        raise ValueError(f"n_out must be in [1, n]; got n_out={n_out}, n={n}")
    return _reference(key, n, n_heads, n_tokens, activation, head_width, n_samples, n_out, min(batch_size, n_samples))


@functools.partial(jax.jit, static_argnums=tuple(range(1, 9)))
def _reference(key, n, n_heads, n_tokens, activation, head_width, n_samples, n_out, batch_size):
    one = lambda k: reference_network(k, n, n_heads, n_tokens, activation, head_width)[:, :n_out]
    return jax.lax.map(one, jax.random.split(key, n_samples), batch_size=batch_size)


def sample_reference_scores(key, *, n: int, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                            batch_size: int = 256):
    r"""Score probe (official ``score_distribution.py``): ``(QK^T)_{00}/\sqrt{n}`` and ``(QK^T)_{00}/n`` of one head.

    Returns ``(g_sqrt, g_lin)``, each (n_samples,), from the same network draws.
    """
    check_model(n=n, n_tokens=n_tokens, activation=activation, n_samples=n_samples)

    out = _reference_scores(key, n, n_tokens, activation, n_samples, min(batch_size, n_samples))
    return out[:, 0], out[:, 1]


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _reference_scores(key, n, n_tokens, activation, n_samples, batch_size):
    def one(k):
        kh, kw, kq, kk = jax.random.split(k, 4)
        h = jax.random.normal(kh, (n,))
        X = psi((jax.random.normal(kw, (n_tokens, n, n)) / math.sqrt(n)) @ h, activation)
        Q = X @ (jax.random.normal(kq, (n, n)) / math.sqrt(n))
        K = X @ (jax.random.normal(kk, (n, n)) / math.sqrt(n))
        g = (Q @ K.T)[0, 0]
        return jnp.stack([g / math.sqrt(n), g / n])

    return jax.lax.map(one, jax.random.split(key, n_samples), batch_size=batch_size)
