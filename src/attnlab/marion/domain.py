"""The domains of the functions that :mod:`attnlab.marion` exports: one check per function, of the same name, run on
the arguments before the function (:func:`attnlab._validate.public`); a one-line ValueError names the first argument
outside the domain.

Marion et al.'s model (ICLR 2025): overlaps of unit vectors (:func:`attnlab._validate.realisable`), an attention
scale lambda > 0, a signal standard deviation gamma >= 0 (gamma > 0 for the Bayes posterior, which divides by
gamma^2), a label noise eps >= 0, dimension d and sequence length L integers >= 1, a step size > 0, and step counts
with ``log_every`` dividing ``n_steps`` (the logs are at steps 0, log_every, ..., n_steps). Reduced SGD draws a
Wishart(d - 4) matrix: d >= 5.
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.marion.dynamics import SLRParams
from attnlab.slr.domain import marion_overlaps, model_constants

__all__ = ["population_excess_risk", "population_risk", "risk_R", "risk_on_manifold", "oracle_excess_risk",
           "linear_baseline_risk", "erf_attention", "bayes_predictor", "distance_to_manifold", "pgd_step_reduced",
           "run_pgd_reduced", "run_pgd_full", "run_sgd_reduced", "run_sgd_full", "params", "steps"]


def _problem(*, lam, gamma, d, L) -> None:
    check.positive("lam", lam)
    model_constants(L=L, gamma=gamma)
    check.count("d", d)


def population_excess_risk(*, o, lam, gamma, d, L, **_) -> None:
    marion_overlaps("o", o)
    _problem(lam=lam, gamma=gamma, d=d, L=L)


def population_risk(*, o, lam, gamma, d, L, eps, **_) -> None:
    population_excess_risk(o=o, lam=lam, gamma=gamma, d=d, L=L)
    model_constants(eps=eps)


risk_R = population_excess_risk


def risk_on_manifold(*, kappa, nu, lam, gamma, d, L, **_) -> None:
    check.realisable("(kappa, nu) on M", kappa, nu, 0.0, 0.0, 0.0)
    _problem(lam=lam, gamma=gamma, d=d, L=L)


def oracle_excess_risk(*, lam, gamma, d, L, **_) -> None:
    _problem(lam=lam, gamma=gamma, d=d, L=L)


def linear_baseline_risk(*, gamma, L, eps, **_) -> None:
    model_constants(L=L, gamma=gamma, eps=eps)


def _tokens(X, *vectors) -> None:
    """``X`` (..., L, d) and each named vector of shape (d,), all finite."""
    if np.ndim(X) < 2:
        raise ValueError(f"X must have shape (..., L, d); got shape {np.shape(X)}")
    check.real("X", X)
    d = np.shape(X)[-1]
    for name, x in vectors:
        check.shape(name, x, (d,))
        check.real(name, x)


def erf_attention(*, X, k, v, lam, **_) -> None:
    _tokens(X, ("k", k), ("v", v))
    check.positive("lam", lam)


def bayes_predictor(*, X, k_star, v_star, gamma, **_) -> None:
    check.teacher("k_star", k_star, "v_star", v_star)
    _tokens(X, ("k_star", k_star))
    check.positive("gamma", gamma)


def distance_to_manifold(*, o, **_) -> None:
    marion_overlaps("o", o)


def pgd_step_reduced(*, o, lam, step_size, gamma, d, L, **_) -> None:
    population_excess_risk(o=o, lam=lam, gamma=gamma, d=d, L=L)
    check.positive("step_size", step_size)


def params(p, *, min_d: int = 1) -> None:
    """``p`` an :class:`~attnlab.marion.dynamics.SLRParams` inside the model's domain (``d >= min_d``)."""
    if not isinstance(p, SLRParams):
        raise ValueError(f"p must be an attnlab.marion.SLRParams; got {type(p).__name__}")
    check.count("p.d", p.d, minimum=min_d)
    check.count("p.L", p.L)
    check.nonnegative("p.gamma", p.gamma)
    check.nonnegative("p.eps", p.eps)
    check.positive("p.step_size", p.step_size)
    check.positive("p.lambda0", p.lambda0)
    if not isinstance(p.schedule, (bool, np.bool_)):
        raise ValueError(f"p.schedule must be a boolean; got {p.schedule!r}")
    check.nonnegative("p.schedule_rate", p.schedule_rate)


def steps(n_steps, log_every) -> None:
    """``n_steps`` and ``log_every`` integers >= 1, ``log_every`` dividing ``n_steps``."""
    n = check.count("n_steps", n_steps)
    every = check.count("log_every", log_every)
    if n % every:
        raise ValueError(f"log_every must divide n_steps (logs at steps 0, log_every, ..., n_steps); got "
                         f"log_every = {every}, n_steps = {n}")


def _repeats(o0) -> int:
    """The number of repeats R of overlaps ``o0`` whose fields have shape (R,)."""
    shapes = {np.shape(x) for x in o0}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(f"o0 must hold one overlap per repeat (every field of shape (R,)); got shapes "
                         f"{[np.shape(x) for x in o0]}")
    return next(iter(shapes))[0]


def run_pgd_reduced(*, o0, p, n_steps, log_every, n_segments, **_) -> None:
    marion_overlaps("o0", o0)
    _repeats(o0)
    params(p)
    steps(n_steps, log_every)
    check.count("n_segments", n_segments)


def _vectors(p, k, v, k_star, v_star) -> None:
    d = check.teacher("k_star", k_star, "v_star", v_star)
    if d != p.d:
        raise ValueError(f"the vectors must have dimension p.d = {p.d}; got k_star of dimension {d}")
    check.shape("k", k, (d,))
    check.shape("v", v, (d,))
    if check.is_concrete((k, v)):
        for name, x in (("k", k), ("v", v)):
            norm = float(np.linalg.norm(np.asarray(x, np.float64)))
            if not abs(norm - 1.0) <= 1e-6:
                raise ValueError(f"{name} must be a unit vector (PGD runs on the sphere); got |{name}| = {norm:.6g}")


def run_pgd_full(*, k, v, k_star, v_star, p, n_steps, log_every, **_) -> None:
    params(p)
    _vectors(p, k, v, k_star, v_star)
    steps(n_steps, log_every)


def run_sgd_reduced(*, key, o0, p, n_steps, log_every, batch_size, n_test, n_segments, **_) -> None:
    marion_overlaps("o0", o0)
    R = _repeats(o0)
    if np.shape(key)[:1] != (R,):
        raise ValueError(f"key must hold one PRNG key per repeat (shape ({R},)); got shape {np.shape(key)}")
    params(p, min_d=5)
    steps(n_steps, log_every)
    check.count("batch_size", batch_size)
    check.count("n_test", n_test)
    check.count("n_segments", n_segments)


def run_sgd_full(*, k, v, k_star, v_star, p, n_steps, log_every, batch_size, n_test, **_) -> None:
    params(p)
    _vectors(p, k, v, k_star, v_star)
    steps(n_steps, log_every)
    check.count("batch_size", batch_size)
    check.count("n_test", n_test)
