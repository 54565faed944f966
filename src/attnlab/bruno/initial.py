r"""Initial laws of the paper's figures.

Variance convention: a component on S^1 is parameterised by its **wrapped-normal
variance** v; the heat kernel e^{tau Delta} delta_m (Delta = d^2/dtheta^2) is the wrapped normal of variance
v = 2 tau, so the heat time is tau = v / 2. On S^2 the heat-kernel component is parameterised by the heat time tau
directly (the law of e^{tau Delta} delta_m, Delta the Laplace-Beltrami operator), whose tangent variance per direction
is ~ 2 tau for small tau.

All samplers take an explicit PRNG key and return float64 arrays of unit vectors, shape (n, d).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs

__all__ = [
    "uniform_sphere",
    "wrapped_normal_mixture",
    "latitude_uniform_azimuth_mixture",
    "heat_kernel_s2_cos_density",
    "heat_kernel_mixture_s2",
    "from_array",
    "angles_to_s1",
]


def _check_n(n: int):
    if n < 1:
        raise ValueError(f"need at least one token (got N = {n})")


def _mixture(means, weights, variances):
    means = np.atleast_1d(np.asarray(means, dtype=float))
    weights = np.ones_like(means) / means.size if weights is None else np.atleast_1d(np.asarray(weights, float))
    variances = np.broadcast_to(np.asarray(variances, dtype=float), means.shape)
    if weights.shape != means.shape or np.any(weights < 0) or not np.isclose(weights.sum(), 1.0):
        raise ValueError("mixture weights must be nonnegative, sum to 1 and match the means")
    if np.any(variances < 0):
        raise ValueError("mixture variances must be >= 0")
    return means, weights, variances


def uniform_sphere(key, n: int, d: int):
    """n i.i.d. uniform points on S^{d-1}: x = g / |g|, g ~ N(0, I_d)."""
    _check_n(n)
    if d < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {d})")
    return _uniform_sphere(key, n, d)


@partial(programs.jit, static_argnums=(1, 2))
def _uniform_sphere(key, n: int, d: int):
    g = jax.random.normal(key, (n, d), dtype=jnp.float64)
    return g / jnp.linalg.norm(g, axis=1, keepdims=True)


@programs.jit
def angles_to_s1(theta):
    """Angles (n,) -> points (n, 2) on S^1."""
    return jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=-1)


@partial(programs.jit, static_argnums=1)
def _wn_angles(key, n, means, weights, variances):
    kc, kz = jax.random.split(key)
    comp = jax.random.choice(kc, means.size, (n,), p=jnp.asarray(weights))
    z = jax.random.normal(kz, (n,), dtype=jnp.float64)
    return jnp.mod(jnp.asarray(means)[comp] + jnp.sqrt(jnp.asarray(variances))[comp] * z, 2 * jnp.pi)


def wrapped_normal_mixture(key, n: int, means, weights=None, variances=0.04):
    """n points on S^1 from sum_k w_k WN(m_k, v_k), v_k the wrapped-normal variance (heat time v_k / 2)."""
    _check_n(n)
    means, weights, variances = _mixture(means, weights, variances)
    return angles_to_s1(_wn_angles(key, n, means, weights, variances))


def latitude_uniform_azimuth_mixture(key, n: int, means, weights=None, variances=0.04):
    """Fig. 2 law on S^2: latitude psi ~ U[-pi/2, pi/2] (uniform in angle, not area), azimuth ~ WN mixture.

    x = (cos psi cos theta, cos psi sin theta, sin psi).
    """
    _check_n(n)
    return _latitude_azimuth(key, n, *_mixture(means, weights, variances))


@partial(programs.jit, static_argnums=1)
def _latitude_azimuth(key, n, means, weights, variances):
    kp, kt = jax.random.split(key)
    psi = jax.random.uniform(kp, (n,), dtype=jnp.float64, minval=-jnp.pi / 2, maxval=jnp.pi / 2)
    theta = _wn_angles(kt, n, means, weights, variances)
    return jnp.stack([jnp.cos(psi) * jnp.cos(theta), jnp.cos(psi) * jnp.sin(theta), jnp.sin(psi)], axis=-1)


def heat_kernel_s2_cos_density(u, tau: float, lmax: int | None = None):
    """Density of u = <x, m> for x ~ e^{tau Delta} delta_m on S^2, on [-1, 1]:

        p(u) = sum_l (2l + 1) / 2 * exp(-l (l + 1) tau) P_l(u)      (Legendre series; integrates to 1).
    """
    from scipy.special import eval_legendre  # here, not with the paper: only the S^2 heat draws need it

    if lmax is None:
        lmax = int(12 / np.sqrt(max(tau, 1e-6))) + 20
    u = np.asarray(u, dtype=float)
    ls = np.arange(lmax + 1)
    coef = (2 * ls + 1) / 2 * np.exp(-ls * (ls + 1) * tau)
    return np.sum(coef[:, None] * eval_legendre(ls[:, None], u.reshape(1, -1)), axis=0).reshape(u.shape)


def heat_kernel_mixture_s2(key, n: int, means, weights=None, taus=0.02, grid: int = 4001):
    """n points on S^2 from sum_k w_k e^{tau_k Delta} delta_{m_k} (m_k unit 3-vectors), by inverse CDF in <x, m>."""
    _check_n(n)
    means = np.asarray(means, dtype=float).reshape(-1, 3)
    means = means / np.linalg.norm(means, axis=1, keepdims=True)
    _, weights, taus = _mixture(np.arange(len(means)), weights, taus)
    kc, ku, kp = jax.random.split(key, 3)
    comp = np.asarray(jax.random.choice(kc, len(means), (n,), p=jnp.asarray(weights)))
    r = np.asarray(jax.random.uniform(ku, (n,), dtype=jnp.float64))
    phi = np.asarray(jax.random.uniform(kp, (n,), dtype=jnp.float64, maxval=2 * np.pi))
    u_grid = np.linspace(-1, 1, grid)
    u = np.empty(n)
    for k in range(len(means)):
        p = np.maximum(heat_kernel_s2_cos_density(u_grid, taus[k]), 0)
        cdf = np.concatenate([[0], np.cumsum((p[1:] + p[:-1]) / 2 * np.diff(u_grid))])
        sel = comp == k
        u[sel] = np.interp(r[sel] * cdf[-1], cdf, u_grid)
    out = np.empty((n, 3))
    for k in range(len(means)):
        sel = comp == k
        m = means[k]
        a = np.array([1.0, 0, 0]) if abs(m[0]) < 0.9 else np.array([0, 1.0, 0])
        e1 = a - (a @ m) * m
        e1 /= np.linalg.norm(e1)
        e2 = np.cross(m, e1)
        s = np.sqrt(np.clip(1 - u[sel] ** 2, 0, None))
        out[sel] = u[sel, None] * m + s[:, None] * (np.cos(phi[sel])[:, None] * e1 + np.sin(phi[sel])[:, None] * e2)
    return jnp.asarray(out)


def from_array(x):
    """A user array (N, d) of nonzero rows, renormalised onto the sphere; ValueError on bad shapes."""
    x = jnp.asarray(x, dtype=jnp.float64)
    if x.ndim != 2:
        raise ValueError(f"tokens must have shape (N, d) (got shape {x.shape})")
    _check_n(x.shape[0])
    if x.shape[1] < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {x.shape[1]})")
    norms = jnp.linalg.norm(x, axis=1, keepdims=True)
    if bool(jnp.any(norms == 0)):
        raise ValueError("tokens must be nonzero to be projected onto the sphere")
    return x / norms
