r"""The single-location regression (SLR) data model (Marion et al., ICLR 2025, spec A1).

A teacher pair ``k*, v*`` on the unit sphere with ``k* . v* = 0``. Given a signal location ``J0`` drawn uniformly
from ``{0, ..., L-1}``::

    X_{J0} ~ N(sqrt(d/2) k*, gamma^2 I_d),    X_l ~ N(0, I_d) for l != J0,    y = X_{J0} . v* + eps xi.

The official code fixes ``J0 = 0``; the paper's J0 is uniform, and the linear baseline (spec A2) needs it uniform,
so this sampler randomises it. Dohmatob's convention (signal mean ``c sqrt(d) u*``, ``c = sqrt(1 - gamma^2)``)
is the same model when ``gamma = 1/sqrt(2)`` (spec C).

Two samplers share one law:

* :func:`sample_slr` draws the tokens in R^d;
* :func:`sample_slr_in_frame` draws only their coordinates in an orthonormal frame ``(k*, v*, e1, e2)``. Every
  quantity that depends on the tokens only through their inner products with ``k*, v*, k, v`` (the predictor, the
  label, the loss) has the same law under both, at a cost independent of d.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["SLRBatch", "sample_teacher", "sample_slr", "sample_slr_in_frame", "orthonormal_frame", "sample_dohmatob",
           "sample_dohmatob_in_frame"]


class SLRBatch(NamedTuple):
    """A batch of SLR samples: tokens ``X`` (n, L, dim), labels ``y`` (n,), signal locations ``J0`` (n,)."""

    X: jax.Array
    y: jax.Array
    J0: jax.Array


def sample_teacher(key, d: int):
    """Teacher pair (k*, v*) as in the official ``init_star``: k* a normalised Gaussian, v* an independent Gaussian
    orthogonalised against k* and normalised. Returns ``(k_star, v_star)``, each of shape (d,)."""
    kk, kv = jax.random.split(key)
    k_star = jax.random.normal(kk, (d,))
    k_star = k_star / jnp.linalg.norm(k_star)
    v_star = jax.random.normal(kv, (d,))
    v_star = v_star - (v_star @ k_star) * k_star
    return k_star, v_star / jnp.linalg.norm(v_star)


def sample_slr(key, k_star, v_star, n: int, L: int, gamma, eps=0.0) -> SLRBatch:
    """Draw ``n`` SLR sequences of length ``L`` in R^d (d = k_star.size) with a uniformly random J0."""
    d = k_star.shape[-1]
    kj, kx, ks, kxi = jax.random.split(key, 4)
    J0 = jax.random.randint(kj, (n,), 0, L)
    X = jax.random.normal(kx, (n, L, d))
    signal = jnp.sqrt(d / 2.0) * k_star + gamma * jax.random.normal(ks, (n, d))
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    X = jnp.where(is_signal[..., None], signal[:, None, :], X)
    y = signal @ v_star + eps * jax.random.normal(kxi, (n,))
    return SLRBatch(X, y, J0)


def sample_slr_in_frame(key, n: int, L: int, gamma, eps, d):
    """Coordinates of SLR tokens in the frame ``(k*, v*, e1, e2)``: the same law as projecting :func:`sample_slr`.

    Returns ``(Z, y, scale)``: ``Z`` of shape (n, L, 4), the labels ``y`` (n,), and ``scale`` (n, L), the standard
    deviation of each token's remaining ``d - 4`` coordinates (gamma for the signal token, 1 otherwise).
    """
    kj, kz, kxi = jax.random.split(key, 3)
    J0 = jax.random.randint(kj, (n,), 0, L)
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    scale = jnp.where(is_signal, gamma, 1.0)
    Z = scale[..., None] * jax.random.normal(kz, (n, L, 4))
    Z = Z.at[..., 0].add(jnp.where(is_signal, jnp.sqrt(d / 2.0), 0.0))
    y = jnp.sum(jnp.where(is_signal, Z[..., 1], 0.0), axis=-1) + eps * jax.random.normal(kxi, (n,))
    return Z, y, scale


def orthonormal_frame(key, d: int, r: int = 4):
    """A uniformly random orthonormal r-frame in R^d, shape (r, d) (QR of a Gaussian matrix, signs fixed)."""
    G = jax.random.normal(key, (d, r))
    Q, R = jnp.linalg.qr(G)
    return (Q * jnp.sign(jnp.diagonal(R))[None, :]).T


def sample_dohmatob(key, u_star, v_star, n: int, L: int, gamma, eps=0.0, link="linear") -> SLRBatch:
    r"""Dohmatob's parameterisation of the SLR sampler (spec B1): the secret token ``x_{J0} ~ N(c sqrt(d) u*, gamma^2 I)``
    with ``c = sqrt(1 - gamma^2)``, noise tokens ``N(0, I)``, ``y = sigma(x_{J0} . v*) + eps xi``, J0 uniform.

    With ``gamma = 1/sqrt(2)`` and the linear link this is :func:`sample_slr` (same law; spec C dictionary
    u*, v* = k*, v*). gamma must lie in (0, 1); the link is a name of :data:`attnlab.dohmatob.model.LINKS` or a callable.
    """
    from attnlab.dohmatob.model import get_link, signal_mean_scale

    c = signal_mean_scale(gamma)
    sigma = get_link(link)
    d = u_star.shape[-1]
    kj, kx, ks, kxi = jax.random.split(key, 4)
    J0 = jax.random.randint(kj, (n,), 0, L)
    X = jax.random.normal(kx, (n, L, d))
    signal = c * jnp.sqrt(d) * u_star + gamma * jax.random.normal(ks, (n, d))
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    X = jnp.where(is_signal[..., None], signal[:, None, :], X)
    y = sigma(signal @ v_star) + eps * jax.random.normal(kxi, (n,))
    return SLRBatch(X, y, J0)


def sample_dohmatob_in_frame(key, n: int, L: int, gamma, eps, d, link="linear"):
    """Coordinates of Dohmatob's tokens in the frame ``(u*, v*, e1, e2)``: the same law as projecting
    :func:`sample_dohmatob` onto an orthonormal frame whose first two vectors are u*, v*.

    Returns ``(Z, y)``: ``Z`` of shape (n, L, 4) and the labels ``y`` (n,). The predictor of any (u, v) in the span
    of the frame depends on the tokens only through ``Z``, so a Monte Carlo risk costs O(n L), whatever d. The
    normals of Z come from :func:`attnlab._random.normal` (Threefry + Box-Muller, float64, exact in law): the Monte
    Carlo risks are bound by drawing them, and that generator is 2-4x faster here than ``jax.random.normal``.
    """
    from attnlab._random import normal
    from attnlab.dohmatob.model import get_link, signal_mean_scale

    c = signal_mean_scale(gamma)
    sigma = get_link(link)
    kj, kz, kxi = jax.random.split(key, 3)
    J0 = jax.random.randint(kj, (n,), 0, L)
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    Z = jnp.where(is_signal, gamma, 1.0)[..., None] * normal(kz, (n, L, 4))
    Z = Z.at[..., 0].add(jnp.where(is_signal, c * jnp.sqrt(d), 0.0))
    y = sigma(jnp.sum(jnp.where(is_signal, Z[..., 1], 0.0), axis=-1)) + eps * jax.random.normal(kxi, (n,))
    return Z, y
