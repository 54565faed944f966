r"""Derivatives of the replica fixed point with respect to the regularisation: the Jacobian of the map F, the
derivative of the fixed point by implicit differentiation, and the derivative of the test error.

The fixed point solves ``x* = F(x*, lambda)`` with x = (m_k, q_k, V_k, m_v, q_v, V_v) (the RS equations of
:mod:`attnlab.duranthon.replica`, the paper's eqs. (18)-(25) in the reconstruction used here). By the implicit
function theorem::

    dx*/dlambda = (I - dF/dx)^{-1} dF/dlambda                                                             (1)

F is the prior update applied to the hats, ``F(x, lambda) = P(hats(x), lambda)``, and only P depends on lambda::

    V_a = 1/(lambda_a + V_hat_a),   m_a = m_hat_a V_a,   q_a = (m_hat_a^2 + q_hat_a) V_a^2

so ``dF/dlambda_a = dP/dV_hat_a`` (the two enter as their sum) and ``dF/dx = dP/dhats . dhats/dx``. The hats are
alpha times sample means over the frozen samples (:func:`attnlab.duranthon.replica.fixed_point_map._reduce_hats`)::

    m_hat_a = alpha E[f^a . h*^a] + m_a V_hat_a,   q_hat_a = alpha E|f^a|^2,   V_hat_a = -alpha E[div_a]

with ``div_a = sum_l df^a_l/domega^a_l`` (the pointwise implicit derivative) or its Stein form ``sum_l f^a_l
xi^a_l / s_a``. Their derivatives with respect to x are taken per sample by forward-mode differentiation of the
channel integrands at the proximal point (:func:`attnlab.duranthon.replica.proximal._implicit_fields`), the proximal
point chi_hat(x) being differentiated implicitly: after polishing the stored minimiser to round-off, one Newton step
``chi_1 = chi_hat - H^{-1} grad J(chi_hat)`` from the (constant) minimiser has the value chi_hat and the derivative
``-H^{-1} d(grad J)/dx`` of the implicit function theorem, which is all that the integrands (functions of chi_hat
and x) need. The derivative is the pointwise one, exact for the frozen-sample map wherever no sample's global
minimiser switches between local minima under an infinitesimal change of x (almost every x; not at the
small-lambda points where the proximal problems are non-convex, see :class:`attnlab.duranthon.replica.MapValue`).

The test error at the fixed point is the risk on M, ``E = 1 - 2 m_v A(m_k, s_k) + q_v B(m_k, s_k)``
(:func:`attnlab.duranthon.population.overlap_risk`, on frozen samples), so
``dE/dlambda = grad E(m_k, q_k, m_v, q_v) . dx*/dlambda`` (:func:`risk_lambda_derivative`), with the gradient
from :func:`attnlab.duranthon.population.overlap_risk_gradient`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.duranthon.activations import Activation
from attnlab.duranthon.replica.blocks import _blocks, _pad, _scalars
from attnlab.duranthon.replica.fixed_point_map import prior_update
from attnlab.duranthon.replica.proximal import _implicit_fields, _objective
from attnlab.duranthon.replica.samples import FrozenSamples, _host

__all__ = ["MapJacobian", "map_jacobian", "prior_jacobian", "fixed_point_lambda_derivative",
           "risk_lambda_derivative"]

POLISH_STEPS = 2  # plain Newton steps that take the stored proximal points (within the outer tol) to round-off


def prior_jacobian(hats, lam_k: float, lam_v: float):
    """The derivatives of the prior update P (``V_a = 1/(lambda_a + V_hat_a)``, ``m_a = m_hat_a V_a``,
    ``q_a = (m_hat_a^2 + q_hat_a) V_a^2``): ``(dP/dhats (6, 6), dP/d(lambda_k, lambda_v) (6, 2))``. Per sector
    a (rows and columns ordered (m, q, V) and (m_hat, q_hat, V_hat))::

        dm/dm_hat = V,        dm/dV_hat = -m_hat V^2
        dq/dm_hat = 2 m_hat V^2,   dq/dq_hat = V^2,   dq/dV_hat = -2 (m_hat^2 + q_hat) V^3
        dV/dV_hat = -V^2,     d./dlambda_a = d./dV_hat_a
    """
    hats = np.asarray(hats, dtype=np.float64)
    D, B = np.zeros((6, 6)), np.zeros((6, 2))
    for j, lam in enumerate((lam_k, lam_v)):
        mh, qh, Vh = hats[3 * j:3 * j + 3]
        V = 1.0 / (lam + Vh)
        blk = np.array([[V, 0.0, -mh * V**2],
                        [2 * mh * V**2, V**2, -2 * (mh**2 + qh) * V**3],
                        [0.0, 0.0, -V**2]])
        D[3 * j:3 * j + 3, 3 * j:3 * j + 3] = blk
        B[3 * j:3 * j + 3, j] = blk[:, 2]
    return D, B


def _terms(act, theta, chi_s, zeta_s, xi_k, xi_v, y, mask, c, chi0, stein: bool):
    """One sample's contributions to the hats at the order ``theta`` (6,): ``(f^k . chi*, |f^k|^2, div_k,
    f^v . zeta*, |f^v|^2, div_v)``, with chi_hat(theta) differentiable by the implicit function theorem (module
    docstring); ``chi0`` is the sample's proximal point at (or within the outer tolerance of) theta."""
    m_k, q_k, V_k, m_v, q_v, V_v = (theta[i] for i in range(6))
    s_k, s_v = jnp.sqrt(q_k - m_k**2), jnp.sqrt(q_v - m_v**2)
    ok = m_k * chi_s + s_k * xi_k
    ov = jnp.where(mask, m_v * zeta_s + s_v * xi_v, 0.0)
    eye = jnp.eye(chi0.shape[0])
    mm = mask[:, None] & mask[None, :]

    def newton(x, ok, ov, V_k, V_v):
        J = lambda z: _objective(act, z, ok, ov, y, mask, V_k, V_v, c)  # noqa: E731
        g = jnp.where(mask, jax.grad(J)(x), 0.0)
        H = jnp.where(mm, jax.hessian(J)(x), eye)
        return x - jnp.linalg.solve(H, g)

    frozen = [jax.lax.stop_gradient(t) for t in (ok, ov, V_k, V_v)]
    x = chi0
    for _ in range(POLISH_STEPS):
        x = newton(x, *frozen)
    chi = newton(jax.lax.stop_gradient(x), ok, ov, V_k, V_v)  # value chi_hat, derivative -H^{-1} d(grad J)/dtheta
    fk, fv, _, dk, dv, _ = _implicit_fields(act, ok, ov, y, mask, V_k, V_v, c, chi)
    if stein:
        dk = jnp.sum(fk * xi_k) / s_k
        dv = jnp.sum(fv * jnp.where(mask, xi_v, 0.0)) / s_v
    return jnp.stack([jnp.sum(fk * chi_s), jnp.sum(fk**2), dk, jnp.sum(fv * zeta_s), jnp.sum(fv**2), dv])


@partial(jax.jit, static_argnames=("act", "stein"))
def _terms_block(act, theta, block, c, chi0, stein: bool):
    """Per-sample terms and their Jacobians with respect to theta over one block of samples: (n, 6), (n, 6, 6)."""

    def one(chi_s, zeta_s, xi_k, xi_v, y, mask, x0):
        def f(t):
            out = _terms(act, t, chi_s, zeta_s, xi_k, xi_v, y, mask, c, x0, stein)
            return out, out

        jac, val = jax.jacfwd(f, has_aux=True)(theta)
        return val, jac

    return jax.vmap(one)(*block, chi0)


class MapJacobian(NamedTuple):
    """The map at x and its derivatives: ``value`` F(x, lambda) (6,), ``dF_dx`` (6, 6), ``dF_dlam`` (6, 2) (columns
    lambda_k, lambda_v), ``hats`` (6,) and ``dhats_dx`` (6, 6)."""

    value: np.ndarray
    dF_dx: np.ndarray
    dF_dlam: np.ndarray
    hats: np.ndarray
    dhats_dx: np.ndarray


def map_jacobian(act: Activation, order, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, chi,
                 jacobian: str = "implicit") -> MapJacobian:
    r"""The fixed-point map F and its Jacobians with respect to the order parameters and to (lambda_k, lambda_v)
    at ``order`` (module docstring): ``dF/dx = dP/dhats . dhats/dx``, ``dF/dlambda_a = dP/dV_hat_a``
    (:func:`prior_jacobian`).

    ``chi`` (n, L_max): the samples' proximal points at ``order`` or at an order within the solver's tolerance of it
    (``ReplicaResult.chi`` or ``MapValue.chi``), polished here by Newton steps (the minima they sit in are kept: the
    derivative is that of the map that produced them). ``jacobian``: the V_hat estimator of the map, "implicit"
    (also for "unrolled", equal at converged proximal points) or "stein". Needs q_a > m_a^2 (s_a > 0)."""
    if jacobian not in ("implicit", "unrolled", "stein"):
        raise ValueError(f"jacobian must be 'implicit', 'unrolled' or 'stein', got {jacobian!r}")
    theta = np.asarray(order, dtype=np.float64)
    if not (theta[1] > theta[0] ** 2 and theta[4] > theta[3] ** 2 and theta[2] > 0 and theta[5] > 0):
        raise ValueError(f"the map's Jacobian needs q_a > m_a^2 and V_a > 0, got {tuple(theta)}")
    s = _host(samples)
    chi = np.asarray(chi, dtype=np.float64)
    act0 = dataclasses.replace(act, c=0.0)
    (c,) = _scalars(act.c)
    arrays = (s.chi, s.zeta, s.xi_k, s.xi_v, s.y, s.mask)
    n = chi.shape[0]
    vals, jacs = [], []
    for start, size in _blocks(n):
        p = _pad(np.arange(start, min(start + size, n)), size)
        v, j = _terms_block(act0, jnp.asarray(theta), tuple(a[p] for a in arrays), c, chi[p], jacobian == "stein")
        k = min(size, n - start)
        vals.append(np.asarray(v)[:k])
        jacs.append(np.asarray(j)[:k])
    t, dt = np.concatenate(vals), np.concatenate(jacs)
    mean, dmean = t.mean(axis=0), dt.mean(axis=0)
    hats = alpha * mean * np.array([1.0, 1.0, -1.0, 1.0, 1.0, -1.0])
    dhats = alpha * dmean * np.array([1.0, 1.0, -1.0, 1.0, 1.0, -1.0])[:, None]
    for mi, vi in ((0, 2), (3, 5)):  # m_hat_a += m_a V_hat_a
        hats[mi] += theta[mi] * hats[vi]
        dhats[mi] += theta[mi] * dhats[vi]
        dhats[mi, mi] += hats[vi]
    D, B = prior_jacobian(hats, lam_k, lam_v)
    return MapJacobian(prior_update(hats, lam_k, lam_v), D @ dhats, B, hats, dhats)


def fixed_point_lambda_derivative(act: Activation, order, alpha: float, lam_k: float, lam_v: float,
                                  samples: FrozenSamples, chi, jacobian: str = "implicit"):
    r"""Derivative of the fixed point x*(lambda) by the implicit function theorem, eq. (1) of the module docstring:
    ``dx*/dlambda = (I - dF/dx)^{-1} dF/dlambda`` at the fixed point ``order`` (with its proximal points ``chi``,
    see :func:`map_jacobian`). Returns ``(dx/dlambda_k, dx/dlambda_v, J)``: the first two (6,) each, their sum is
    the derivative along lambda_k = lambda_v = lambda; ``J`` the :class:`MapJacobian` (``J.value - order`` is the
    residual of the fixed point, whose size bounds the error of the linearisation)."""
    J = map_jacobian(act, order, alpha, lam_k, lam_v, samples, chi, jacobian)
    dx = np.linalg.solve(np.eye(6) - J.dF_dx, J.dF_dlam)
    return dx[:, 0], dx[:, 1], J


def risk_lambda_derivative(key, act: Activation, model: str, nu, L, order, alpha: float, lam: float,
                                 samples: FrozenSamples, chi, n_risk: int, jacobian: str = "implicit"):
    r"""``dE/dlambda`` along lambda_k = lambda_v = lambda at the fixed point ``order``: the gradient of the risk on
    M (:func:`attnlab.duranthon.population.overlap_risk_gradient`, frozen samples from ``key``, ``n_risk`` of them)
    dotted with ``dx*/dlambda`` (:func:`fixed_point_lambda_derivative`)::

        dE/dlambda = dE/dm_k dm_k/dlambda + dE/dq_k dq_k/dlambda + dE/dm_v dm_v/dlambda + dE/dq_v dq_v/dlambda

    Returns ``(E, dE/dlambda, dx*/dlambda)``."""
    from attnlab.duranthon.population import overlap_risk_gradient

    dk, dv, _ = fixed_point_lambda_derivative(act, order, alpha, lam, lam, samples, chi, jacobian)
    dx = dk + dv
    m_k, q_k, _, m_v, q_v, _ = (float(t) for t in order)
    E, g = overlap_risk_gradient(key, act, model, nu, L, m_k, q_k, m_v, q_v, n_risk)
    return E, float(g @ dx[[0, 1, 3, 4]]), dx
