r"""Theory against simulation along alpha = N/D (Duranthon et al. 2025, Sec. 4-5): the drivers behind the
``duranthon-sample-complexity`` and ``duranthon-low-snr`` presets. Informed starts only in the first; lambda fixed
or chosen by grid search.

For each activation and each alpha:

* lambda (``lam_grid`` given, lambda_k = lambda_v): the replica fixed point at every lambda of the grid on every
  frozen set, and the lambda whose replica test error (mean over sets) is lowest, as the paper tunes its
  regularisation "by grid search" (its grid is not given: ours is the caller's); with ``grid_rs_stable`` (default)
  only among the lambdas where every set's fixed point is RS-stable (replicon eigenvalue < 1,
  :func:`attnlab.duranthon.replica.at_eigenvalue`): an RS prediction past the AT line is not trusted to pick lambda.
  The replica and ERM columns below are at that lambda;

* lambda* (``lam_optimal``, a grid needed): the minimiser of the same replica test error over the grid's range
  without the grid's resolution limit. Its derivative dE/dlambda comes from implicit differentiation of the fixed
  point (:func:`attnlab.duranthon.replica.sensitivity.risk_lambda_derivative`, mean over sets) at every grid lambda;
  each bracket of adjacent grid lambdas (both eligible as above) where it changes sign from - to + holds a local
  minimum, found by Brent's method on ``dE/dlambda(exp t) = 0`` in t = log lambda (:func:`_optimal_lambda`), and
  lambda* is the local minimum of lowest test error. If a grid end where dE/dlambda points outwards has a lower
  test error, the minimum lies at or beyond the grid's range: lambda* is NaN (status "at_grid_edge") and the columns
  stay at the grid optimum. Otherwise the replica and ERM columns are at lambda*;

* replica: :func:`attnlab.duranthon.replica.solve_replica` on ``n_sets`` independent frozen sample sets, continued in
  alpha (each set starts from its fixed point at the previous alpha, the first from the informed point); test error
  (the risk-on-M formula of four overlaps, :func:`attnlab.duranthon.population.overlap_risk`) per set, its mean, and
  an SE combining the spread over sets with the formula's Monte Carlo SE;
* simulation: L-BFGS ERM (informed start) at ``D = sqrt_ND / sqrt(alpha)``, ``N = alpha D`` (sqrt(N D) fixed),
  ``n_seeds`` teachers and data sets; overlaps, training loss, test error on a fresh set, and each fit's convergence
  report (``sim_converged``, ``sim_status``);
* Bayes-optimal (spiked-SLR, and max-SLR at nu = inf): :func:`attnlab.duranthon.replica.solve_bayes_optimal` on a
  frozen set of ``n_bo`` samples, continued in alpha, and its test error by Monte Carlo (``n_risk`` samples, with SE),
  and its excess over the population Bayes risk on common samples
  (:func:`attnlab.duranthon.replica.bayes_optimal_excess`, with the SE of the paired differences).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import xarray as xr

from attnlab._random import fold_in, split
from attnlab.duranthon.activations import activation
from attnlab.duranthon.data import sample_sequences, sample_teacher_sqrtD
from attnlab.duranthon.erm import ERMOverlaps, erm_overlaps, fit_erm, fresh_test_error, informed_start
from attnlab.duranthon.population import bayes_risk_mc, overlap_risk
from attnlab.duranthon.replica import (
    bayes_optimal_excess,
    bayes_optimal_test_error,
    frozen_samples,
    rescaled_start,
    solve_bayes_optimal,
    solve_replica,
)
from attnlab.duranthon.replica.sensitivity import risk_lambda_derivative

__all__ = ["theory_vs_simulation", "low_snr_diagnostics"]

_ORDER = ("m_k", "q_k", "V_k", "m_v", "q_v", "V_v")


def _json_nu(nu):
    """``nu`` as a JSON value for the dataset's attributes: a number, or the string "inf" (max-SLR at nu = inf)."""
    return float(nu) if math.isfinite(nu) else "inf"


def _json_L(L):
    """The sequence length (or the list of lengths of a length law) as a JSON value."""
    return int(L) if np.ndim(L) == 0 else [int(x) for x in L]
_SIM = ERMOverlaps.names()

LAMBDA_XTOL = 1e-6  # Brent's method on dE/dlambda: tolerance on t = log lambda (lambda to a relative 1e-6)


class OptimalLambda(NamedTuple):
    """Result of :func:`_optimal_lambda`: ``lam`` (lambda*, NaN unless ``status == "root"``), ``status`` ("root",
    "at_grid_edge", "no_bracket"), ``derivative`` (mean dE/dlambda at lambda*), ``evaluations`` (fixed-point solves
    of the root find), ``results`` (per set, the :class:`ReplicaResult` at lambda*), ``grid_derivative`` (mean
    dE/dlambda at each grid lambda, NaN where not eligible)."""

    lam: float
    status: str
    derivative: float
    evaluations: int
    results: list
    grid_derivative: np.ndarray


def _set_derivative(k_risk, act, model, nu, L, alpha, lam, sample_set, r, n_risk):
    """dE/dlambda of one set's fixed point ``r`` (NaN unless it converged with q_a > m_a^2)."""
    o = r.order
    if not (r.converged and o.q_k > o.m_k**2 and o.q_v > o.m_v**2):
        return math.nan
    jac = r.jacobian if r.jacobian in ("implicit", "stein") else "implicit"
    return risk_lambda_derivative(k_risk, act, model, nu, L, r.order, alpha, lam, sample_set, r.chi, n_risk, jac)[1]


def _optimal_lambda(act, model, nu, L, alpha, sets, grid, by_g, eligible, k_risk, n_risk, tol,
                    xtol=LAMBDA_XTOL) -> OptimalLambda:
    r"""lambda*(alpha): the minimiser over the grid's range of the mean over sets of the replica test error
    E(lambda) (the quantity the grid search minimises), from the zeros of its derivative.

    ``grid`` (decreasing lambdas), ``by_g`` (per grid lambda: the sets' results, their test errors and SEs) and
    ``eligible`` (per grid lambda) as in :func:`theory_vs_simulation`. dE/dlambda at each eligible grid lambda by
    implicit differentiation; for each pair of adjacent eligible lambdas where it goes from < 0 to > 0 (increasing
    lambda), Brent's method (``scipy.optimize.brentq``, ``xtol`` on log lambda) finds its zero; each trial lambda
    is solved on every set from the nearest solved lambda's last evaluations rescaled to the trial lambda
    (:func:`attnlab.duranthon.replica.rescaled_start`: the hats do not depend on lambda). lambda* is the zero of
    lowest E, unless an eligible grid end with dE/dlambda pointing outwards (> 0 at the smallest lambda, < 0 at the
    largest) has a lower E ("at_grid_edge"); "no_bracket" when there is neither."""
    import scipy.optimize

    asc = np.argsort(grid)
    lams = np.asarray(grid, dtype=np.float64)
    n_sets = len(sets)
    gder = np.full(len(grid), np.nan)
    for g in range(len(grid)):
        if eligible[g]:
            d = [_set_derivative(k_risk, act, model, nu, L, alpha, lams[g], sets[s], by_g[g][0][s], n_risk)
                 for s in range(n_sets)]
            gder[g] = np.mean(d)
    ok = [g for g in asc if eligible[g] and math.isfinite(gder[g])]
    solved = {math.log(lams[g]): list(by_g[g][0]) for g in ok}  # t -> per-set results (warm starts)
    records: dict = {}
    count = [0]

    def solve_at(t):
        if t in solved:
            return solved[t]
        near = min(solved, key=lambda u: abs(u - t))
        lam, out = math.exp(t), []
        for s in range(n_sets):
            prev = solved[near][s]
            rec = list(records.get((near, s), []))
            start = rescaled_start(rec, alpha, lam, lam, "implicit")
            x0, v0, hist = tuple(prev.order), None, None
            if start is not None:
                x0, v0, hist = tuple(start[0]), start[1], (start[2], start[3])
            r = solve_replica(act, alpha, lam, lam, sets[s], x0, tol=tol, chi0=prev.chi, track0=prev.track, v0=v0,
                              history=hist, record=rec)
            records[(t, s)] = rec
            out.append(r)
        count[0] += 1
        solved[t] = out
        return out

    derivative = {math.log(lams[g]): gder[g] for g in ok}

    def mean_derivative(t):
        if t not in derivative:
            rs = solve_at(t)
            derivative[t] = float(np.mean([_set_derivative(k_risk, act, model, nu, L, alpha, math.exp(t), sets[s],
                                                           rs[s], n_risk) for s in range(n_sets)]))
        return derivative[t]

    def mean_error(rs):
        vals = []
        for r in rs:
            o = r.order
            vals.append(overlap_risk(k_risk, act, model, nu, L, o.m_k, max(o.q_k, o.m_k**2), o.m_v,
                                     max(o.q_v, o.m_v**2), n_risk)[0] if r.converged else math.nan)
        return float(np.mean(vals))

    candidates = []  # (E, lambda or None for a grid end, t)
    for lo, hi in zip(ok[:-1], ok[1:]):
        if gder[lo] < 0 < gder[hi]:
            t = scipy.optimize.brentq(mean_derivative, math.log(lams[lo]), math.log(lams[hi]), xtol=xtol)
            rs = solve_at(t)
            if all(r.converged for r in rs):
                candidates.append((mean_error(rs), t, True))
    if ok and gder[ok[0]] > 0:
        candidates.append((float(np.mean(by_g[ok[0]][1])), math.log(lams[ok[0]]), False))
    if ok and gder[ok[-1]] < 0:
        candidates.append((float(np.mean(by_g[ok[-1]][1])), math.log(lams[ok[-1]]), False))
    if not candidates:
        return OptimalLambda(math.nan, "no_bracket", math.nan, count[0], [], gder)
    _, t, interior = min(candidates)
    if not interior:
        return OptimalLambda(math.nan, "at_grid_edge", math.nan, count[0], [], gder)
    return OptimalLambda(math.exp(t), "root", mean_derivative(t), count[0], solved[t], gder)


def theory_vs_simulation(key, model: str, nu, L, alphas, lam_k: float, lam_v: float,
                         activations=("softmax", "linear"), n_replica: int = 2000, n_sets: int = 3,
                         sqrt_ND: float = 1000.0, n_seeds: int = 3, n_test: int = 4000, n_risk: int = 50_000,
                         informed_scale: float | None = None, tol: float = 1e-8, n_bo: int = 20_000,
                         lam_grid=None, grid_rs_stable: bool = True, lam_optimal: bool = False,
                         progress=None) -> xr.Dataset:
    alphas = [float(a) for a in alphas]
    if any(a <= 0 for a in alphas):
        raise ValueError(f"every alpha must be > 0, got {alphas}")
    grid = sorted({float(x) for x in lam_grid}, reverse=True) if lam_grid else None
    if grid is not None and any(not x > 0 for x in grid):
        raise ValueError(f"every lambda of the grid must be > 0, got {lam_grid}")
    if lam_optimal and (grid is None or len(grid) < 2):
        raise ValueError("lam_optimal needs a lambda grid of at least two values (its brackets)")
    pairs = [(g, g) for g in grid] if grid else [(lam_k, lam_v)]
    n_g = len(pairs)
    n_a, n_al = len(activations), len(alphas)
    rep = np.full((n_a, n_al, n_sets, 6), np.nan)
    rep_train, rep_res = np.full((n_a, n_al, n_sets), np.nan), np.full((n_a, n_al, n_sets), np.nan)
    rep_iter, rep_conv = np.zeros((n_a, n_al, n_sets), int), np.zeros((n_a, n_al, n_sets), bool)
    rep_status = np.full((n_a, n_al, n_sets), "", dtype=object)
    rep_test, rep_test_se = np.full((n_a, n_al), np.nan), np.full((n_a, n_al), np.nan)
    rep_test_set = np.full((n_a, n_al, n_sets), np.nan)
    rep_at = np.full((n_a, n_al, n_sets), np.nan)
    grid_test, grid_conv = np.full((n_a, n_al, n_g), np.nan), np.zeros((n_a, n_al, n_g, n_sets), bool)
    grid_test_set = np.full((n_a, n_al, n_g, n_sets), np.nan)
    grid_at = np.full((n_a, n_al, n_g, n_sets), np.nan)
    lam_opt = np.full((n_a, n_al, 2), np.nan)
    lam_star, lam_star_der = np.full((n_a, n_al), np.nan), np.full((n_a, n_al), np.nan)
    lam_star_evals, lam_star_status = np.zeros((n_a, n_al), int), np.full((n_a, n_al), "", dtype=object)
    lam_grid_best, grid_der = np.full((n_a, n_al), np.nan), np.full((n_a, n_al, n_g), np.nan)
    sim = np.full((n_a, n_al, n_seeds, 7), np.nan)
    sim_train, sim_test = np.full((n_a, n_al, n_seeds), np.nan), np.full((n_a, n_al, n_seeds), np.nan)
    sim_conv, sim_status = np.zeros((n_a, n_al, n_seeds), bool), np.full((n_a, n_al, n_seeds), "", dtype=object)
    sizes = np.zeros((n_al, 2), int)
    k_rep, k_sim, k_risk, k_bayes = split(key, 4)
    sets = [frozen_samples(fold_in(k_rep, s), model, nu, L, n_replica) for s in range(n_sets)]
    total, done = n_a * n_al, 0
    for a, name in enumerate(activations):
        act = activation(name)
        c0 = informed_scale if informed_scale is not None else (math.sqrt(nu) if model == "spiked" else nu)
        # per (lambda, set): the last converged fixed point (start of the next alpha), its proximal points and
        # tracked minima (solve_replica's chi0, track0); a lambda without one yet starts from the next larger
        # lambda's fixed point at this alpha (continuation)
        informed = (c0, c0 * c0, 1.0, 1.0, 1.0, 1.0)
        starts = [[None] * n_sets for _ in range(n_g)]
        chis = [[None] * n_sets for _ in range(n_g)]
        records = [[[] for _ in range(n_sets)] for _ in range(n_g)]  # each path's last evaluations
        for i, alpha in enumerate(alphas):
            best, by_g, eligible = None, [], []
            for g, (lk, lv) in enumerate(pairs):
                rs, mc_se, test_set = [], np.full(n_sets, np.nan), np.full(n_sets, np.nan)
                for s in range(n_sets):
                    x0, c_0 = starts[g][s], chis[g][s]
                    if x0 is None:
                        prev = by_g[-1][0][s] if by_g else None
                        x0, c_0 = ((tuple(prev.order), (prev.chi, prev.track)) if prev is not None and prev.converged
                                   else (informed, (None, None)))
                    # a path that has converged before starts from its last evaluations rescaled to this alpha
                    start, v0, hist = rescaled_start(records[g][s], alpha, lk, lv, "implicit"), None, None
                    if start is not None:
                        x0, v0, hist = tuple(start[0]), start[1], (start[2], start[3])
                    r = solve_replica(act, alpha, lk, lv, sets[s], x0, tol=tol, chi0=c_0[0], track0=c_0[1], v0=v0,
                                      history=hist, record=records[g][s])
                    rs.append(r)
                    grid_conv[a, i, g, s], grid_at[a, i, g, s] = r.converged, r.at
                    if r.converged:
                        starts[g][s], chis[g][s] = tuple(r.order), (r.chi, r.track)
                    else:  # the next alpha starts from the last converged point instead
                        records[g][s].clear()
                    o = r.order
                    if r.converged and o.q_k >= o.m_k**2 and o.q_v >= o.m_v**2:
                        # common random numbers across sets and lambdas: the spread is the sets' error
                        m, e = overlap_risk(fold_in(k_risk, i), act, model, nu, L, o.m_k, o.q_k, o.m_v,
                                            o.q_v, n_risk)
                        test_set[s], mc_se[s] = m, e
                by_g.append((rs, test_set, mc_se))
                grid_test_set[a, i, g] = test_set
                eligible.append(False)
                if np.all(np.isfinite(test_set)):
                    grid_test[a, i, g] = np.mean(test_set)
                    eligible[g] = not grid_rs_stable or n_g == 1 or bool(np.all(grid_at[a, i, g] < 1))
                    if eligible[g] and (best is None or grid_test[a, i, g] < grid_test[a, i, best]):
                        best = g
            g = best if best is not None else 0  # no eligible lambda: the largest
            rs, test_set, mc_se = by_g[g]
            lam_opt[a, i] = pairs[g]
            lam_grid_best[a, i] = pairs[best][0] if best is not None else np.nan
            if lam_optimal:
                k_i = fold_in(k_risk, i)
                opt = _optimal_lambda(act, model, nu, L, alpha, sets, [p[0] for p in pairs], by_g, eligible, k_i,
                                      n_risk, tol)
                lam_star[a, i], lam_star_der[a, i], lam_star_evals[a, i] = opt.lam, opt.derivative, opt.evaluations
                lam_star_status[a, i], grid_der[a, i] = opt.status, opt.grid_derivative
                if opt.status == "root":  # the replica and ERM columns at lambda*
                    rs, test_set, mc_se = opt.results, np.full(n_sets, np.nan), np.full(n_sets, np.nan)
                    for s, r in enumerate(rs):
                        o = r.order
                        if r.converged and o.q_k >= o.m_k**2 and o.q_v >= o.m_v**2:
                            test_set[s], mc_se[s] = overlap_risk(k_i, act, model, nu, L, o.m_k, o.q_k, o.m_v,
                                                                 o.q_v, n_risk)
                    lam_opt[a, i] = (opt.lam, opt.lam)
            for s, r in enumerate(rs):
                rep[a, i, s], rep_train[a, i, s] = np.asarray(r.order), r.train_loss
                rep_res[a, i, s], rep_iter[a, i, s], rep_conv[a, i, s] = r.residual, r.n_iter, r.converged
                rep_status[a, i, s], rep_at[a, i, s] = r.status, r.at
            rep_test_set[a, i] = test_set
            ok = np.isfinite(test_set)
            if ok.any():
                spread = np.std(test_set[ok], ddof=1) / math.sqrt(ok.sum()) if ok.sum() > 1 else np.nan
                rep_test[a, i], rep_test_se[a, i] = np.mean(test_set[ok]), math.hypot(spread, np.mean(mc_se[ok]))
            lk, lv = pairs[g]
            D = max(4, int(round(sqrt_ND / math.sqrt(alpha))))
            N = max(2, int(round(alpha * D)))
            sizes[i] = (D, N)
            for seed in range(n_seeds):
                kt, kd, kf = split(fold_in(k_sim, 1000 * i + seed), 3)
                k_star, v_star = sample_teacher_sqrtD(kt, D)
                b = sample_sequences(kd, k_star, v_star, model, nu, L, N)
                e = fit_erm(act, b.X, b.mask, b.y, lk, lv, *informed_start(k_star, v_star, model, nu, scale=c0))
                sim[a, i, seed] = erm_overlaps(e.k, e.v, k_star, v_star).as_array()
                sim_train[a, i, seed] = e.train_loss
                sim_conv[a, i, seed], sim_status[a, i, seed] = e.converged, e.status
                # test chunks of the training shape (N, D): no extra compilation of the sampler
                sim_test[a, i, seed] = fresh_test_error(kf, act, e.k, e.v, k_star, v_star, model, nu, L, n_test,
                                                        chunk=N)[0]
            done += 1
            if progress is not None:
                progress(done, total)
    bayes, bayes_se = bayes_risk_mc(k_bayes, model, nu, L, n_risk)
    bo = np.full((n_al, 2), np.nan)
    bo_test, bo_se = np.full(n_al, np.nan), np.full(n_al, np.nan)
    bo_excess, bo_excess_se = np.full(n_al, np.nan), np.full(n_al, np.nan)
    bo_res, bo_conv = np.full(n_al, np.nan), np.zeros(n_al, bool)
    if model == "spiked" or math.isinf(nu):  # BO equations: spiked-SLR, and max-SLR at nu = inf
        bo_set = frozen_samples(fold_in(k_bayes, 1), model, nu, L, n_bo)
        q0 = (0.5, 0.5)
        for i, alpha in enumerate(alphas):
            r = solve_bayes_optimal(alpha, nu, bo_set, init=q0, model=model)
            bo[i], bo_res[i], bo_conv[i] = (r.q_k, r.q_v), r.residual, r.converged
            if r.converged:
                q0 = (r.q_k, r.q_v)
                bo_test[i], bo_se[i] = bayes_optimal_test_error(fold_in(k_bayes, 2), nu, L, r.q_k,
                                                                r.q_v, n_risk, model=model)
                bo_excess[i], bo_excess_se[i] = bayes_optimal_excess(fold_in(k_bayes, 2), nu, L, r.q_k,
                                                                     r.q_v, n_risk, model=model)
    u = {"units": "1"}
    data = {
        "replica_order": (("activation", "alpha", "set", "order"), rep, u),
        "replica_train_loss": (("activation", "alpha", "set"), rep_train, u),
        "replica_residual": (("activation", "alpha", "set"), rep_res, u),
        "replica_iterations": (("activation", "alpha", "set"), rep_iter, u),
        "replica_converged": (("activation", "alpha", "set"), rep_conv, u),
        "replica_status": (("activation", "alpha", "set"), rep_status.astype(str), u),
        "replica_test_error_set": (("activation", "alpha", "set"), rep_test_set, u),
        "replica_test_error": (("activation", "alpha"), rep_test, {**u, "long_name": "risk-on-M formula, mean over sets"}),
        "replica_test_error_se": (("activation", "alpha"), rep_test_se, u),
        "replica_at_eigenvalue": (("activation", "alpha", "set"), rep_at,
                                  {**u, "long_name": "replicon (AT) eigenvalue; RS stable iff < 1"}),
        "lambda_opt": (("activation", "alpha", "lam_kv"), lam_opt,
                       {**u, "long_name": "lambda of the replica and ERM columns (lambda* if lam=optimal and it "
                                          "was found, else the grid-search optimum if a grid)"}),
        "lambda_grid_argmin": (("activation", "alpha"), lam_grid_best,
                               {**u, "long_name": "grid lambda of lowest replica test error (eligible lambdas)"}),
        "lambda_star": (("activation", "alpha"), lam_star,
                        {**u, "long_name": "lambda*(alpha): zero of d(replica test error)/d lambda, implicit "
                                           "differentiation and Brent's method (NaN unless found inside the grid)"}),
        "lambda_star_derivative": (("activation", "alpha"), lam_star_der,
                                   {**u, "long_name": "d(replica test error)/d lambda at lambda*"}),
        "lambda_star_status": (("activation", "alpha"), lam_star_status.astype(str),
                               {**u, "long_name": "root, at_grid_edge or no_bracket (empty: not searched)"}),
        "lambda_star_evaluations": (("activation", "alpha"), lam_star_evals,
                                    {**u, "long_name": "fixed-point solves (all sets) of the root find"}),
        "replica_test_error_grid_derivative": (("activation", "alpha", "lam_grid"), grid_der,
                                               {**u, "long_name": "d(replica test error)/d lambda at each grid "
                                                                  "lambda (implicit differentiation)"}),
        "replica_test_error_grid": (("activation", "alpha", "lam_grid"), grid_test,
                                    {**u, "long_name": "replica test error (mean over sets) at each grid lambda"}),
        "replica_test_error_grid_set": (("activation", "alpha", "lam_grid", "set"), grid_test_set,
                                        {**u, "long_name": "replica test error of each set at each grid lambda "
                                                           "(common random numbers across sets and lambdas)"}),
        "replica_converged_grid": (("activation", "alpha", "lam_grid", "set"), grid_conv, u),
        "replica_at_eigenvalue_grid": (("activation", "alpha", "lam_grid", "set"), grid_at, u),
        "sim_overlaps": (("activation", "alpha", "seed", "overlap"), sim, u),
        "sim_train_loss": (("activation", "alpha", "seed"), sim_train, u),
        "sim_test_error": (("activation", "alpha", "seed"), sim_test, {**u, "long_name": "fresh-set test error"}),
        "sim_converged": (("activation", "alpha", "seed"), sim_conv, {**u, "long_name": "L-BFGS converged"}),
        "sim_status": (("activation", "alpha", "seed"), sim_status.astype(str), u),
        "D": (("alpha",), sizes[:, 0], u), "N": (("alpha",), sizes[:, 1], u),
        "bayes_population": ((), bayes, u), "bayes_population_se": ((), bayes_se, u),
        "bo_overlaps": (("alpha", "bo_order"), bo, {**u, "long_name": "Bayes-optimal (q_k, q_v)"}),
        "bo_test_error": (("alpha",), bo_test, {**u, "long_name": "Bayes-optimal test error (spiked; max at nu=inf)"}),
        "bo_test_error_se": (("alpha",), bo_se, u),
        "bo_excess": (("alpha",), bo_excess, {**u, "long_name": "Bayes-optimal test error minus the population Bayes "
                                                                "risk, paired (common samples)"}),
        "bo_excess_se": (("alpha",), bo_excess_se, u),
        "bo_residual": (("alpha",), bo_res, u), "bo_converged": (("alpha",), bo_conv, u),
    }
    coords = {"activation": list(activations), "alpha": alphas, "set": np.arange(n_sets), "order": list(_ORDER),
              "seed": np.arange(n_seeds), "overlap": list(_SIM), "bo_order": ["q_k", "q_v"],
              "lam_kv": ["lambda_k", "lambda_v"], "lam_grid": [p[0] for p in pairs]}
    attrs = {"model": model, "nu": _json_nu(nu), "L": _json_L(L), "lambda_k": "optimal" if lam_optimal else lam_k,
             "lambda_v": "optimal" if lam_optimal else lam_v,
             "sqrt_ND": sqrt_ND, "n_replica": n_replica, "lambda_grid_search": int(grid is not None),
             "lambda_optimal": int(bool(lam_optimal)),
             "lambda_grid_rs_stable_only": int(bool(grid_rs_stable))}
    return xr.Dataset(data, coords=coords, attrs=attrs)


_JUMP = ("jump_k", "jump_k_se", "jump_v", "jump_v_se")


def low_snr_diagnostics(key, model: str, nu, L, alphas, lams, activation_name: str = "softmax",
                        jacobians=("implicit", "stein"), n_replica: int = 1000, n_sets: int = 2,
                        sqrt_ND: float = 500.0, n_seeds: int = 3, n_test: int = 4000, n_risk: int = 20_000,
                        informed_scale: float | None = None, tol: float = 1e-8, max_iter: int = 200,
                        qmc: bool = False, progress=None) -> xr.Dataset:
    r"""Replica theory against ERM along a decreasing lambda path (lambda_k = lambda_v), the driver of the
    ``duranthon-low-snr`` preset: where and why theory and simulation part.

    Replica: for each alpha, frozen set, V_hat estimator (``jacobians``: "implicit", the pointwise derivative of the
    proximal map; "stein", the distributional one, which includes the jumps of f where the proximal problem's
    global minimiser switches, see :class:`attnlab.duranthon.replica.MapValue`) and branch (informed and uninformed
    starts, :func:`attnlab.duranthon.replica.standard_starts`): continuation along ``lams`` (sorted decreasing), each
    point started at the previous fixed point of the same branch; after a point that does not converge the rest of
    that path is marked "continuation_stopped". Every point keeps its convergence report
    (status, residual, evaluations), the training objective per sample, the fraction of samples whose proximal
    problem is non-convex, the jump terms of V_hat, and the test error (risk-on-M formula, Monte Carlo SE).

    ERM: L-BFGS at ``D = sqrt_ND/sqrt(alpha)``, ``N = alpha D``, ``n_seeds`` data sets, from the informed start and
    from a random start (same data), at every lambda: overlaps, training objective, fresh-set test error and each
    fit's convergence report."""
    from attnlab.duranthon.erm import random_start
    from attnlab.duranthon.replica import standard_starts

    alphas = [float(a) for a in alphas]
    lams = sorted((float(x) for x in lams), reverse=True)
    if any(a <= 0 for a in alphas) or any(x <= 0 for x in lams):
        raise ValueError(f"alphas and lambdas must be > 0, got {alphas}, {lams}")
    act = activation(activation_name)
    starts = standard_starts(model, nu, informed_scale=informed_scale)
    branches = list(starts)
    n_al, n_l, n_j, n_b = len(alphas), len(lams), len(jacobians), len(branches)
    shp = (n_al, n_l, n_j, n_b, n_sets)
    order = np.full(shp + (6,), np.nan)
    res, obj, train, ncvx, inner, at_ev = (np.full(shp, np.nan) for _ in range(6))
    jump = np.full(shp + (4,), np.nan)
    n_iter, conv = np.zeros(shp, int), np.zeros(shp, bool)
    status = np.full(shp, "", dtype=object)
    test, test_se = np.full(shp, np.nan), np.full(shp, np.nan)
    sim = np.full((n_al, n_l, 2, n_seeds, 7), np.nan)
    sim_obj, sim_train, sim_test = (np.full((n_al, n_l, 2, n_seeds), np.nan) for _ in range(3))
    sim_conv, sim_status = np.zeros((n_al, n_l, 2, n_seeds), bool), np.full((n_al, n_l, 2, n_seeds), "", dtype=object)
    sizes = np.zeros((n_al, 2), int)
    k_rep, k_sim, k_risk = split(key, 3)
    sets = [frozen_samples(fold_in(k_rep, s), model, nu, L, n_replica, qmc=qmc) for s in range(n_sets)]
    c0 = informed_scale if informed_scale is not None else (math.sqrt(nu) if model == "spiked" else nu)
    total, done = n_al * (n_j * n_b * n_sets + 1), 0
    for i, alpha in enumerate(alphas):
        for j, jac in enumerate(jacobians):
            for b, name in enumerate(branches):
                for s in range(n_sets):
                    x, chi, track, record = starts[name], None, None, []
                    for m, lam in enumerate(lams):
                        if x is None:  # the path broke at a larger lambda: no start on this branch
                            status[i, m, j, b, s] = "continuation_stopped"
                            continue
                        # from the last solve's evaluations, rescaled to this lambda at no cost
                        start = rescaled_start(record, alpha, lam, lam, jac) if m else None
                        v0, hist = None, None
                        if start is not None:
                            x, v0, hist = tuple(start[0]), start[1], (start[2], start[3])
                        r = solve_replica(act, alpha, lam, lam, sets[s], x, tol=tol, max_iter=max_iter,
                                          branch=name, jacobian=jac, chi0=chi, track0=track, v0=v0,
                                          history=hist, record=record)
                        idx = (i, m, j, b, s)
                        order[idx], res[idx], obj[idx], train[idx] = r.order, r.residual, r.objective, r.train_loss
                        ncvx[idx], inner[idx], n_iter[idx], conv[idx] = (r.nonconvex, r.inner_unconverged,
                                                                         r.n_iter, r.converged)
                        status[idx], at_ev[idx] = r.status, r.at
                        jump[idx] = [getattr(r, f) for f in _JUMP]
                        x, chi, track = (tuple(r.order), r.chi, r.track) if r.converged else (None, None, None)
                        if r.converged:
                            o = r.order
                            test[idx], test_se[idx] = overlap_risk(fold_in(k_risk, 100 * i + m), act,
                                                                   model, nu, L, o.m_k, max(o.q_k, o.m_k**2), o.m_v,
                                                                   max(o.q_v, o.m_v**2), n_risk)
                    done += 1
                    if progress is not None:
                        progress(done, total)
        D = max(4, int(round(sqrt_ND / math.sqrt(alpha))))
        N = max(2, int(round(alpha * D)))
        sizes[i] = (D, N)
        for seed in range(n_seeds):
            kt, kd, kf, kr = split(fold_in(k_sim, 1000 * i + seed), 4)
            k_star, v_star = sample_teacher_sqrtD(kt, D)
            bt = sample_sequences(kd, k_star, v_star, model, nu, L, N)
            inits = (informed_start(k_star, v_star, model, nu, scale=c0), random_start(kr, D))
            for m, lam in enumerate(lams):
                for st, init in enumerate(inits):
                    e = fit_erm(act, bt.X, bt.mask, bt.y, lam, lam, *init)
                    o = erm_overlaps(e.k, e.v, k_star, v_star)
                    sim[i, m, st, seed] = o.as_array()
                    sim_train[i, m, st, seed] = e.train_loss
                    sim_conv[i, m, st, seed], sim_status[i, m, st, seed] = e.converged, e.status
                    sim_obj[i, m, st, seed] = e.train_loss + lam * (float(o.q_k) + float(o.q_v)) / (2 * alpha)
                    sim_test[i, m, st, seed] = fresh_test_error(kf, act, e.k, e.v, k_star, v_star, model, nu, L,
                                                                n_test, chunk=N)[0]
        done += 1
        if progress is not None:
            progress(done, total)
    u = {"units": "1"}
    rd = ("alpha", "lam", "jacobian", "branch", "set")
    sd = ("alpha", "lam", "start", "seed")
    data = {
        "replica_order": (rd + ("order",), order, u),
        "replica_residual": (rd, res, u), "replica_iterations": (rd, n_iter, u),
        "replica_converged": (rd, conv, u), "replica_status": (rd, status.astype(str), u),
        "replica_objective": (rd, obj, {**u, "long_name": "E[r^2/2] + lambda (q_k + q_v)/(2 alpha)"}),
        "replica_train_loss": (rd, train, u),
        "replica_nonconvex_fraction": (rd, ncvx, {**u, "long_name": "samples with several local minima"}),
        "replica_inner_unconverged": (rd, inner, u),
        "replica_at_eigenvalue": (rd, at_ev, {**u, "long_name": "replicon (AT) eigenvalue at the returned point; "
                                                                 "RS stable iff < 1"}),
        "replica_jump": (rd + ("jump",), jump, {**u, "long_name": "Stein minus pointwise V_hat, with SE"}),
        "replica_test_error": (rd, test, u), "replica_test_error_se": (rd, test_se, u),
        "sim_overlaps": (sd + ("overlap",), sim, u),
        "sim_train_loss": (sd, sim_train, u), "sim_objective": (sd, sim_obj, u),
        "sim_test_error": (sd, sim_test, {**u, "long_name": "fresh-set test error"}),
        "sim_converged": (sd, sim_conv, {**u, "long_name": "L-BFGS converged"}),
        "sim_status": (sd, sim_status.astype(str), u),
        "D": (("alpha",), sizes[:, 0], u), "N": (("alpha",), sizes[:, 1], u),
    }
    coords = {"alpha": alphas, "lam": lams, "jacobian": list(jacobians), "branch": branches,
              "set": np.arange(n_sets), "order": list(_ORDER), "jump": list(_JUMP), "start": ["informed", "random"],
              "seed": np.arange(n_seeds), "overlap": list(_SIM)}
    attrs = {"model": model, "nu": _json_nu(nu), "L": _json_L(L), "activation": activation_name, "sqrt_ND": sqrt_ND,
             "n_replica": n_replica, "frozen_samples": "scrambled Sobol (QMC)" if qmc else "Monte Carlo"}
    return xr.Dataset(data, coords=coords, attrs=attrs)
