r"""Empirical risk minimisation for Duranthon et al. (2025): L2-penalised squared loss by L-BFGS in float64.

Objective (the paper's empirical risk, eq. (15), in the form the replica theory assumes: sums over samples, 1/2
factors, one penalty per vector)::

    L(k, v) = sum_mu 1/2 (y_mu - f(X_mu))^2 + lambda_k/2 |k|^2 + lambda_v/2 |v|^2,   f = sigma(Xk/sqrt(D))^T (Xv/sqrt(D))

minimised by SciPy's L-BFGS-B driving a jitted value-and-gradient (one compile per data shape and activation).
Starts: ``informed`` (k = c_nu k*, v = v*, the oracle of Prop. 4.2) or ``random`` (Gaussian k, v with
|k|^2 = |v|^2 = D). Overlaps: all seven inner products of (k, v) with (k*, v*) and each other, divided by D
(:class:`ERMOverlaps`). The test error is measured on a fresh sample drawn in R^D, and predicted from the seven
overlaps by :func:`erm_overlap_risk` (exact in law: given (k, v), the student and teacher
fields of a token are jointly Gaussian under the base measure and the tilt acts on chi* only).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, fields
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab._random import jax_normal, split
from attnlab.duranthon.activations import Activation
from attnlab.duranthon.data import (
    _flags,
    _length_probs,
    _sample_sequences,
    c_nu,
    check_model,
    length_law,
    sample_scores,
)
from attnlab.registry import mean_se

__all__ = ["ERMOverlaps", "erm_overlaps", "erm_objective", "ERMResult", "fit_erm", "informed_start", "random_start",
           "erm_overlap_risk", "ridge_solution", "fresh_test_error"]


@dataclass(frozen=True)
class ERMOverlaps:
    """The seven overlaps of a student (k, v) with the teacher (k*, v*), all divided by D. On the manifold M (the
    invariant set of the paper's gradient flow) m_kv = m_vk = q_kv = 0 and the first four suffice."""

    m_k: float  # k.k*/D
    q_k: float  # k.k/D
    m_v: float  # v.v*/D
    q_v: float  # v.v/D
    m_kv: float  # k.v*/D
    m_vk: float  # v.k*/D
    q_kv: float  # k.v/D

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The field names, in the order of :meth:`as_array`."""
        return tuple(f.name for f in fields(cls))

    def as_array(self) -> np.ndarray:
        """The overlaps as a float64 array, in the order of :meth:`names`."""
        return np.array([getattr(self, n) for n in self.names()], dtype=np.float64)


def erm_overlaps(k, v, k_star, v_star) -> ERMOverlaps:
    """The seven overlaps ``(k.k*, k.k, v.v*, v.v, k.v*, v.k*, k.v)/D`` of the student (k, v)."""
    k, v, k_star, v_star = (np.asarray(x, dtype=np.float64) for x in (k, v, k_star, v_star))
    D = k.shape[-1]
    vals = (k @ k_star, k @ k, v @ v_star, v @ v, k @ v_star, v @ k_star, k @ v)
    return ERMOverlaps(*(float(x) / D for x in vals))


def erm_objective(act: Activation, k, v, X, mask, y, lam_k, lam_v):
    """The penalised empirical risk ``sum_mu 1/2 (y_mu - f(X_mu))^2 + lambda_k/2 |k|^2 + lambda_v/2 |v|^2`` (the
    paper's eq. (15) with sums over samples and 1/2 factors)."""
    D = X.shape[-1]
    f = jnp.sum(act(X @ k / math.sqrt(D), mask) * (X @ v / math.sqrt(D)), axis=-1)
    return 0.5 * jnp.sum((y - f) ** 2) + 0.5 * lam_k * (k @ k) + 0.5 * lam_v * (v @ v)


@partial(programs.jit, static_argnames=("act",))
def _value_and_grad(act, w, X, mask, y, lam_k, lam_v, c):
    D = X.shape[-1]

    def obj(w):
        k, v = w[:D], w[D:]
        Dm = math.sqrt(D)
        f = jnp.sum(act(X @ k / Dm, mask, c) * (X @ v / Dm), axis=-1)
        return 0.5 * jnp.sum((y - f) ** 2) + 0.5 * lam_k * (k @ k) + 0.5 * lam_v * (v @ v)

    return jax.value_and_grad(obj)(w)


_LBFGS_STATUS = {0: "converged", 1: "max_iter"}  # SciPy's L-BFGS-B status codes; any other: "abnormal"


class ERMResult(NamedTuple):
    """Minimiser (k, v), final objective, training loss per sample ``(1/N) sum 1/2 (y - f)^2``, the final gradient
    norm (the solver's residual), L-BFGS iterations, and the convergence report: ``converged`` (SciPy's success
    flag) and ``status`` ("converged", "max_iter" or "abnormal": the line search failed, e.g. at round-off)."""

    k: np.ndarray
    v: np.ndarray
    objective: float
    train_loss: float
    grad_norm: float
    n_iter: int
    converged: bool
    status: str


def fit_erm(act: Activation, X, mask, y, lam_k: float, lam_v: float, k0, v0, gtol: float = 1e-8,
            max_iter: int = 5000) -> ERMResult:
    """Minimise the objective of :func:`erm_objective` from (k0, v0) by L-BFGS-B (float64, jitted value and gradient;
    stops at |grad| <= ``gtol`` or after ``max_iter`` iterations, reported in ``ERMResult.converged``/``status``;
    after a failed line search it restarts once from the point reached)."""
    import scipy.optimize

    if lam_k < 0 or lam_v < 0:
        raise ValueError(f"regularisations must be >= 0, got lambda_k={lam_k}, lambda_v={lam_v}")
    D = X.shape[-1]
    static = dataclasses.replace(act, c=0.0)
    # host arrays placed on the device as they are: jnp.asarray would compile (and, for w, run) a program per shape
    args = (*jax.device_put(tuple(np.asarray(a) for a in (X, mask, y))), float(lam_k), float(lam_v), act.c)

    def fg(w):
        val, g = _value_and_grad(static, jax.device_put(w), *args)
        return float(val), np.asarray(g, dtype=np.float64)

    w0 = np.concatenate([np.asarray(k0), np.asarray(v0)]).astype(np.float64)
    options = {"maxiter": max_iter, "gtol": gtol, "ftol": 0.0, "maxcor": 30}
    r = scipy.optimize.minimize(fg, w0, jac=True, method="L-BFGS-B", options=options)
    n_iter = int(r.nit)
    if _LBFGS_STATUS.get(int(r.status)) is None and n_iter < max_iter:
        # the line search failed (round-off in the curvature pairs near the minimum): one restart from the point
        # reached, with the memory cleared, decides whether |grad| <= gtol is reachable
        r = scipy.optimize.minimize(fg, r.x, jac=True, method="L-BFGS-B", options={**options,
                                                                                    "maxiter": max_iter - n_iter})
        n_iter += int(r.nit)
    k, v = r.x[:D], r.x[D:]
    val, g = fg(r.x)
    reg = 0.5 * lam_k * k @ k + 0.5 * lam_v * v @ v
    return ERMResult(k, v, val, (val - reg) / X.shape[0], float(np.linalg.norm(g)), n_iter, bool(r.success),
                     _LBFGS_STATUS.get(int(r.status), "abnormal"))


def informed_start(k_star, v_star, model: str, nu, scale: float | None = None):
    """The oracle start (k, v) = (c_nu k*, v*) of Prop. 4.2 (``scale`` replaces c_nu; finite for max-SLR nu = inf)."""
    c = c_nu(model, nu) if scale is None else scale
    if math.isinf(c):
        raise ValueError("informed start at nu = inf needs a finite key scale (pass scale=...)")
    return c * np.asarray(k_star), np.asarray(v_star)


def random_start(key, D: int):
    """A random start: Gaussian k, v rescaled to |k|^2 = |v|^2 = D."""
    kk, kv = split(key)
    k, v = np.asarray(jax_normal(kk, (D,))), np.asarray(jax_normal(kv, (D,)))
    return k * math.sqrt(D) / np.linalg.norm(k), v * math.sqrt(D) / np.linalg.norm(v)


def ridge_solution(X1, y, lam_v):
    """L = 1 reference: ``v = (X^T X/D + lambda_v I)^{-1} X^T y/sqrt(D)`` for tokens X1 (N, D)."""
    D = X1.shape[-1]
    return np.linalg.solve(X1.T @ X1 / D + lam_v * np.eye(D), X1.T @ y / math.sqrt(D))


def erm_overlap_risk(key, act: Activation, model: str, nu, L, o: ERMOverlaps, n: int, noise_std: float = 0.0):
    """Test error ``E[(y - f)^2]`` of a student with overlaps ``o`` (off M allowed), by Monte Carlo: (mean, SE).

    Per token, ``chi = m_k chi* + m_kv zeta* + r_1`` and ``z = m_vk chi* + m_v zeta* + r_2`` with (r_1, r_2) Gaussian
    of covariance ``[[q_k - m_k^2 - m_kv^2, q_kv - m_k m_vk - m_kv m_v], [., q_v - m_vk^2 - m_v^2]]``."""
    c11 = o.q_k - o.m_k**2 - o.m_kv**2
    c12 = o.q_kv - o.m_k * o.m_vk - o.m_kv * o.m_v
    c22 = o.q_v - o.m_vk**2 - o.m_v**2
    C = np.array([[c11, c12], [c12, c22]])
    w, U = np.linalg.eigh(C)
    if w.min() < -1e-9 * max(1.0, abs(w).max()):
        raise ValueError(f"overlaps are not a valid Gram matrix (residual covariance eigenvalues {w})")
    root = U * np.sqrt(np.clip(w, 0.0, None))
    ks, kr = jax.random.split(key)
    s = sample_scores(ks, model, nu, L, n, noise_std)
    r = jax.random.normal(kr, s.chi.shape + (2,)) @ jnp.asarray(root).T
    chi = o.m_k * s.chi + o.m_kv * s.zeta + r[..., 0]
    z = jnp.where(s.mask, o.m_vk * s.chi + o.m_v * s.zeta + r[..., 1], 0.0)
    f = jnp.sum(act(chi, s.mask) * z, axis=-1)
    vals = (s.y - f) ** 2
    return mean_se(vals)


def fresh_test_error(key, act: Activation, k, v, k_star, v_star, model: str, nu, L, n: int, noise_std=0.0,
                     chunk: int = 2000):
    """Test error ``E[(y - f(X))^2]`` of the predictor (k, v) on a fresh set of ``n`` sequences drawn in R^D (in
    chunks of ``chunk`` sequences, one compiled loop over the chunks): (mean, SE)."""
    nu = check_model(model, nu)
    k, v, k_star, v_star = jax.device_put(tuple(np.asarray(x) for x in (k, v, k_star, v_star)))  # as jnp.asarray
    vals = _test_squared_errors(key, max(1, math.ceil(n / chunk)), act, k, v, k_star, v_star,
                                *_flags(model, nu), _length_probs(length_law(L)), int(chunk), noise_std)
    return mean_se(vals)


@partial(programs.jit, static_argnames=("n_chunks", "act", "chunk"))
def _test_squared_errors(key, n_chunks, act, k, v, k_star, v_star, is_spiked, nu_is_inf, nu, probs, chunk,
                         noise_std):
    """The squared errors of ``n_chunks`` chunks of ``chunk`` fresh sequences, chunk i from ``split(key)[i]``."""
    D = k_star.shape[-1]

    def one(key_i):
        b = _sample_sequences(key_i, k_star, v_star, is_spiked, nu_is_inf, nu, probs, chunk, noise_std)
        f = jnp.sum(act(b.X @ k / math.sqrt(D), b.mask) * (b.X @ v / math.sqrt(D)), axis=-1)
        return (b.y - f) ** 2

    return jax.lax.map(one, jax.random.split(key, n_chunks)).reshape(-1)
