r"""Owen's T function and the zeta function of erf attention, shared by the SLR papers.

``T(h, a) = (1 / 2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx`` is evaluated with a fixed 64-node
Gauss-Legendre rule on the finite interval ``[0, a]``, ``a <= 1``: the integrand is smooth there, so the rule
converges geometrically and value, gradient and forward-mode derivatives are plain JAX transformations of one
expression. Marion et al.'s ``zeta(t, sigma) = E[erf(t + sigma Z)^2]`` (the signal-token term of their Theorem 1)
is a closed form in T; Dohmatob's mean-field risk for the ReLU link uses T through the bivariate normal CDF.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["owens_t", "zeta"]

# Gauss-Legendre nodes on [-1, 1]; 64 nodes integrate exp(-h^2 (1 + x^2) / 2) / (1 + x^2) on [0, a], a <= 1, to
# round-off for every h that matters (checked against scipy.special.owens_t in tests/slr/test_owen.py).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(64)


@jax.jit
def owens_t(h, a):
    r"""Owen's T function ``T(h, a) = (1 / 2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx`` for ``0 <= a <= 1``.

    Fixed 64-node Gauss-Legendre rule: smooth integrand on a finite interval, so the rule converges
    geometrically, and the result is differentiable in both arguments by ordinary autodiff.
    """
    h = jnp.asarray(h, dtype=jnp.float64)
    a = jnp.asarray(a, dtype=jnp.float64)
    x = 0.5 * a[..., None] * (jnp.asarray(_GL_NODES) + 1.0)
    w = 0.5 * a[..., None] * jnp.asarray(_GL_WEIGHTS)
    one_x2 = 1.0 + x * x
    f = jnp.exp(-0.5 * (h[..., None] ** 2) * one_x2) / one_x2
    return jnp.sum(w * f, axis=-1) / (2.0 * math.pi)


def zeta(t, sigma):
    r"""``zeta(t, sigma) = E_{Z ~ N(0,1)}[erf(t + sigma Z)^2]``, the function in Marion et al.'s risk (Theorem 1).

    Closed form ``1 - 8 T(sqrt(2) t / sqrt(1 + 2 sigma^2), 1 / sqrt(1 + 4 sigma^2))``; in particular
    ``zeta(0, sigma) = (2 / pi) arcsin(2 sigma^2 / (1 + 2 sigma^2))``.
    """
    t = jnp.asarray(t, dtype=jnp.float64)
    sigma = jnp.asarray(sigma, dtype=jnp.float64)
    t, sigma = jnp.broadcast_arrays(t, sigma)
    h = math.sqrt(2.0) * t / jnp.sqrt(1.0 + 2.0 * sigma**2)
    a = 1.0 / jnp.sqrt(1.0 + 4.0 * sigma**2)
    return 1.0 - 8.0 * owens_t(h, a)
