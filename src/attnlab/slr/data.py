r"""The single-location regression (SLR) data model of Marion et al. (ICLR 2025), shared with Dohmatob.

A teacher pair ``k*, v*`` on the unit sphere with ``k* . v* = 0``. Given a signal location ``J0`` drawn uniformly
from ``{0, ..., L-1}``::

    X_{J0} ~ N(sqrt(d/2) k*, gamma^2 I_d),    X_l ~ N(0, I_d) for l != J0,    y = X_{J0} . v* + eps xi.

The official code fixes ``J0 = 0``; the paper's J0 is uniform, and the best linear predictor (Prop. 3) needs it
uniform, so this sampler randomises it. Dohmatob's convention (signal mean ``c sqrt(d) u*``, ``c = sqrt(1 - gamma^2)``,
labels through a link, :mod:`attnlab.dohmatob.data`) is the same model when ``gamma = 1/sqrt(2)`` and the link is the
identity; both papers' samplers are :func:`sample_tokens` and :func:`sample_tokens_in_frame` with their signal mean.

Two samplers share one law:

* :func:`sample_slr` draws the tokens in R^d;
* :func:`sample_slr_in_frame` draws only their coordinates in an orthonormal frame ``(k*, v*, e1, e2)``. Every
  quantity that depends on the tokens only through their inner products with ``k*, v*, k, v`` (the predictor, the
  label, the loss) has the same law under both, at a cost independent of d.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from attnlab import _random, programs

__all__ = ["SLRBatch", "sample_teacher", "init_sphere", "sample_slr", "sample_slr_in_frame", "sample_tokens",
           "sample_tokens_in_frame", "orthonormal_frame"]


class SLRBatch(NamedTuple):
    """A batch of SLR samples: tokens ``X`` (n, L, dim), labels ``y`` (n,), signal locations ``J0`` (n,)."""

    X: jax.Array
    y: jax.Array
    J0: jax.Array


@partial(programs.jit, static_argnums=1)
def sample_teacher(key, d: int):
    """Teacher pair (k*, v*) as in the official ``init_star``: k* a normalised Gaussian, v* an independent Gaussian
    orthogonalised against k* and normalised. Returns ``(k_star, v_star)``, each of shape (d,)."""
    kk, kv = jax.random.split(key)
    k_star = jax.random.normal(kk, (d,))
    k_star = k_star / jnp.linalg.norm(k_star)
    v_star = jax.random.normal(kv, (d,))
    v_star = v_star - (v_star @ k_star) * k_star
    return k_star, v_star / jnp.linalg.norm(v_star)


@partial(programs.jit, static_argnums=1)
def init_sphere(key, d: int):
    """Independent uniform k and v on the sphere S^{d-1} (official ``initialize_on_sphere``)."""
    kk, kv = jax.random.split(key)
    k = jax.random.normal(kk, (d,))
    v = jax.random.normal(kv, (d,))
    return k / jnp.linalg.norm(k), v / jnp.linalg.norm(v)


@partial(programs.jit, static_argnames=("n", "L", "link"))
def sample_tokens(key, k_star, v_star, n: int, L: int, gamma, eps, mean_scale, link=None) -> SLRBatch:
    """``n`` SLR sequences in R^d with signal mean ``mean_scale k*``: ``X_{J0} ~ N(mean_scale k*, gamma^2 I)``,
    ``X_l ~ N(0, I)`` otherwise, ``y = link(X_{J0} . v*) + eps xi`` (``link=None``: the identity), J0 uniform."""
    d = k_star.shape[-1]
    kj, kx, ks, kxi = jax.random.split(key, 4)
    J0 = jax.random.randint(kj, (n,), 0, L)
    X = jax.random.normal(kx, (n, L, d))
    signal = mean_scale * k_star + gamma * jax.random.normal(ks, (n, d))
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    X = jnp.where(is_signal[..., None], signal[:, None, :], X)
    y = signal @ v_star
    y = (y if link is None else link(y)) + eps * jax.random.normal(kxi, (n,))
    return SLRBatch(X, y, J0)


@partial(jax.jit, static_argnames=("n", "L", "link", "normal"))
def sample_tokens_in_frame(key, n: int, L: int, gamma, eps, mean_scale, link=None, normal=_random.normal):
    """Coordinates in the frame ``(k*, v*, e1, e2)`` of the tokens of :func:`sample_tokens` (same law as projecting
    them). ``normal(key, shape)`` draws the standard normals of the coordinates: by default
    :func:`attnlab._random.normal` (Threefry + Box-Muller, float64, exact in law), which the Monte Carlo risks and
    the reduced SGD chain are bound by, and which draws them faster than ``jax.random.normal`` (no float64
    ``erf_inv``; see :mod:`attnlab._random`). Returns ``(Z, y, scale)``: ``Z`` (n, L, 4), the labels
    ``y`` (n,), and ``scale`` (n, L), the standard deviation of each token's remaining ``d - 4`` coordinates (gamma
    for the signal token, 1 otherwise)."""
    kj, kz, kxi = jax.random.split(key, 3)
    J0 = jax.random.randint(kj, (n,), 0, L)
    is_signal = jnp.arange(L)[None, :] == J0[:, None]
    scale = jnp.where(is_signal, gamma, 1.0)
    Z = scale[..., None] * normal(kz, (n, L, 4))
    Z = Z.at[..., 0].add(jnp.where(is_signal, mean_scale, 0.0))
    y = jnp.sum(jnp.where(is_signal, Z[..., 1], 0.0), axis=-1)
    y = (y if link is None else link(y)) + eps * jax.random.normal(kxi, (n,))
    return Z, y, scale


def sample_slr(key, k_star, v_star, n: int, L: int, gamma, eps=0.0) -> SLRBatch:
    """Draw ``n`` SLR sequences of length ``L`` in R^d (d = k_star.size) with a uniformly random J0: signal mean
    ``sqrt(d/2) k*``, ``y = X_{J0} . v* + eps xi``."""
    d = k_star.shape[-1]
    return sample_tokens(key, k_star, v_star, n, L, gamma, eps, jnp.sqrt(d / 2.0))


def sample_slr_in_frame(key, n: int, L: int, gamma, eps, d):
    """Coordinates of SLR tokens in the frame ``(k*, v*, e1, e2)``: the same law as projecting :func:`sample_slr`.

    Returns ``(Z, y, scale)``: ``Z`` of shape (n, L, 4), the labels ``y`` (n,), and ``scale`` (n, L), the standard
    deviation of each token's remaining ``d - 4`` coordinates (gamma for the signal token, 1 otherwise).
    """
    return sample_tokens_in_frame(key, n, L, gamma, eps, jnp.sqrt(d / 2.0))


def orthonormal_frame(key, d: int, r: int = 4):
    """A uniformly random orthonormal r-frame in R^d, shape (r, d) (QR of a Gaussian matrix, signs fixed)."""
    G = jax.random.normal(key, (d, r))
    Q, R = jnp.linalg.qr(G)
    return (Q * jnp.sign(jnp.diagonal(R))[None, :]).T
