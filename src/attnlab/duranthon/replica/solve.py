"""One replica fixed point: :func:`solve_replica` (Anderson, multistart verification, V_hat estimator choice) and
its convergence report :class:`ReplicaResult`."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from attnlab.duranthon.activations import Activation
from attnlab.duranthon.replica.anderson import fixed_point
from attnlab.duranthon.replica.fixed_point_map import Order, evaluate_map
from attnlab.duranthon.replica.samples import FrozenSamples

__all__ = ["ReplicaResult", "solve_replica"]


VERIFY_ROUNDS = 3  # multistart verifications in solve_replica(multistart="verify") before iterating that map directly
AUTO_IMPLICIT_BUDGET = 60  # map evaluations of the pointwise estimator before jacobian="auto" switches to Stein


RECORD_KEEP = 16  # evaluations that solve_replica(record=...) keeps


class ReplicaResult(NamedTuple):
    """Fixed point and its convergence report.

    ``residual`` is max |F(x) - x| over the six order parameters at the returned point, ``n_iter`` the number of
    map evaluations, ``branch`` the name of the start it was continued from, ``status`` "converged",
    "max_iter", "invalid" (lambda + V_hat <= 0 or a non-finite map even after backtracking) or "bad_start".
    ``objective`` is the training objective per sample at the fixed point, ``E[r^2/2] + (lambda_k q_k + lambda_v
    q_v)/(2 alpha)`` (the RS ground-state energy: the ERM minimiser is the branch with the lowest value);
    ``inner_unconverged`` / ``nonconvex`` / ``jump_*`` are the map's diagnostics (:class:`MapValue`) at the
    returned point, ``jacobian`` the V_hat estimator used, ``at`` the replicon eigenvalue (:func:`at_eigenvalue`;
    RS stable iff < 1) at the returned point's input, ``chi`` the proximal points of the last evaluation and
    ``track`` its tracked minima (:func:`evaluate_map`), the warm start of a nearby solve."""

    order: Order
    train_loss: float
    residual: float
    n_iter: int
    converged: bool
    branch: str = ""
    status: str = ""
    objective: float = math.nan
    inner_unconverged: float = math.nan
    nonconvex: float = math.nan
    alpha: float = math.nan
    lam_k: float = math.nan
    lam_v: float = math.nan
    jump_k: float = math.nan
    jump_k_se: float = math.nan
    jump_v: float = math.nan
    jump_v_se: float = math.nan
    jacobian: str = ""
    at: float = math.nan
    chi: object = None
    track: object = None


def _check_args(alpha, lam_k, lam_v, damping):
    if not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"sample ratio alpha must be finite and > 0, got {alpha}")
    if not (lam_k > 0 and lam_v > 0):
        raise ValueError(f"the replica solver needs lambda_k, lambda_v > 0, got {lam_k}, {lam_v}")
    if not 0 <= damping < 1:
        raise ValueError(f"damping must lie in [0, 1), got {damping}")


def _feasible(x) -> np.ndarray | None:
    """Project onto the physical set (q_a >= m_a^2); None if some V_a <= 0 or a value is not finite."""
    x = np.array(x, dtype=np.float64)
    if not np.all(np.isfinite(x)) or x[2] <= 0 or x[5] <= 0:
        return None
    x[1], x[4] = max(x[1], x[0] ** 2), max(x[4], x[3] ** 2)
    return x


def _make_result(x, v, res, n, status, jac, alpha, lam_k, lam_v, branch) -> ReplicaResult:
    """The :class:`ReplicaResult` of the point ``x`` with the map value ``v`` (its diagnostics)."""
    o = Order(*(float(t) for t in x))
    obj = v.train_loss + (lam_k * o.q_k + lam_v * o.q_v) / (2 * alpha)
    return ReplicaResult(o, v.train_loss, res, n, status == "converged", branch, status, obj,
                         v.inner_unconverged, v.nonconvex, float(alpha), float(lam_k), float(lam_v),
                         v.jump_k, v.jump_k_se, v.jump_v, v.jump_v_se, jac, v.at, v.chi, v.track)


def solve_replica(act: Activation, alpha: float, lam_k: float, lam_v: float, samples: FrozenSamples, init,
                  damping: float = 0.5, tol: float = 1e-8, max_iter: int = 500, n_newton: int = 30,
                  method: str = "anderson", memory: int = 6, branch: str = "", multistart: bool | str = "verify",
                  jacobian: str = "auto", warm_start: bool = True, chi0=None, history=None,
                  v0=None, track0=None, record=None) -> ReplicaResult:
    r"""Fixed point of the map F (:func:`evaluate_map`) from ``init`` (six numbers), to ``max|F(x) - x| < tol``.

    ``method="damped"``: ``x <- damping x + (1 - damping) F(x)``.

    ``method="anderson"`` (default): Anderson acceleration, type II with mixing ``beta = 1 - damping`` and the last
    ``memory`` differences (Walker & Ni, SIAM J. Numer. Anal. 49, 1715 (2011), eq. (2.1)/Alg. AA; Anderson, J. ACM
    12, 547 (1965))::

        g_j = F(x_j) - x_j,   gamma = argmin |g_j - dG gamma|_2,   x_{j+1} = x_j + beta g_j - (dX + beta dG) gamma

    with dX, dG the differences of the stored iterates and residuals. ``multistart``: the inner problem from one
    start (omega^k) or from 2L + 1 starts (:func:`_starts`, the global minimum of non-convex proximal problems);
    "verify" (default) iterates with one start to convergence, then evaluates the multistart map once there: if no
    sample had a lower minimum elsewhere that is the fixed point of the multistart map; otherwise the single-start
    iteration resumes, warm-started at the multistart proximal points (so it follows the lower minima), and is
    verified again (at most ``VERIFY_ROUNDS`` times, then the multistart map is iterated directly). The returned
    point is in every case a fixed point of the multistart map to ``tol``. Safeguards: the history is cleared and the
    plain damped step taken when the accelerated point leaves the physical set (V_a <= 0), or when its residual is
    more than 10 times the current one; q_a is projected onto q_a >= m_a^2. If F is invalid at a trial point
    (lambda + V_hat <= 0, see :func:`evaluate_map`), the step is halved towards the current point (up to 20 times).

    ``jacobian``: the V_hat estimator of :func:`evaluate_map`, or "auto" (default): the pointwise implicit one
    (exact per sample, lowest variance where the proximal problems are convex) for at most
    ``AUTO_IMPLICIT_BUDGET`` evaluations, then, if that did not converge, Stein's from ``init`` (bounded integrand:
    near a fold of the proximal map the implicit derivative is heavy-tailed and a single frozen sample can stall the
    iteration; where minimisers switch the Stein form is also the correct, distributional one). The estimator that
    produced the fixed point is reported in ``ReplicaResult.jacobian``; ``n_iter`` counts every evaluation.

    ``warm_start`` (default True): each single-start evaluation starts the inner Newton iterations at the proximal
    points of the previous valid evaluation (``chi0`` for the first one, e.g. ``ReplicaResult.chi`` of a nearby
    solve; omega^k if None) instead of at omega^k: near convergence one or two Newton steps per sample instead of
    about ten. Multistart evaluations always start from :func:`_starts`.

    ``track0``: tracked local minima (:func:`evaluate_map`, ``MapValue.track``; e.g. ``ReplicaResult.track`` of a
    nearby solve) used with ``chi0`` by the single-start evaluations; each evaluation passes its advanced track to
    the next, and a multistart verification that finds lower minima replaces it by its own.

    ``v0``: the single-start map's value at ``init`` with the warm start ``chi0`` (:func:`evaluate_map` with
    ``jacobian="implicit"``), when the caller has computed it (e.g. to check a continuation predictor); it is used
    by the first estimator's attempt and not evaluated again.

    ``history``: Anderson's memory ``(dX, dG)`` carried in from a nearby solve and updated in place (see
    :func:`fixed_point`; continuation in alpha passes one pair along a branch). It is used by the first estimator's
    attempt only; memory 6 (the number of order parameters) with the carried history took the benchmark curve from
    495 to 373 map evaluations.

    ``record``: a list to which every valid evaluation is appended as ``(x, MapValue, alpha, jacobian)`` (the last
    ``RECORD_KEEP`` kept): :func:`continue_in_alpha` re-uses them at the next alpha (:func:`rescaled_start`).
    """
    _check_args(alpha, lam_k, lam_v, damping)
    if method not in ("anderson", "damped"):
        raise ValueError(f"method must be 'anderson' or 'damped', got {method!r}")
    if memory < 1:
        raise ValueError(f"Anderson memory must be >= 1, got {memory}")
    if multistart not in (True, False, "verify"):
        raise ValueError(f"multistart must be True, False or 'verify', got {multistart!r}")

    if jacobian not in ("implicit", "unrolled", "stein", "auto"):
        raise ValueError(f"jacobian must be 'implicit', 'unrolled', 'stein' or 'auto', got {jacobian!r}")

    def evaluate(x, jac, ms, chi=None, track=None, known=None):
        v = evaluate_map(act, x, alpha, lam_k, lam_v, samples, n_newton, jac, ms, chi, track, known)
        if record is not None and v.valid:
            record.append((np.asarray(x, dtype=np.float64), v, float(alpha), jac))
            del record[:-RECORD_KEEP]
        return v

    def F_with(ms, jac, chi=None, track=None):
        if ms or not warm_start:
            return lambda x: evaluate(x, jac, ms)
        last = [chi, track if chi is not None else None]

        def F(x):
            v = evaluate(x, jac, False, last[0], last[1])
            if v.valid:
                last[0], last[1] = v.chi, v.track
            return v

        return F

    def result(x, v, res, n, status, jac):
        return _make_result(x, v, res, n, status, jac, alpha, lam_k, lam_v, branch)

    def attempt(x, jac, budget, hist, v_first=None):
        if multistart != "verify":
            return fixed_point(F_with(bool(multistart), jac, chi0, track0), x, _feasible, damping, tol, budget,
                               method, memory, hist, v_first if not multistart else None)
        chi, track, n = chi0, track0, 0
        for _ in range(VERIFY_ROUNDS):
            x, v, res, n1, status = fixed_point(F_with(False, jac, chi, track), x, _feasible, damping, tol,
                                                budget - n, method, memory, hist, v_first)
            n += n1
            if status != "converged":
                return x, v, res, n, status
            # the single-start fixed point is one of the multistart map when no sample has a lower minimum there;
            # the loops use the single-start proximal points (at the last iterate, within tol of x) as known minima
            v = evaluate(x, jac, True, known=v.chi)
            n += 1
            if not v.valid:
                return x, v, res, n, "invalid"
            res = float(np.max(np.abs(v.order - x)))
            if res < tol:
                return v.order, v, res, n, "converged"
            # some samples have a lower minimum: follow it. The multistart value at x is also the single-start
            # map's value there when warm-started at its proximal points, so the next round starts from it; the
            # stored secant pairs describe the map before the switch, so Anderson's memory starts afresh
            chi, track, v_first = v.chi, v.track, v
            if hist is not None:
                hist[0].clear(), hist[1].clear()
        x2, v2, res, n2, status = fixed_point(F_with(True, jac), x, _feasible, damping, tol, max(budget - n, 1),
                                              method, memory, hist)
        return x2, v2, res, n + n2, status

    x = _feasible(init)
    if x is None:
        raise ValueError(f"initial order parameters need V_k, V_v > 0 and finite values, got {tuple(init)}")
    if jacobian != "auto":
        return result(*attempt(x, jacobian, max_iter, history, v0 if jacobian == "implicit" else None), jacobian)
    first = min(max_iter, AUTO_IMPLICIT_BUDGET)
    out = attempt(x, "implicit", first, history, v0)
    if out[4] == "converged" or first >= max_iter:
        return result(*out, "implicit")
    if history is not None:  # the implicit map's secant information does not describe Stein's
        history[0].clear(), history[1].clear()
    x2, v2, res, n2, status = attempt(x, "stein", max_iter - out[3], history)
    return result(x2, v2, res, out[3] + n2, status, "stein")
