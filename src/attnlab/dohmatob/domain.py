"""The domains of the functions that :mod:`attnlab.dohmatob` exports: one check per function, of the same name, run
on the arguments before the function (:func:`attnlab._validate.public`); a one-line ValueError names the first
argument outside the domain.

Dohmatob's model (NeurIPS 2025): overlaps ``(mu, nu, eta, zeta, rho)`` of unit vectors (each in [-1, 1],
``mu^2 + eta^2 <= 1``, ... :func:`attnlab._validate.realisable`), a :class:`~attnlab.dohmatob.meanfield.DohmatobModel`
(validated when built: d >= 1 and L >= 2 integers, beta > 0, gamma in (0, 1), a known link), sizes that are integers
>= 1 (Monte Carlo sizes >= 2, for a standard error), a label noise eps >= 0, and the in-frame sampler's d >= 4.
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.dohmatob import flows
from attnlab.dohmatob.meanfield import DohmatobModel
from attnlab.dohmatob.model import check_beta, check_gamma, get_link
from attnlab.slr.domain import dohmatob_overlaps, model_constants

__all__ = ["softmax_attention", "sample_dohmatob", "sample_dohmatob_in_frame", "rem_constants",
           "localisation_probability", "dual_kernel", "mean_field_risk", "corollary1_risk", "mc_risk", "mc_risk_batch",
           "integrate", "stationary_points_on_M", "run_rgd", "model"]


def model(m) -> None:
    """``m`` a :class:`~attnlab.dohmatob.meanfield.DohmatobModel` (its own checks ran when it was built)."""
    if not isinstance(m, DohmatobModel):
        raise ValueError(f"m must be an attnlab.dohmatob.DohmatobModel; got {type(m).__name__}")


def _unit(name, x) -> None:
    check.real(name, x, lo=-1.0, hi=1.0)


def softmax_attention(*, X, u, v, beta, link, **_) -> None:
    if np.ndim(X) < 2:
        raise ValueError(f"X must have shape (..., L, d); got shape {np.shape(X)}")
    check.real("X", X)
    d = np.shape(X)[-1]
    for name, x in (("u", u), ("v", v)):
        check.shape(name, x, (d,))
        check.real(name, x)
    check_beta(beta)
    get_link(link)


def sample_dohmatob(*, u_star, v_star, n, L, gamma, eps, link, **_) -> None:
    check.teacher("u_star", u_star, "v_star", v_star)
    model_constants(n=n, L=L, eps=eps)
    check_gamma(gamma)
    get_link(link)


def sample_dohmatob_in_frame(*, n, L, gamma, eps, d, link, **_) -> None:
    model_constants(n=n, L=L, eps=eps)
    check_gamma(gamma)
    check.count("d", d, minimum=4)
    get_link(link)


def rem_constants(**_) -> None:
    """Checked by :func:`attnlab.dohmatob.meanfield.rem_constants` itself (it also validates every model)."""


def localisation_probability(*, mu, m, **_) -> None:
    _unit("mu", mu)
    model(m)


def dual_kernel(*, nu, gamma, link, **_) -> None:
    _unit("nu", nu)
    check_gamma(gamma)
    get_link(link)


def mean_field_risk(*, o, m, **_) -> None:
    dohmatob_overlaps("o", o)
    model(m)


corollary1_risk = mean_field_risk


def mc_risk(*, o, m, n, eps, chunk, **_) -> None:
    mean_field_risk(o=o, m=m)
    check.count("n", n, minimum=2)
    check.count("chunk", chunk)
    model_constants(eps=eps)


def mc_risk_batch(*, o, m, n, eps, **_) -> None:
    mean_field_risk(o=o, m=m)
    shapes = {np.shape(x) for x in o} - {()}
    if len(shapes) > 1 or any(len(s) != 1 for s in shapes):
        raise ValueError(f"o must hold a batch of points (every field of shape (k,), or a scalar); got shapes "
                         f"{[np.shape(x) for x in o]}")
    check.count("n", n, minimum=2)
    model_constants(eps=eps)


_FLOW_OVERLAPS = {flows.field2: ("mu", "nu"), flows.field4: ("mu", "nu", "eta", "zeta"),
                  flows.field5: ("mu", "nu", "eta", "zeta", "rho")}


def integrate(*, field, y0, ts, m, rtol, atol, max_steps, **_) -> None:
    if not callable(field):
        raise ValueError(f"field must be a callable field(y, m); got {field!r}")
    model(m)
    if np.ndim(y0) < 1:
        raise ValueError(f"y0 must hold the overlaps on its last axis; got a scalar {y0!r}")
    letters = _FLOW_OVERLAPS.get(field)
    if letters is not None:
        check.shape("y0", y0, (*np.shape(y0)[:-1], len(letters)))
        o = dict(zip(letters, np.moveaxis(np.asarray(y0, np.float64), -1, 0)))
        check.realisable("y0", o["mu"], o["nu"], o.get("zeta", 0.0), o.get("eta", 0.0), o.get("rho", 0.0),
                         letters=("mu", "nu", "zeta", "eta", "rho"))
    times = np.asarray(check.real("ts", ts, sequence=True), np.float64)
    if times.ndim != 1 or times.size < 2 or np.any(np.diff(times) <= 0):
        raise ValueError(f"ts must be a strictly increasing sequence of at least 2 times; got {check._shown(ts)}")
    check.positive("rtol", rtol, scalar=True)
    check.positive("atol", atol, scalar=True)
    check.count("max_steps", max_steps)


def stationary_points_on_M(*, m, zero_tol, n_grid, **_) -> None:
    model(m)
    check.nonnegative("zero_tol", zero_tol, scalar=True)
    check.count("n_grid", n_grid, minimum=3)


def run_rgd(*, u0, v0, X, Y, lam, step_size, n_steps, log_every, links, n_segments, **_) -> None:
    R, n, L, d = check.shape("X", X, (None, None, None, None))
    _, K, _ = check.shape("u0", u0, (R, None, d))
    check.shape("v0", v0, (R, K, d))
    check.shape("Y", Y, (R, K, n))
    for name, x in (("R", R), ("n", n), ("L", L), ("K", K)):
        if x < 1:
            raise ValueError(f"the runs need at least one of each axis; got {name} = 0 in X {np.shape(X)}, "
                             f"u0 {np.shape(u0)}")
    check.positive("lam", lam, scalar=True)
    check.positive("step_size", step_size, scalar=True)
    steps = check.count("n_steps", n_steps)
    every = check.count("log_every", log_every)
    if steps % every:
        raise ValueError(f"log_every must divide n_steps; got log_every = {every}, n_steps = {steps}")
    check.count("n_segments", n_segments)
    if isinstance(links, str) or callable(links):
        raise ValueError(f"links must be a sequence of links, one per run; got {links!r}")
    links = tuple(links)
    if len(links) != K:
        raise ValueError(f"links must name one link per run (K = {K} runs per repeat); got {len(links)}")
    for link in links:
        get_link(link)
