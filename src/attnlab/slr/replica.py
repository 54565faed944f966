r"""Replica-symmetric fixed point for ERM on the manifold M (Duranthon et al.; spec 4.2, a RECONSTRUCTION [I]).

Six order parameters ``(m_a, q_a, V_a)``, a in {k, v}, and their hats. Per sample (frozen Monte Carlo draws, so the
iteration map is deterministic)::

    omega^k = m_k chi* + s_k xi^k,   omega^v = m_v zeta* + s_v xi^v,   s_a = sqrt(q_a - m_a^2)
    chi_hat = argmin_chi  |chi - omega^k|^2/(2 V_k) + (y - sigma(chi)^T omega^v)^2 / (2 (1 + V_v |sigma(chi)|^2))
    r = (y - sigma_hat^T omega^v)/(1 + V_v |sigma_hat|^2),   f^v = sigma_hat r,   f^k = (chi_hat - omega^k)/V_k
    q_hat_a = alpha E|f^a|^2,  V_hat_a = -alpha E[sum_l df^a_l/domega^a_l],  m_hat_a = alpha E[f^a . h*^a] + m_a V_hat_a
    V_a = 1/(lambda_a + V_hat_a),   m_a = m_hat_a V_a,   q_a = (m_hat_a^2 + q_hat_a) V_a^2

The proximal problem is solved by a fixed number of modified-Newton steps (Hessian eigenvalues floored at
``1/(2 V_k)``) started at omega^k, and the same-token Jacobian d f / d omega (the V_hat integrand) by the implicit
function theorem at the proximal point (default) or by forward-mode differentiation through the Newton steps
("unrolled"); neither divides by s_a, unlike the Stein form. The test error at the fixed point is the spec 3.2
formula evaluated by :func:`attnlab.slr.population.overlap_risk` on fresh samples.

Status of the reconstruction. Tested: L = 1 reproduces the classical ridge equations (5 SE over frozen-sample
seeds). Measured once (not a test: too slow for the suite), spec's acceptance point, softmax, spiked-SLR nu = 5, L = 2,
alpha = 4, lambda_k = lambda_v = 1, informed start:

| | m_k | q_k | m_v | q_v | train loss/sample |
|---|---|---|---|---|---|
| replica, 3 frozen sets of 3000 samples (mean) | 0.443 | 0.261 | 0.779 | 0.652 | 0.0801 |
| (spread between the 3 sets) | 0.432-0.450 | 0.253-0.265 | 0.770-0.784 | 0.638-0.660 | 0.0799-0.0805 |
| L-BFGS ERM, D = 1000, N = 4000, 3 seeds (mean +- SE) | 0.444(2) | 0.260(2) | 0.787(4) | 0.662(5) | 0.0785(7) |
| L-BFGS ERM, D = 250, N = 1000, 4 seeds | 0.453(4) | 0.272(4) | 0.796(7) | 0.679(9) | 0.0793(13) |

so theory and simulation agree within about 2 combined standard errors on every overlap at this point. Low nu / low
lambda (where the paper reports disagreement) has not been explored yet.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.slr.activations import Activation
from attnlab.slr.duranthon_data import check_model, sample_scores

__all__ = ["Order", "FrozenSamples", "frozen_samples", "replica_map", "ReplicaResult", "solve_replica",
           "ridge_fixed_point"]


class Order(NamedTuple):
    """The six order parameters on M."""

    m_k: float
    q_k: float
    V_k: float
    m_v: float
    q_v: float
    V_v: float


class FrozenSamples(NamedTuple):
    chi: jax.Array
    zeta: jax.Array
    y: jax.Array
    mask: jax.Array
    xi_k: jax.Array
    xi_v: jax.Array


def frozen_samples(key, model: str, nu, L, n: int, noise_std: float = 0.0) -> FrozenSamples:
    """Teacher fields, labels and the two Gaussian noises of the channel, drawn once (common random numbers)."""
    check_model(model, nu)
    ks, k1, k2 = jax.random.split(key, 3)
    s = sample_scores(ks, model, nu, L, n, noise_std)
    return FrozenSamples(s.chi, s.zeta, s.y, s.mask, jax.random.normal(k1, s.chi.shape),
                         jax.random.normal(k2, s.chi.shape))


def _prox_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton):
    """chi_hat for one sample by floored-Hessian Newton steps from omega^k."""

    def J(chi):
        w = act(chi, mask, c)
        res = y - w @ omega_v
        return (jnp.sum(jnp.where(mask, (chi - omega_k) ** 2, 0.0)) / (2 * V_k)
                + res**2 / (2 * (1 + V_v * (w @ w))))

    def step(chi, _):
        g = jnp.where(mask, jax.grad(J)(chi), 0.0)
        H = jax.hessian(J)(chi)
        H = jnp.where(mask[:, None] & mask[None, :], H, jnp.eye(chi.shape[0]))
        lam, U = jnp.linalg.eigh(H)
        lam = jnp.maximum(jnp.abs(lam), 0.5 / V_k)
        return chi - U @ ((U.T @ g) / lam), None

    chi, _ = jax.lax.scan(step, omega_k, None, length=n_newton)
    return chi


def _channel_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton):
    chi = _prox_one(act, omega_k, omega_v, y, mask, V_k, V_v, c, n_newton)
    w = act(chi, mask, c)
    r = (y - w @ omega_v) / (1 + V_v * (w @ w))
    f_k = jnp.where(mask, (chi - omega_k) / V_k, 0.0)
    f_v = w * r
    return f_k, f_v, r


@partial(jax.jit, static_argnames=("act", "n_newton", "jacobian"))
def _hats(act, order, alpha, samples: FrozenSamples, c, n_newton: int = 30, jacobian: str = "implicit"):
    m_k, q_k, V_k, m_v, q_v, V_v = order
    s_k = jnp.sqrt(jnp.maximum(q_k - m_k**2, 0.0))
    s_v = jnp.sqrt(jnp.maximum(q_v - m_v**2, 0.0))
    om_k = m_k * samples.chi + s_k * samples.xi_k
    om_v = jnp.where(samples.mask, m_v * samples.zeta + s_v * samples.xi_v, 0.0)

    def unrolled(ok, ov, y, mask):
        fk, fv, r = _channel_one(act, ok, ov, y, mask, V_k, V_v, c, n_newton)
        dfk = jnp.diag(jax.jacfwd(lambda o: _channel_one(act, o, ov, y, mask, V_k, V_v, c, n_newton)[0])(ok))
        dfv = jnp.diag(jax.jacfwd(lambda o: _channel_one(act, ok, o, y, mask, V_k, V_v, c, n_newton)[1])(ov))
        return fk, fv, r, jnp.sum(jnp.where(mask, dfk, 0.0)), jnp.sum(jnp.where(mask, dfv, 0.0))

    def implicit(ok, ov, y, mask):
        """Implicit function theorem at chi_hat: d chi_hat/d omega = -H^{-1} d(grad J)/d omega."""
        chi = jax.lax.stop_gradient(_prox_one(act, ok, ov, y, mask, V_k, V_v, c, n_newton))
        mm = mask[:, None] & mask[None, :]

        def grad_J(x, o_k, o_v):
            def J(x):
                w = act(x, mask, c)
                res = y - w @ o_v
                return (jnp.sum(jnp.where(mask, (x - o_k) ** 2, 0.0)) / (2 * V_k)
                        + res**2 / (2 * (1 + V_v * (w @ w))))
            return jnp.where(mask, jax.grad(J)(x), 0.0)

        def f_v(x, o_v):
            w = act(x, mask, c)
            return w * (y - w @ o_v) / (1 + V_v * (w @ w))

        H = jnp.where(mm, jax.jacfwd(grad_J, 0)(chi, ok, ov), jnp.eye(chi.shape[0]))
        dchi_k = -jnp.linalg.solve(H, jnp.where(mm, jax.jacfwd(grad_J, 1)(chi, ok, ov), 0.0))
        dchi_v = -jnp.linalg.solve(H, jnp.where(mm, jax.jacfwd(grad_J, 2)(chi, ok, ov), 0.0))
        dfk = (jnp.diag(dchi_k) - 1.0) / V_k
        dfv = jnp.diag(jax.jacfwd(f_v, 0)(chi, ov) @ dchi_v + jax.jacfwd(f_v, 1)(chi, ov))
        w = act(chi, mask, c)
        r = (y - w @ ov) / (1 + V_v * (w @ w))
        fk = jnp.where(mask, (chi - ok) / V_k, 0.0)
        return fk, w * r, r, jnp.sum(jnp.where(mask, dfk, 0.0)), jnp.sum(jnp.where(mask, dfv, 0.0))

    one = implicit if jacobian == "implicit" else unrolled

    fk, fv, r, dk, dv = jax.vmap(one)(om_k, om_v, samples.y, samples.mask)
    Vh_k, Vh_v = -alpha * jnp.mean(dk), -alpha * jnp.mean(dv)
    qh_k = alpha * jnp.mean(jnp.sum(fk**2, -1))
    qh_v = alpha * jnp.mean(jnp.sum(fv**2, -1))
    mh_k = alpha * jnp.mean(jnp.sum(fk * samples.chi, -1)) + m_k * Vh_k
    mh_v = alpha * jnp.mean(jnp.sum(fv * samples.zeta, -1)) + m_v * Vh_v
    return jnp.stack([mh_k, qh_k, Vh_k, mh_v, qh_v, Vh_v]), 0.5 * jnp.mean(r**2)


def replica_map(act: Activation, order, alpha, lam_k, lam_v, samples: FrozenSamples, n_newton: int = 30,
                jacobian: str = "implicit"):
    """One application of the fixed-point map: order -> (new order, training loss per sample E[r^2/2]).
    ``jacobian``: "implicit" (implicit function theorem at the proximal point) or "unrolled" (forward-mode through
    the Newton steps); they agree when the Newton steps have converged."""
    if jacobian not in ("implicit", "unrolled"):
        raise ValueError(f"jacobian must be 'implicit' or 'unrolled', got {jacobian!r}")
    hats, train = _hats(dataclasses.replace(act, c=0.0), jnp.asarray(order, dtype=jnp.float64), alpha, samples,
                        act.c, n_newton, jacobian)
    mh_k, qh_k, Vh_k, mh_v, qh_v, Vh_v = (float(x) for x in hats)
    V_k, V_v = 1.0 / (lam_k + Vh_k), 1.0 / (lam_v + Vh_v)
    new = (mh_k * V_k, (mh_k**2 + qh_k) * V_k**2, V_k, mh_v * V_v, (mh_v**2 + qh_v) * V_v**2, V_v)
    return np.asarray(new), float(train)


class ReplicaResult(NamedTuple):
    """Fixed point, training loss per sample, convergence report (residual, iterations, converged)."""

    order: Order
    train_loss: float
    residual: float
    n_iter: int
    converged: bool


def solve_replica(act: Activation, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                  damping: float = 0.5, tol: float = 1e-8, max_iter: int = 500, n_newton: int = 30) -> ReplicaResult:
    """Damped iteration ``x <- damping x + (1 - damping) F(x)`` from ``init`` (six numbers) until the max-abs change
    of the order parameters is below ``tol``."""
    if alpha <= 0:
        raise ValueError(f"sample ratio alpha must be > 0, got {alpha}")
    if lam_k <= 0 or lam_v <= 0:
        raise ValueError(f"the replica solver needs lambda_k, lambda_v > 0, got {lam_k}, {lam_v}")
    if not 0 <= damping < 1:
        raise ValueError(f"damping must lie in [0, 1), got {damping}")
    x = np.asarray(init, dtype=np.float64)
    res, train = math.inf, math.nan
    for it in range(1, max_iter + 1):
        fx, train = replica_map(act, x, alpha, lam_k, lam_v, samples, n_newton)
        res = float(np.max(np.abs(fx - x)))
        if not np.all(np.isfinite(fx)):
            return ReplicaResult(Order(*x), train, math.inf, it, False)
        x = damping * x + (1 - damping) * fx
        if res < tol:
            return ReplicaResult(Order(*fx), train, res, it, True)
    return ReplicaResult(Order(*x), train, res, max_iter, False)


def ridge_fixed_point(alpha: float, lam: float, noise_std: float = 0.0):
    """Classical ridge replica equations (L = 1 reference): V = 1/(lam + alpha/(1+V)), m = alpha V/(1+V),
    q = (m_hat^2 + q_hat) V^2 with q_hat = alpha (1 + noise^2 - 2m + q)/(1+V)^2 (solved in closed form for q).
    Returns (m, q, V)."""
    # V solves lam V^2 + (lam + alpha - 1) V - 1 = 0 (positive root)
    b = lam + alpha - 1.0
    V = (-b + math.sqrt(b * b + 4 * lam)) / (2 * lam)
    g = alpha / (1 + V)
    m = g * V
    # q = m^2 + alpha V^2 (1 + noise^2 - 2m + q)/(1+V)^2  ->  q (1 - a) = m^2 + a (1 + noise^2 - 2m)
    a = alpha * V**2 / (1 + V) ** 2
    q = (m * m + a * (1 + noise_std**2 - 2 * m)) / (1 - a)
    return m, q, V
