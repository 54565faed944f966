r"""Exact attention sums on the circle (d = 2) in O(N K) instead of O(N^2): the Fourier series of the weights.

For unit tokens ``x_j = (cos theta_j, sin theta_j)`` and ``Q^T K = c I``, the scores of Bruno et al.'s model (Eq. (1))
depend on the angles' difference only, ``beta <Q x_i, K x_j> = kappa cos(theta_i - theta_j)`` with
``kappa = beta c``, and the Jacobi-Anger expansion

    exp(kappa cos phi) = e^kappa sum_{k in Z} a_k e^{i k phi},     a_k = a_{-k} = e^{-kappa} I_k(kappa)

(``I_k`` the modified Bessel functions) turns both sums of the SA attention ``A_i = V C_i / Z_i`` into sums over k of
the empirical measure's Fourier moments ``M_k = sum_j e^{i k theta_j}``:

    e^{-kappa} Z_i = sum_j e^{kappa (cos(theta_i - theta_j) - 1)} = sum_k a_k e^{i k theta_i} conj(M_k),
    e^{-kappa} C_i = sum_j e^{kappa (cos(theta_i - theta_j) - 1)} e^{i theta_j}
                   = sum_k a_k e^{i k theta_i} conj(M_{k-1}),

``C_i`` the complex number ``x_1 + i x_2`` of ``sum_j w_ij x_j``. The series is cut at ``|k| <= K`` where
``a_K / a_0 < 2^-60`` (:func:`circle_order`: ``K`` grows like ``sqrt(kappa)``, 68 at ``kappa = 50``), and the
``a_k`` are the discrete Fourier coefficients of ``e^{kappa (cos - 1)}`` on ``G >= 4 K`` points (their aliasing error
``a_{G-K}`` is below ``a_K``). Every term is at most ``a_0 N`` while ``e^{-kappa} Z_i >= 1`` (the term ``j = i``), so
the relative round-off of the sums is at most ``N a_0`` times float64's (the tests compare with the dense softmax at
``1e-12``), in ``O(N K)`` operations and memory where the blocked kernels of :mod:`attnlab.bruno.attention` take
``N^2`` exponentials.

This holds for tokens on the circle only (the Euler scheme of :mod:`attnlab.bruno.integrate` normalises every step
before the attention sums; the intermediate stages of other schemes leave the circle) and for the SA normalisation.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["circle_scale", "require_circle", "circle_order", "attention_circle", "log_normalizer_circle"]

_TRUNCATION = 2.0**-60


def circle_scale(Q, K) -> float | None:
    """``c`` if ``Q^T K = c I`` (d = 2, to 1e-12 relative), else None: where :func:`attention_circle` applies."""
    Q, K = np.asarray(Q, float), np.asarray(K, float)
    if Q.shape != (2, 2) or K.shape != (2, 2):
        return None
    S = Q.T @ K
    c = float(S[0, 0])
    if c == 0.0 or not np.allclose(S, c * np.eye(2), rtol=0.0, atol=1e-12 * abs(c)):
        return None
    return c


def require_circle(Q, K) -> float:
    """:func:`circle_scale` of ``(Q, K)``, or a one-line ValueError where the Fourier sums do not apply."""
    c = circle_scale(Q, K)
    if c is None:
        raise ValueError("the exact sums on the circle need d = 2 and Q^T K = c I (c != 0)")
    return c


def circle_order(kappa: float) -> int:
    """The order K of the series for ``kappa = beta c``: the least K >= 1 with ``I_K(kappa) / I_0(kappa) < 2^-60``."""
    from scipy.special import ive

    k = abs(float(kappa))
    if not math.isfinite(k):
        raise ValueError(f"kappa must be finite (got {kappa})")
    a0 = ive(0, k)
    K = 1
    while ive(K, k) >= _TRUNCATION * a0:
        K += 1
    return K


def _series(x, kappa, order: int):
    """The pieces of both sums for unit tokens x (N, 2) in float64: e^{ik theta_i} (N, K + 2), the moments M_k
    (K + 2,), the coefficients a_0 .. a_K and ``e^{-kappa} Z_i`` (N,)."""
    G = 4 * (order + 1)
    grid = 2 * math.pi * jnp.arange(G) / G
    a = jnp.real(jnp.fft.rfft(jnp.exp(kappa * (jnp.cos(grid) - 1.0))))[:order + 1] / G  # a_0 .. a_K
    theta = jnp.arctan2(x[:, 1], x[:, 0])
    E = jnp.exp(1j * theta[:, None] * jnp.arange(order + 2))  # e^{i k theta_i}, k = 0 .. K + 1
    M = jnp.sum(E, axis=0)  # M_k, k = 0 .. K + 1
    # a_0 M_0 + 2 Re sum_{k>=1} a_k e^{ik theta_i} conj(M_k)
    Z = a[0] * jnp.real(M[0]) + 2.0 * jnp.real(E[:, 1:order + 1] @ (a[1:] * jnp.conj(M[1:order + 1])))
    return E, M, a, Z


def attention_circle(x, Q, K, V, beta, *, order: int):
    """SA attention ``A_i = sum_j w_ij V x_j`` of unit tokens ``x`` (N, 2) (or (runs, N, 2)) with ``Q^T K = c I``
    (:func:`circle_scale`), from the Fourier moments of the tokens (module docstring); ``order`` is
    :func:`circle_order` of ``beta c`` (or more). Computed in float64; returned in ``x``'s dtype."""
    if x.ndim == 3:
        return jax.vmap(lambda y: attention_circle(y, Q, K, V, beta, order=order))(x)
    E, M, a, Z = _series(x.astype(jnp.float64), beta * (Q.T @ K)[0, 0], order)
    # C: sum_{k=1..K} a_k e^{ik theta_i} conj(M_{k-1}) + sum_{k=0..K} a_k e^{-ik theta_i} M_{k+1}
    C = E[:, 1:order + 1] @ (a[1:] * jnp.conj(M[:order])) + jnp.conj(E[:, :order + 1]) @ (a * M[1:order + 2])
    mean = jnp.stack([jnp.real(C), jnp.imag(C)], axis=-1) / Z[:, None]
    return (mean @ V.T.astype(jnp.float64)).astype(x.dtype)


def log_normalizer_circle(x, c, beta, *, order: int):
    """``log Z_i = log sum_j exp(beta c <x_i, x_j>)`` of unit tokens ``x`` (N, 2), ``kappa + log(e^{-kappa} Z_i)``
    from the same series (``order``: :func:`circle_order` of ``beta c``); float64."""
    kappa = beta * c
    return kappa + jnp.log(_series(x.astype(jnp.float64), kappa, order)[3])
