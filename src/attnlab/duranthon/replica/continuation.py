"""Continuation of replica fixed points in lambda and in alpha, the standard branch starts, and branch tracking
along alpha."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from attnlab.duranthon.activations import Activation
from attnlab.duranthon.data import c_nu
from attnlab.duranthon.replica.fixed_point_map import evaluate_map, prior_update
from attnlab.duranthon.replica.samples import FrozenSamples
from attnlab.duranthon.replica.solve import ReplicaResult, _feasible, solve_replica

__all__ = ["lambda_path", "continue_in_lambda", "standard_starts", "secant_predictor", "rescaled_start",
           "continue_in_alpha", "BranchCurve", "replica_curve"]


def lambda_path(lam: float, lam_start: float = 1.0, per_decade: int = 2) -> list[float]:
    """Geometric continuation path from ``lam_start`` to ``lam`` (``per_decade`` steps per factor 10), ending
    exactly at ``lam``; ``[lam]`` when ``lam >= lam_start``."""
    if not lam > 0:
        raise ValueError(f"lambda must be > 0, got {lam}")
    if lam >= lam_start:
        return [float(lam)]
    n = max(1, math.ceil(per_decade * math.log10(lam_start / lam)))
    return [float(lam_start * (lam / lam_start) ** (i / n)) for i in range(n + 1)]


def continue_in_lambda(act: Activation, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                       lam_start: float = 1.0, per_decade: int = 2, **kw) -> list[ReplicaResult]:
    """Continuation in lambda at fixed alpha: solve at ``lam_start`` (or at the target if it is larger), then along
    a geometric path down to (lam_k, lam_v) (both scaled together), each solve started at the previous solve's
    last evaluation (its proximal points and tracked minima as the inner warm start), with that evaluation's
    value at the new lambdas and Anderson's memory rebuilt from the last evaluations, at no cost: the hats do
    not depend on lambda, which enters only the prior update (:func:`rescaled_start`). Stops at the first point
    that does not converge. Returns every point's result (the last is the target if all converged)."""
    path = lambda_path(min(lam_k, lam_v), lam_start, per_decade)
    scale = [p / min(lam_k, lam_v) for p in path]
    out, x, chi, track = [], init, None, None
    first_jac = _first_estimator(kw)
    record: list = []
    for s in scale:
        v0 = hist = None
        start = (rescaled_start(record, alpha, lam_k * s, lam_v * s, first_jac, kw.get("memory", 6))
                 if out and out[-1].jacobian == first_jac else None)
        if start is not None:
            x, v0, dX, dG = start
            x, hist = tuple(x), (dX, dG)
        r = solve_replica(act, alpha, lam_k * s, lam_v * s, samples, x, chi0=chi, track0=track, history=hist,
                          v0=v0, record=record, **kw)
        out.append(r)
        if not r.converged:
            break
        x, chi, track = tuple(r.order), r.chi, r.track  # proximal points, tracked minima: the next warm start
    return out


def standard_starts(model: str, nu, L=None, informed_scale: float | None = None, V0: float = 1.0) -> dict:
    """The two branch starts: ``informed`` (the oracle of Prop. 4.2: m_k = c_nu, q_k = c_nu^2, m_v = q_v = 1;
    ``informed_scale`` replaces c_nu, needed for max-SLR nu = inf) and ``uninformed`` (what a random start of norm
    sqrt(D) has: m ~ 0, q = 1; m = 0.01 to break the sign symmetry)."""
    c = c_nu(model, nu) if informed_scale is None else float(informed_scale)
    if not math.isfinite(c):
        raise ValueError("informed start at nu = inf needs a finite informed_scale")
    return {"informed": (c, c * c, V0, 1.0, 1.0, V0), "uninformed": (0.01, 1.0, V0, 0.01, 1.0, V0)}


def secant_predictor(points, params, target):
    """Continuation predictor: the next start from the last two converged fixed points ``points`` at ``params``
    (e.g. alphas), linear in log(param); the last point if fewer than two or if the prediction leaves the physical
    set (V_a <= 0)."""
    if len(points) < 2:
        return tuple(points[-1])
    (x0, x1), (p0, p1) = (np.asarray(points[-2]), np.asarray(points[-1])), params[-2:]
    t = (math.log(target) - math.log(p1)) / (math.log(p1) - math.log(p0))
    x = _feasible(x1 + t * (x1 - x0))
    return tuple(x) if x is not None else tuple(x1)


def _first_estimator(kw) -> str:
    """The V_hat estimator a solve with options ``kw`` starts with ("auto" starts with the implicit one). A
    rescaled start's value ``v0`` is that estimator's; solve_replica ignores ``v0`` when it iterates the multistart
    map directly (``multistart=True``)."""
    jacobian = kw.get("jacobian", "auto")
    return "implicit" if jacobian == "auto" else jacobian


def rescaled_start(record, alpha: float, lam_k: float, lam_v: float, jacobian: str, memory: int = 6):
    """A start at a new alpha, with Anderson's memory, from the evaluations of a solve at another alpha (same
    samples and lambdas), at no cost. The map depends on alpha only through its hats, which are alpha times sample
    means at the input order (:func:`_reduce_hats`): F(x; alpha) = prior_update(alpha M(x)). So every recorded
    evaluation (x, hats = alpha_0 M(x)) gives the value at the new alpha, prior_update(hats alpha / alpha_0),
    exactly. From the last ``memory + 1`` recorded evaluations of the estimator ``jacobian`` (the one the next
    solve starts with) this returns ``(x, v, dX, dG)``: the last point, its value at ``alpha`` (a ``MapValue``
    whose ``at`` and jump terms are NaN), and the differences of consecutive points and of their residuals
    F(x; alpha) - x, Anderson's secant pairs of the new map itself. None if fewer than two are valid there.

    Unlike the secant prediction (which costs one evaluation to check and carries the previous alpha's secant
    pairs), the new map's own secant pairs cost nothing; ``bench/replica.py`` runs the continuation with them. Only
    ``memory + 1`` points are used: older pairs describe the map far from the new fixed point, and at low alpha,
    where proximal minimisers switch between iterates, they made the first steps worse."""
    pts = []
    for x, v, a, _ in [r for r in record if r[3] == jacobian][-(memory + 1):]:
        hats = np.asarray(v.hats, dtype=np.float64) * (alpha / a)
        new = prior_update(hats, lam_k, lam_v)
        if np.all(np.isfinite(new)):
            pts.append((x, new, v._replace(order=new, hats=hats, at=math.nan, jump_k=math.nan, jump_k_se=math.nan,
                                           jump_v=math.nan, jump_v_se=math.nan)))
    if len(pts) < 2:
        return None
    dX = [x2 - x1 for (x1, _, _), (x2, _, _) in zip(pts[:-1], pts[1:])]
    dG = [(n2 - x2) - (n1 - x1) for (x1, n1, _), (x2, n2, _) in zip(pts[:-1], pts[1:])]
    return pts[-1][0], pts[-1][2], dX, dG


def continue_in_alpha(act: Activation, alphas, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                      chi0=None, track0=None, branch: str = "", history=None, prior=(),
                      **kw) -> list[ReplicaResult]:
    r"""Continuation in alpha from ``init`` (six numbers, the start of the first point), each point solved by
    :func:`solve_replica` (``kw`` are its options). Stops after the first point that did not converge (it is then
    the last result).

    Each later point starts where the previous solve's last evaluation was, with that evaluation's value at the
    new alpha and Anderson's memory rebuilt from its last evaluations, all at no cost (:func:`rescaled_start`),
    and with the previous point's proximal points (``chi0`` for the first) and tracked minima (``track0``, see
    :func:`evaluate_map`) as the inner warm start. Where that is not available (the first point after ``prior``,
    or after a solve that ended with another V_hat estimator), it starts at the secant prediction from the last
    two converged points (:func:`secant_predictor`; ``prior``: converged ``(order, alpha)`` pairs before the first
    point, to seed it) with Anderson's memory carried along (``history``). A secant prediction is checked before
    it is used: if its residual |F(x) - x| exceeds its own step from the last point, it is worse than no prediction
    (seen after a point where minimisers switched: a residual of 3 where 6e-3 is typical) and the last point is
    the start instead; the map value computed for the check is reused by the solver. ``n_iter`` counts every
    evaluation."""
    alphas = tuple(float(a) for a in alphas)
    hist = history if history is not None else ([], [])
    multistart = kw.get("multistart", "verify")
    n_newton = kw.get("n_newton", 30)
    check = kw.get("jacobian", "auto") in ("auto", "implicit") and multistart in (False, "verify")
    warm = kw.get("warm_start", True)
    done, at = [tuple(p[0]) for p in prior], [float(p[1]) for p in prior]
    chi, track = chi0, track0
    first_jac = _first_estimator(kw)
    record: list = []
    results: list[ReplicaResult] = []
    for alpha in alphas:
        start = (rescaled_start(record, alpha, lam_k, lam_v, first_jac, kw.get("memory", 6))
                 if results and results[-1].jacobian == first_jac else None)
        if start is not None:  # free: the value at x is not counted
            x, v, hist[0][:], hist[1][:] = start
            x, spent = tuple(x), 0
        else:
            x, v, spent = (tuple(init), None, 0) if not done else (secant_predictor(done, at, alpha), None, 0)
            if len(done) >= 2 and check:
                v = evaluate_map(act, x, alpha, lam_k, lam_v, samples, n_newton, "implicit", False,
                                 chi if warm else None, track if warm else None)
                step = float(np.max(np.abs(np.asarray(x) - np.asarray(done[-1]))))
                if not (v.valid and float(np.max(np.abs(v.order - np.asarray(x)))) <= step):
                    x, v, spent = done[-1], None, 1
            spent += v is not None
        r = solve_replica(act, alpha, lam_k, lam_v, samples, x, chi0=chi, track0=track, history=hist,
                          branch=branch, v0=v, record=record, **kw)
        r = r._replace(n_iter=r.n_iter + spent)
        results.append(r)
        if not r.converged:
            break
        done, at, chi, track = done + [tuple(r.order)], at + [alpha], r.chi, r.track
    return results


class BranchCurve(NamedTuple):
    """Per-branch results along alpha (``results[branch][i]`` at ``alphas[i]``, the last point of the lambda
    continuation) and, per alpha, the selected branch: the converged one with the lowest training objective."""

    alphas: tuple
    results: dict
    selected: tuple


def replica_curve(act: Activation, alphas, lam_k: float, lam_v: float, samples: FrozenSamples, starts: dict,
                  lam_start: float = 1.0, per_decade: int = 2, **kw) -> BranchCurve:
    """Branch tracking along alpha: for each start (name -> six numbers), continuation in lambda at the first alpha
    (from ``lam_start`` down to the target), then continuation in alpha at the target lambda, each point started at
    the secant prediction from the same branch's last two converged fixed points (:func:`secant_predictor`; at a
    failed point the branch restarts from its start with lambda continuation), with the previous point's proximal
    points as the inner warm start and Anderson's memory carried along the branch (:func:`solve_replica`). Every
    point carries its convergence report (:class:`ReplicaResult`)."""
    alphas = tuple(float(a) for a in alphas)
    if not alphas or any(not a > 0 for a in alphas):
        raise ValueError(f"every alpha must be > 0, got {alphas}")
    results = {}
    for name, init in starts.items():
        rs = []
        while len(rs) < len(alphas):
            alpha = alphas[len(rs)]
            r = continue_in_lambda(act, alpha, lam_k, lam_v, samples, init, lam_start, per_decade, branch=name,
                                   **kw)[-1]
            if r.converged and (r.lam_k != lam_k or r.lam_v != lam_v):
                r = r._replace(converged=False, status="continuation_stopped")
            rs.append(r)
            if not r.converged or len(rs) == len(alphas):
                continue
            seg = continue_in_alpha(act, alphas[len(rs):], lam_k, lam_v, samples, tuple(r.order), chi0=r.chi,
                                    track0=r.track, branch=name, prior=[(tuple(r.order), alpha)], **kw)
            # a point of the segment that did not converge is solved again from the branch start with lambda
            # continuation (the loop's next pass)
            rs.extend(seg if seg[-1].converged else seg[:-1])
        results[name] = rs
    selected = []
    for i in range(len(alphas)):
        ok = [(results[n][i].objective, n) for n in results if results[n][i].converged]
        selected.append(min(ok)[1] if ok else "")
    return BranchCurve(alphas, results, tuple(selected))
