"""The domains of the functions that :mod:`attnlab.duranthon` exports: one check per function, of the same name, run
on the arguments before the function (:func:`attnlab._validate.public`); a one-line ValueError names the first
argument outside the domain.

Duranthon et al.'s model: ``model`` is ``"spiked"`` or ``"max"``, nu >= 0 (inf for max-SLR only), ``L`` a length law
(:func:`attnlab.duranthon.data.length_law`), a label noise ``noise_std >= 0``, Monte Carlo sizes integers >= 2 (a
standard error needs two draws), regularisations lambda >= 0 (> 0 for the replica fixed point, whose ridge prior
needs ``lambda + V_hat > 0`` from its start), sample ratios alpha > 0, overlaps with ``q >= m^2`` (Cauchy-Schwarz)
and tokens, masks, labels and vectors of matching shapes.
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.duranthon.activations import Activation
from attnlab.duranthon.data import check_model, length_law
from attnlab.duranthon.erm import ERMOverlaps
from attnlab.duranthon.replica.samples import FrozenSamples

__all__ = ["activation", "sample_teacher_sqrtD", "sample_scores", "sample_sequences", "bayes_risk_quad",
           "bayes_risk_mc", "bayes_risk_is", "linear_risk", "overlap_risk", "overlap_risk_gradient",
           "optimal_key_scale", "fit_erm", "erm_overlaps", "erm_overlap_risk", "fresh_test_error", "frozen_samples",
           "solve_replica", "continue_in_alpha", "continue_in_lambda", "replica_curve", "at_eigenvalue",
           "solve_bayes_optimal", "bayes_optimal_test_error", "fixed_point_lambda_derivative",
           "risk_lambda_derivative"]


def _law(*, model, nu, L, noise_std=0.0, n=None, minimum=2) -> None:
    """The data law (model, nu, L, noise_std) and a Monte Carlo size ``n`` (None: none)."""
    check_model(model, nu)
    length_law(L)
    check.nonnegative("noise_std", noise_std, scalar=True)
    if n is not None:
        check.count("n", n, minimum=minimum)


def _act(act) -> None:
    if not isinstance(act, Activation):
        raise ValueError(f"act must be an attention-weight function made by activation() or custom_activation(); "
                         f"got {act!r}")


def _four_overlaps(m_k, q_k, m_v, q_v) -> None:
    """``q_a >= m_a^2`` (Cauchy-Schwarz: ``q_a`` is the squared norm, ``m_a`` the overlap, both divided by D)."""
    for name, x in (("m_k", m_k), ("q_k", q_k), ("m_v", m_v), ("q_v", q_v)):
        check.finite_float(name, x)
    for m, q, a in ((m_k, q_k, "k"), (m_v, q_v, "v")):
        if q < m**2 - 1e-12:
            raise ValueError(f"q_{a} must be at least m_{a}^2 (Cauchy-Schwarz); got m_{a} = {m:g}, q_{a} = {q:g}")


def _samples(samples) -> None:
    if not isinstance(samples, FrozenSamples):
        raise ValueError(f"samples must be an attnlab.duranthon.FrozenSamples (from frozen_samples); got "
                         f"{type(samples).__name__}")


def _order(name, order, *, physical: bool = True) -> None:
    """Six finite order parameters ``(m_k, q_k, V_k, m_v, q_v, V_v)`` with ``V_a > 0`` and, when ``physical``,
    ``q_a >= m_a^2`` (a solver's start may violate it: the solver projects it onto ``q_a = m_a^2``)."""
    try:
        values = [float(x) for x in np.ravel(np.asarray(order, dtype=np.float64))]
    except (TypeError, ValueError):
        values = []
    if len(values) != 6:
        raise ValueError(f"{name} must be six order parameters (m_k, q_k, V_k, m_v, q_v, V_v); got {order!r}")
    m_k, q_k, V_k, m_v, q_v, V_v = (check.finite_float(f"{name}[{i}]", x) for i, x in enumerate(values))
    if physical:
        _four_overlaps(m_k, q_k, m_v, q_v)
    check.positive(f"{name} V_k", V_k, scalar=True)
    check.positive(f"{name} V_v", V_v, scalar=True)


def _ridge(alpha, lam_k, lam_v) -> None:
    check.positive("alpha", alpha, scalar=True)
    check.positive("lam_k", lam_k, scalar=True)
    check.positive("lam_v", lam_v, scalar=True)


def activation(*, c, **_) -> None:
    check.real("c", c, scalar=True)


def sample_teacher_sqrtD(**_) -> None:
    """Checked by :func:`attnlab.duranthon.data.sample_teacher_sqrtD` itself."""


def sample_scores(**_) -> None:
    """Checked by :func:`attnlab.duranthon.data.sample_scores` itself (it also serves every sampler here)."""


def sample_sequences(**_) -> None:
    """Checked by :func:`attnlab.duranthon.data.sample_sequences` itself."""


def bayes_risk_quad(*, model, nu, L, noise_std, **_) -> None:
    _law(model=model, nu=nu, L=L, noise_std=noise_std)


def bayes_risk_mc(*, model, nu, L, n, noise_std, **_) -> None:
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)


def bayes_risk_is(*, nu, L, n, noise_std, defensive, **_) -> None:
    _law(model="spiked", nu=nu, L=L, noise_std=noise_std, n=n)
    check.real("defensive", defensive, lo=0.0, hi=1.0, lo_open=True, hi_open=True, scalar=True)


def linear_risk(*, model, nu, L, noise_std, n, **_) -> None:
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)


def overlap_risk(*, act, model, nu, L, m_k, q_k, m_v, q_v, n, noise_std, **_) -> None:
    _act(act)
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)
    _four_overlaps(m_k, q_k, m_v, q_v)


def overlap_risk_gradient(*, act, model, nu, L, m_k, q_k, m_v, q_v, n, noise_std, **_) -> None:
    overlap_risk(act=act, model=model, nu=nu, L=L, m_k=m_k, q_k=q_k, m_v=m_v, q_v=q_v, n=n, noise_std=noise_std)
    if not q_k > m_k**2:
        raise ValueError(f"the gradient needs q_k > m_k^2 (s_k = sqrt(q_k - m_k^2) > 0); got m_k = {m_k:g}, "
                         f"q_k = {q_k:g}")


def optimal_key_scale(*, act, model, nu, L, n, noise_std, kappa_max, **_) -> None:
    _act(act)
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)
    check.positive("kappa_max", kappa_max, scalar=True)


def fit_erm(*, act, X, mask, y, lam_k, lam_v, k0, v0, gtol, max_iter, **_) -> None:
    _act(act)
    N, L, D = check.shape("X", X, (None, None, None))
    if min(N, L, D) < 1:
        raise ValueError(f"X must hold at least one sequence of one token; got shape {(N, L, D)}")
    check.shape("mask", mask, (N, L))
    if np.asarray(mask).dtype != bool:
        raise ValueError(f"mask must be a boolean array (True on valid tokens); got dtype {np.asarray(mask).dtype}")
    check.shape("y", y, (N,))
    check.shape("k0", k0, (D,))
    check.shape("v0", v0, (D,))
    for name, x in (("X", X), ("y", y), ("k0", k0), ("v0", v0)):
        check.real(name, x, sequence=True)
    check.nonnegative("lam_k", lam_k, scalar=True)
    check.nonnegative("lam_v", lam_v, scalar=True)
    check.positive("gtol", gtol, scalar=True)
    check.count("max_iter", max_iter)


def erm_overlaps(*, k, v, k_star, v_star, **_) -> None:
    D = check.shape("k_star", k_star, (None,))[0]
    for name, x in (("k", k), ("v", v), ("v_star", v_star)):
        check.shape(name, x, (D,))


def erm_overlap_risk(*, act, model, nu, L, o, n, noise_std, **_) -> None:
    _act(act)
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)
    if not isinstance(o, ERMOverlaps):
        raise ValueError(f"o must be an attnlab.duranthon.ERMOverlaps; got {type(o).__name__}")
    for name in o.names():
        check.finite_float(f"o.{name}", getattr(o, name))


def fresh_test_error(*, act, k, v, k_star, v_star, model, nu, L, n, noise_std, chunk, **_) -> None:
    _act(act)
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)
    erm_overlaps(k=k, v=v, k_star=k_star, v_star=v_star)
    check.count("chunk", chunk)


def frozen_samples(*, model, nu, L, n, noise_std, **_) -> None:
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)


def solve_replica(*, act, alpha, lam_k, lam_v, samples, init, damping, tol, max_iter, n_newton, memory, **_) -> None:
    _act(act)
    _ridge(alpha, lam_k, lam_v)
    _samples(samples)
    _order("init", init, physical=False)
    check.real("damping", damping, lo=0.0, hi=1.0, hi_open=True, scalar=True)
    check.positive("tol", tol, scalar=True)
    check.count("max_iter", max_iter)
    check.count("n_newton", n_newton)
    check.count("memory", memory)


def continue_in_alpha(*, act, alphas, lam_k, lam_v, samples, init, **_) -> None:
    _act(act)
    values = np.asarray(check.real("alphas", alphas, sequence=True), np.float64)
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"alphas must be a nonempty sequence of sample ratios; got {alphas!r}")
    for a in values:
        _ridge(a, lam_k, lam_v)
    _samples(samples)
    _order("init", init, physical=False)


def continue_in_lambda(*, act, alpha, lam_k, lam_v, samples, init, lam_start, per_decade, **_) -> None:
    _act(act)
    _ridge(alpha, lam_k, lam_v)
    _samples(samples)
    _order("init", init, physical=False)
    check.positive("lam_start", lam_start, scalar=True)
    check.count("per_decade", per_decade)


def replica_curve(*, act, alphas, lam_k, lam_v, samples, starts, lam_start, per_decade, **_) -> None:
    if not isinstance(starts, dict) or not starts:
        raise ValueError(f"starts must be a nonempty dict of named starts (name -> six order parameters); got "
                         f"{starts!r}")
    for name, init in starts.items():
        continue_in_alpha(act=act, alphas=alphas, lam_k=lam_k, lam_v=lam_v, samples=samples, init=init)
        _order(f"starts[{name!r}]", init, physical=False)
    check.positive("lam_start", lam_start, scalar=True)
    check.count("per_decade", per_decade)


def at_eigenvalue(*, P, V_k, V_v, **_) -> None:
    check.shape("P", P, (2, 2, 2, 2))  # a non-finite P gives NaN, as documented
    check.positive("V_k", V_k, scalar=True)
    check.positive("V_v", V_v, scalar=True)


def solve_bayes_optimal(*, alpha, nu, samples, noise_std, init, damping, tol, max_iter, model, **_) -> None:
    check.positive("alpha", alpha, scalar=True)
    check_model(model, nu)
    _samples(samples)
    check.nonnegative("noise_std", noise_std, scalar=True)
    check.shape("init", init, (2,))
    check.real("init", init, sequence=True)  # projected onto [0, 1) by the solver
    check.real("damping", damping, lo=0.0, hi=1.0, hi_open=True, scalar=True)
    check.positive("tol", tol, scalar=True)
    check.count("max_iter", max_iter)


def bayes_optimal_test_error(*, nu, L, q_k, q_v, n, noise_std, model, **_) -> None:
    _law(model=model, nu=nu, L=L, noise_std=noise_std, n=n)
    check.real("q_k", q_k, lo=0.0, hi=1.0, scalar=True)
    check.real("q_v", q_v, lo=0.0, hi=1.0, scalar=True)


def fixed_point_lambda_derivative(*, act, order, alpha, lam_k, lam_v, samples, **_) -> None:
    _act(act)
    _order("order", order)
    _ridge(alpha, lam_k, lam_v)
    _samples(samples)


def risk_lambda_derivative(*, act, model, nu, L, order, alpha, lam, samples, n_risk, **_) -> None:
    _law(model=model, nu=nu, L=L, n=n_risk)
    fixed_point_lambda_derivative(act=act, order=order, alpha=alpha, lam_k=lam, lam_v=lam, samples=samples)
    m_k, q_k = float(np.ravel(order)[0]), float(np.ravel(order)[1])
    if not q_k > m_k**2:
        raise ValueError(f"the risk's gradient needs q_k > m_k^2 at the fixed point; got m_k = {m_k:g}, q_k = {q_k:g}")
