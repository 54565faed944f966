r"""Softmax attention on single-location regression (Dohmatob, NeurIPS 2025, eqs. 2-4).

The student (eq. 2 of the paper)::

    f(X; u, v) = sum_l softmax(lambda X u)_l sigma(X_l . v),      lambda = beta sqrt(d),  (u, v) on S^{d-1} x S^{d-1}

with a link ``sigma`` applied to the values and, in the data model, to the labels. Links: ``"linear"`` (identity),
``"quadratic"`` (t^2), ``"relu"`` (max(t, 0)) or any JAX-traceable callable. The softmax is evaluated through
log-sum-exp (``logits - logsumexp(logits)``), so it stays finite at beta = 100, d = 400 where the logits reach 1e4.

Dictionary to Marion et al.: u, v, u*, v* = k, v, k*, v*; overlaps mu, nu, zeta, eta, rho = kappa, nu, theta,
eta, rho; Dohmatob's signal mean ``c sqrt(d) u*`` with ``c = sqrt(1 - gamma^2)`` equals Marion's ``sqrt(d/2) k*``
exactly when gamma = 1/sqrt(2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp

from attnlab import _validate as check

__all__ = ["LINKS", "get_link", "link_name", "check_links", "check_gamma", "check_beta", "signal_mean_scale",
           "inverse_temperature", "softmax_weights", "softmax_attention"]


def _linear(t):
    return t


def _quadratic(t):
    return t * t


def _relu(t):
    return jnp.maximum(t, 0.0)


LINKS: dict[str, Callable] = {"linear": _linear, "quadratic": _quadratic, "relu": _relu}


def get_link(link) -> Callable:
    """The link function for a name in :data:`LINKS` or a callable (returned as is); anything else is rejected."""
    if callable(link):
        return link
    if isinstance(link, str) and link in LINKS:
        return LINKS[link]
    raise ValueError(f"unknown link {link!r}: expected one of {sorted(LINKS)} or a callable")


def check_links(links):
    """Validate a tuple of link names for a preset: each in :data:`LINKS`, no repeats. Returns ``links``."""
    for link in links:
        if link not in LINKS:
            raise ValueError(f"unknown link {link!r}: expected a subset of {sorted(LINKS)}")
    if len(set(links)) != len(links):
        raise ValueError("links must be distinct")
    return links


def link_name(link) -> str:
    return link if isinstance(link, str) else getattr(link, "__name__", "custom")


def check_gamma(gamma) -> float:
    """Dohmatob's gamma must lie in (0, 1) so that c = sqrt(1 - gamma^2) > 0 (eq. 4)."""
    g = check.finite_float("gamma", gamma)
    if not (0.0 < g < 1.0):
        raise ValueError(f"gamma must lie in the open interval (0, 1), got {gamma!r}")
    return g


def check_beta(beta) -> float:
    """The normalised inverse temperature beta must be > 0 (eq. 2, lambda = beta sqrt(d))."""
    b = check.finite_float("beta", beta)
    if not b > 0.0:
        raise ValueError(f"beta must be a positive finite number, got {beta!r}")
    return b


def signal_mean_scale(gamma) -> float:
    """``c = sqrt(1 - gamma^2)``: the secret token's mean is ``c sqrt(d) u*``."""
    return math.sqrt(1.0 - check_gamma(gamma) ** 2)


def inverse_temperature(beta, d: int) -> float:
    """``lambda = beta sqrt(d)``."""
    return check_beta(beta) * math.sqrt(d)


@partial(jax.jit, static_argnames="axis")
def softmax_weights(logits, axis: int = -1):
    """``softmax`` through log-sum-exp: ``exp(logits - logsumexp(logits))``, finite for any finite logits."""
    return jnp.exp(logits - jax.scipy.special.logsumexp(logits, axis=axis, keepdims=True))


def softmax_attention(X, u, v, beta, link="linear"):
    """``f(X; u, v) = sum_l softmax(beta sqrt(d) X u)_l sigma(X_l . v)`` for X of shape (..., L, d)."""
    sigma = get_link(link)
    d = X.shape[-1]
    lam = inverse_temperature(beta, d)
    return jnp.sum(softmax_weights(lam * (X @ u)) * sigma(X @ v), axis=-1)
