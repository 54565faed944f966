r"""Closed-form population risk of erf-attention on single-location regression.

Source: Marion, Berthier, Biau, Boyer, "Attention layers provably solve single-location regression" (ICLR 2025),
Theorem 1, as transcribed from the official code's ``R``. The overlaps are :class:`attnlab.slr.overlaps.Overlaps`.

With ``s = sqrt(d/2)``, ``a = 1 + 2 lambda^2 gamma^2``, ``b = 1 + 4 lambda^2 gamma^2``, ``A = lambda s kappa / sqrt(a)``::

    R = gamma^2
      - 2 [gamma^2 nu erf(A) + lambda gamma^2 s eta theta / sqrt(a) erf'(A) + lambda^2 gamma^4 eta rho / a erf''(A)]
      + (s^2 theta^2 + gamma^2) zeta(lambda s kappa, lambda gamma)
      + 4 lambda gamma^2 s (theta rho - lambda^2 gamma^2 rho^2 kappa / a) / sqrt(a) erf(A / sqrt(b)) erf'(A)
      + (4 / sqrt(pi)) lambda^2 gamma^4 rho^2 / (a sqrt(b)) erf'(lambda sqrt(d) kappa / sqrt(b))
      + (L-1) 8 lambda^2 rho^2 / (pi sqrt(1 + 4 lambda^2) (1 + 2 lambda^2))
      + (L-1)(L-2) 4 lambda^2 rho^2 / (pi (1 + 2 lambda^2))
      + 2 (L-1) C_lambda rho [s theta erf(A) + lambda gamma^2 rho / sqrt(a) erf'(A)]

and ``E[(T_lambda(X) - y)^2] = R + (L-1) zeta(0, lambda) + eps^2``.

``zeta(t, sigma) = E[erf(t + sigma Z)^2]`` is evaluated through Owen's T,
``zeta(t, sigma) = 1 - 8 T(sqrt(2) t / sqrt(1 + 2 sigma^2), 1 / sqrt(1 + 4 sigma^2))``, with a fixed Gauss-Legendre
rule on the finite interval ``[0, a]``, ``a <= 1``. No adaptive quadrature and no custom JVP: value, gradient,
forward-mode derivatives and Hessians are plain JAX transformations of the same expression, which removes the
swapped-argument custom-JVP defect of the official code. :func:`attnlab.slr.owen.owens_t` and
:func:`attnlab.slr.owen.zeta` live in the shared SLR core (Dohmatob's ReLU kernel uses Owen's T too) and are
re-exported here.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.scipy.special import erf

from attnlab.slr.overlaps import Overlaps
from attnlab.slr.owen import owens_t, zeta

__all__ = [
    "Overlaps",
    "owens_t",
    "zeta",
    "erf_prime",
    "erf_second",
    "c_lambda",
    "risk_R",
    "noise_token_constant",
    "population_excess_risk",
    "population_risk",
    "risk_on_manifold",
    "oracle_excess_risk",
    "linear_baseline_risk",
]

_SQRT_PI = math.sqrt(math.pi)

def erf_prime(x):
    """``erf'(x) = (2 / sqrt(pi)) exp(-x^2)``."""
    return 2.0 / _SQRT_PI * jnp.exp(-x * x)


def erf_second(x):
    """``erf''(x) = -2 x erf'(x)``."""
    return -2.0 * x * erf_prime(x)


def c_lambda(lam):
    """``C_lambda = E[g erf(lambda g)] = 2 lambda / sqrt(pi (1 + 2 lambda^2))`` for ``g ~ N(0, 1)``."""
    return 2.0 * lam / jnp.sqrt(math.pi * (1.0 + 2.0 * lam**2))


def risk_R(o: Overlaps, lam, gamma, d, L):
    """The official code's ``R(k, v)`` (Theorem 1): the population risk without ``eps^2`` and ``(L-1) zeta(0, lambda)``;
    the formula is written out in :mod:`attnlab.marion.risk`.

    ``o``: the five overlaps (scalars or broadcastable arrays); ``lam``: the attention scale lambda > 0; ``gamma``: the
    signal token's standard deviation; ``d``: the dimension; ``L``: the sequence length.
    """
    kappa, nu, theta, eta, rho = o.kappa, o.nu, o.theta, o.eta, o.rho
    s = jnp.sqrt(d / 2.0)
    g2 = gamma**2
    a = 1.0 + 2.0 * lam**2 * g2
    b = 1.0 + 4.0 * lam**2 * g2
    A = lam * s * kappa / jnp.sqrt(a)
    erf_A = erf(A)
    erfp_A = erf_prime(A)
    cross = g2 * nu * erf_A + lam * g2 * s * eta * theta / jnp.sqrt(a) * erfp_A
    cross = cross + lam**2 * g2**2 * eta * rho / a * erf_second(A)
    signal = (s**2 * theta**2 + g2) * zeta(lam * s * kappa, lam * gamma)
    signal = signal + 4.0 * lam * g2 * s * (theta * rho - lam**2 * g2 * rho**2 * kappa / a) / jnp.sqrt(a) * erf(
        A / jnp.sqrt(b)
    ) * erfp_A
    signal = signal + 4.0 / _SQRT_PI * lam**2 * g2**2 * rho**2 / (a * jnp.sqrt(b)) * erf_prime(
        lam * jnp.sqrt(d) * kappa / jnp.sqrt(b)
    )
    noise = (L - 1) * 8.0 * lam**2 * rho**2 / (math.pi * jnp.sqrt(1.0 + 4.0 * lam**2) * (1.0 + 2.0 * lam**2))
    noise = noise + (L - 1) * (L - 2) * 4.0 * lam**2 * rho**2 / (math.pi * (1.0 + 2.0 * lam**2))
    signal_noise = 2.0 * (L - 1) * c_lambda(lam) * rho * (s * theta * erf_A + lam * g2 * rho / jnp.sqrt(a) * erfp_A)
    return g2 - 2.0 * cross + signal + noise + signal_noise


def noise_token_constant(lam, L):
    """``(L-1) zeta(0, lambda)``: the noise tokens' part of the risk that does not depend on (k, v)."""
    return (L - 1) * zeta(0.0, lam)


@jax.jit
def population_excess_risk(o: Overlaps, lam, gamma, d, L):
    """``E[(T_lambda - y)^2] - eps^2 = R + (L-1) zeta(0, lambda)``: the "excess risk" the paper's figures plot
    (Theorem 1 plus the noise-token constant)."""
    return risk_R(o, lam, gamma, d, L) + noise_token_constant(lam, L)


def population_risk(o: Overlaps, lam, gamma, d, L, eps=0.0):
    """Full population risk ``E[(T_lambda(X; k, v) - y)^2]`` including the label noise ``eps^2``."""
    return population_excess_risk(o, lam, gamma, d, L) + eps**2


def risk_on_manifold(kappa, nu, lam, gamma, d, L):
    """Excess risk on M (theta = eta = rho = 0): ``gamma^2 - 2 gamma^2 nu erf(A) + gamma^2 zeta(lambda s kappa, lambda gamma)
    + (L-1) zeta(0, lambda)`` (Theorem 1 on M)."""
    zero = jnp.zeros_like(jnp.asarray(kappa, dtype=jnp.float64))
    return population_excess_risk(Overlaps(kappa, nu, zero, zero, zero), lam, gamma, d, L)


def oracle_excess_risk(lam, gamma, d, L):
    """Excess risk of the oracle (k, v) = (k*, v*) at scale lambda: :func:`risk_on_manifold` at kappa = nu = 1."""
    return risk_on_manifold(1.0, 1.0, lam, gamma, d, L)


def linear_baseline_risk(gamma, L, eps=0.0):
    """Risk of the best linear predictor ``sum_l beta_l . X_l`` with a uniformly random J0 (Prop. 3):
    ``eps^2 + gamma^2 - gamma^4 / (gamma^2 + L - 1) = eps^2 + gamma^2 (L - 1) / (gamma^2 + L - 1)``. The optimum is
    ``beta_l = gamma^2 / (gamma^2 + L - 1) v*`` for every l. At L = 1 the location is known and ``X_0 . v*`` is the
    signal: the risk is ``eps^2`` for every gamma (the second form, without the 0/0 of the first at gamma = 0)."""
    if L == 1:
        return eps**2 + 0.0 * gamma
    return eps**2 + gamma**2 * (L - 1) / (gamma**2 + (L - 1))


@functools.partial(jax.jit, static_argnames="n_grid")
def spurious_point(lam, gamma, d, L, n_grid: int = 4001):
    """The spurious stationary point of PGD from the sphere at scale lambda: ``k = v*`` (kappa = nu = rho = 0,
    eta = 1) with the best theta = v.k* (found on a grid of [-1, 1], then one Newton step), which imitates y
    through the near-linear part of erf. Returns ``(overlaps, excess_risk)``; the risk is below the oracle's for
    lambda below about 0.09 at d = 400, L = 10, gamma = sqrt(1/2), and above it beyond."""

    def risk(theta):
        z = jnp.zeros_like(theta)
        return population_excess_risk(Overlaps(z, z, theta, z + 1.0, z), lam, gamma, d, L)

    grid = jnp.linspace(-1.0, 1.0, n_grid)
    theta = grid[jnp.argmin(risk(grid))]
    g, h = jax.grad(risk)(theta), jax.grad(jax.grad(risk))(theta)
    theta = jnp.clip(jnp.where(h > 0, theta - g / jnp.where(h > 0, h, 1.0), theta), -1.0, 1.0)
    z = jnp.zeros_like(theta)
    return Overlaps(z, z, theta, z + 1.0, z), risk(theta)
