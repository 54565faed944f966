r"""The preset ``duranthon-gd-landscape``: which minima of the empirical risk of softmax attention plain gradient
methods reach (Duranthon et al. 2025, App. A.2.2 and A.2.6); config, run, summary and finding. The algorithms are in
:mod:`attnlab.duranthon.landscape`, the figure in :mod:`attnlab.duranthon.figures`.

**Experiment.** At each point ``(alpha, nu, lambda)`` of ``points`` (spiked-SLR, length ``L``, ``lambda_k =
lambda_v = lambda``), ``n_sets`` training sets of ``N = alpha D`` sequences in dimension ``D``. On each set:

* full-batch GD (:func:`attnlab.duranthon.landscape.gradient_descent`) from ``n_starts`` random starts (Gaussian
  k, v with ``|k|^2 = |v|^2 = D``), from the informed start ``(c_nu k*, v*)`` (Prop. 4.2; the minimum the replica
  prediction describes), and from a start on M (overlaps ``m_k = m_v = 0.1``, ``q_k = q_v = 1``, no cross terms),
  for ``n_steps`` updates or until every run of the set has a gradient below ``stop_tol``;
* minibatch SGD (:func:`attnlab.duranthon.landscape.minibatch_sgd`) from the same random starts, then GD to the
  minimum of the basin it ended in;
* (on ``n_informed_sets`` sets in all, the first ``n_sets`` being those above) the informed start alone, whose
  test errors give the replica check its standard error;
* every end point classified (:func:`attnlab.duranthon.landscape.classify_minima`): ``informed`` minimum, another
  minimum ``lower`` or ``higher`` in objective, or ``unconverged``; test errors on one fresh test set per set.

**Theory.** The replica-symmetric fixed point at each point (:func:`attnlab.duranthon.replica.continue_in_lambda`
from the informed order parameters, frozen samples), its test error from the overlaps
(:func:`attnlab.duranthon.population.overlap_risk`) and its replicon eigenvalue (RS stable iff < 1), and the same for
linear attention (the checks' control).

**Checks** (5 standard errors; each with a negative control):

* M is invariant (App. A.2.2): at each point, the gradient-flow velocities of the three cross overlaps on M (at the
  informed runs' mean overlaps) vanish, estimated on ``n_fresh`` fresh sequences
  (:func:`attnlab.duranthon.landscape.manifold_drift`; the largest in standard errors of the three); control: the
  same point moved off M by ``off_manifold`` along ``(v*, k*)``;
* the informed minimum's test error against the replica prediction (SE over sets and of the replica's Monte Carlo),
  where the fixed point converged (otherwise not evaluated, with the reason); control: the replica prediction of
  linear attention at the same point. Where the fixed point is RS-unstable (replicon >= 1) the replica-symmetric
  prediction does not apply (the landscape has many minima there): no check, the metric ``*_replica_rs_stable`` is 0.
"""

from __future__ import annotations

import math
from typing import Literal

import jax
import numpy as np
import pydantic
import xarray as xr

from attnlab._random import fold_in, split
from attnlab.config import ExperimentConfig
from attnlab.duranthon.activations import activation
from attnlab.duranthon.data import sample_sequences, sample_teacher_sqrtD
from attnlab.duranthon.erm import informed_start, random_start
from attnlab.duranthon.landscape import (
    MINIMUM_CLASSES,
    OVERLAP_NAMES,
    classify_minima,
    gradient_descent,
    held_out_errors,
    manifold_drift,
    minibatch_sgd,
)
from attnlab.duranthon.population import overlap_risk, vectors_on_manifold
from attnlab.registry import Check

__all__ = ["LandscapeConfig", "run", "summarize", "finding"]

CROSS = ("m_kv", "m_vk", "q_kv")
ALGORITHMS = ("gd", "sgd")


class LandscapeConfig(ExperimentConfig):
    """Config of ``duranthon-gd-landscape``."""

    model: Literal["spiked"] = pydantic.Field("spiked", description="data model (spiked-SLR only)")
    L: int = pydantic.Field(3, ge=2, description="sequence length")
    points: tuple[tuple[float, float, float], ...] = pydantic.Field(
        ((2.0, 2.0, 1.0), (2.0, 2.0, 0.3), (2.0, 2.0, 0.1)), min_length=1,
        description="(alpha, nu, lambda) of each point; lambda_k = lambda_v = lambda")
    D: int = pydantic.Field(150, ge=8, description="dimension")
    n_sets: int = pydantic.Field(4, ge=2, description="training sets per point (their spread gives the SE)")
    n_starts: int = pydantic.Field(32, ge=1, description="random starts per training set (GD and SGD each)")
    n_informed_sets: int = pydantic.Field(16, ge=2, description="training sets of the informed run (the first "
                                          "n_sets also run the random starts): the replica check's SE")
    step_size: float = pydantic.Field(0.5, gt=0, description="GD step eta (update -eta D grad)")
    n_steps: int = pydantic.Field(8000, ge=1, description="GD updates")
    n_logs: int = pydantic.Field(40, ge=1, description="logs along GD (n_steps is rounded to a multiple)")
    sgd_step_size: float = pydantic.Field(0.05, gt=0, description="SGD step eta")
    sgd_steps: int = pydantic.Field(8000, ge=1, description="SGD updates before the GD polish")
    batch_size: int = pydantic.Field(8, ge=1, description="SGD minibatch size")
    grad_tol: float = pydantic.Field(1e-6, gt=0, description="converged if |D grad| / sqrt(D) <= grad_tol")
    stop_tol: float = pydantic.Field(1e-10, ge=0, description="GD stops once every run of a set has |D grad| / sqrt(D) "
                                     "<= stop_tol (0: never; below grad_tol)")
    point_tol: float = pydantic.Field(1e-3, gt=0, description="same minimum if |w_a - w_b| / sqrt(2D) <= point_tol")
    n_test: int = pydantic.Field(4000, ge=100, description="fresh test sequences per training set")
    n_fresh: int = pydantic.Field(20_000, ge=100, description="fresh sequences of the drift estimate on M")
    off_manifold: float = pydantic.Field(0.3, gt=0, description="the drift control's cross overlaps")
    n_replica: int = pydantic.Field(1000, ge=50, description="frozen samples of the replica fixed point")
    n_risk: int = pydantic.Field(20_000, ge=1000, description="Monte Carlo samples of the replica test error")

    @pydantic.field_validator("points")
    @classmethod
    def _points(cls, v):
        for p in v:
            if not all(math.isfinite(x) and x > 0 for x in p):
                raise ValueError(f"every alpha, nu, lambda must be finite and > 0, got {p}")
        return v

    @pydantic.model_validator(mode="after")
    def _stop_below_convergence(self):
        if not self.stop_tol < self.grad_tol:
            raise ValueError(f"stop_tol ({self.stop_tol:g}) must be below grad_tol ({self.grad_tol:g})")
        return self


def _replica(name: str, alpha, nu, lam, L, n_replica, n_risk, key):
    """The replica fixed point of ``name`` attention at (alpha, nu, lambda): (order (6,), test error, its SE,
    replicon eigenvalue, converged)."""
    from attnlab.duranthon.replica import frozen_samples
    from attnlab.duranthon.replica.continuation import continue_in_lambda

    act = activation(name)
    samples = frozen_samples(fold_in(key, 0), "spiked", nu, L, n_replica)
    c0 = math.sqrt(nu)
    r = continue_in_lambda(act, alpha, lam, lam, samples, (c0, c0 * c0, 1.0, 1.0, 1.0, 1.0))[-1]
    o = r.order
    if not (r.converged and o.q_k >= o.m_k**2 and o.q_v >= o.m_v**2):
        return np.asarray(o), math.nan, math.nan, float(r.at), False
    m, se = overlap_risk(fold_in(key, 1), act, "spiked", nu, L, o.m_k, o.q_k, o.m_v, o.q_v, n_risk)
    return np.asarray(o), m, se, float(r.at), True


def _one_set(cfg: LandscapeConfig, key, alpha, nu, lam, n_starts: int | None = None):
    """GD, SGD, classes and test errors on one training set (module docstring); ``n_starts=0``: the informed and
    on-M GD runs only, returning (trajectory, the informed minimum's test error, its SE)."""
    act = activation("softmax")
    D = cfg.D
    N = max(2, int(round(alpha * D)))
    n_steps = max(cfg.n_logs, cfg.n_steps // cfg.n_logs * cfg.n_logs)
    kt, kd, ks, km, kg, kf = split(key, 6)
    k_star, v_star = sample_teacher_sqrtD(kt, D)
    b = sample_sequences(kd, k_star, v_star, "spiked", nu, cfg.L, N)
    R = cfg.n_starts if n_starts is None else n_starts
    starts = [np.concatenate(random_start(fold_in(ks, i), D)) for i in range(R)]
    k_m, v_m = vectors_on_manifold(km, k_star, v_star, 0.1, 1.0, 0.1, 1.0)
    # the runs' starts, results and their slices as host arrays: indexing and joining them in NumPy copies them
    # exactly, where eager jnp would compile and load a program per shape
    W0 = np.stack([*starts, np.concatenate(informed_start(k_star, v_star, "spiked", nu)),
                   np.concatenate([k_m, v_m])])
    gd = jax.tree.map(np.asarray, gradient_descent(act, W0, b.X, b.mask, b.y, lam, cfg.step_size, n_steps,
                                                   cfg.n_logs, k_star, v_star, cfg.stop_tol))
    test = sample_sequences(kf, k_star, v_star, "spiked", nu, cfg.L, cfg.n_test)
    if R == 0:
        err, err_se = held_out_errors(act, gd.W[:1], test.X, test.mask, test.y)
        return gd, float(err[0]), float(err_se[0])
    W_sgd = minibatch_sgd(act, jax.random.split(kg, R), W0[:R], b.X, b.mask, b.y, lam,
                          cfg.sgd_step_size, cfg.sgd_steps, cfg.batch_size)
    sgd = jax.tree.map(np.asarray, gradient_descent(act, W_sgd, b.X, b.mask, b.y, lam, cfg.step_size, n_steps, 1,
                                                    k_star, v_star, cfg.stop_tol))
    # classes among all end points of the set: random GD, SGD, then the informed run
    W_all = np.concatenate([gd.W[:R], sgd.W, gd.W[R:R + 1]])
    obj_all = np.concatenate([gd.objective[-1, :R], sgd.objective[-1], gd.objective[-1, R:][:1]])
    g_all = np.concatenate([gd.grad_norm[:R], sgd.grad_norm, gd.grad_norm[R:][:1]])
    classes, labels = classify_minima(W_all, obj_all, g_all, 2 * R, cfg.grad_tol, cfg.point_tol)
    err, err_se = held_out_errors(act, W_all, test.X, test.mask, test.y)
    return gd, sgd, classes, labels, np.asarray(err), np.asarray(err_se), np.asarray(obj_all), np.asarray(g_all)


def run(cfg: LandscapeConfig, key, progress=None) -> xr.Dataset:
    act = activation("softmax")
    P, S, R = len(cfg.points), cfg.n_sets, cfg.n_starts
    T = cfg.n_logs + 1
    traj = np.full((P, S, R, T, 7), np.nan)
    traj_obj = np.full((P, S, R, T), np.nan)
    S_inf = max(cfg.n_informed_sets, S)
    informed = np.full((P, S_inf, T, 7), np.nan)
    on_m = np.full((P, S_inf, T, 7), np.nan)
    end = np.full((P, S, 2, R, 7), np.nan)
    end_obj, end_grad = np.full((P, S, 2, R), np.nan), np.full((P, S, 2, R), np.nan)
    end_err, end_err_se = np.full((P, S, 2, R), np.nan), np.full((P, S, 2, R), np.nan)
    end_class, end_min = np.zeros((P, S, 2, R), int), np.zeros((P, S, 2, R), int)
    inf_obj, inf_grad, inf_err, inf_err_se = (np.full((P, S_inf), np.nan) for _ in range(4))
    rep_order, rep_err, rep_se, rep_at = np.full((P, 6), np.nan), np.full(P, np.nan), np.full(P, np.nan), np.full(
        P, np.nan)
    lin_err, lin_se = np.full(P, np.nan), np.full(P, np.nan)
    drift, drift_se = np.full((P, 2, 3), np.nan), np.full((P, 2, 3), np.nan)
    k_sets, k_rep, k_drift = split(key, 3)
    total = P * (S + 2)
    for p, (alpha, nu, lam) in enumerate(cfg.points):
        for s in range(S):
            gd, sgd, classes, labels, err, err_se, obj, g = _one_set(cfg, fold_in(k_sets, 1000 * p + s),
                                                                     alpha, nu, lam)
            traj[p, s] = np.swapaxes(np.asarray(gd.overlaps[:, :R]), 0, 1)
            traj_obj[p, s] = np.asarray(gd.objective[:, :R]).T
            informed[p, s], on_m[p, s] = np.asarray(gd.overlaps[:, R]), np.asarray(gd.overlaps[:, R + 1])
            end[p, s, 0], end[p, s, 1] = np.asarray(gd.overlaps[-1, :R]), np.asarray(sgd.overlaps[-1])
            for a in range(2):
                sl = slice(a * R, (a + 1) * R)
                end_obj[p, s, a], end_grad[p, s, a] = obj[sl], g[sl]
                end_err[p, s, a], end_err_se[p, s, a] = err[sl], err_se[sl]
                end_class[p, s, a], end_min[p, s, a] = classes[sl], labels[sl]
            inf_obj[p, s], inf_grad[p, s], inf_err[p, s], inf_err_se[p, s] = obj[-1], g[-1], err[-1], err_se[-1]
            if progress is not None:
                progress(p * (S + 2) + s + 1, total)
        for s in range(S, S_inf):  # more sets for the informed minimum alone: the replica check's SE
            gd, inf_err[p, s], inf_err_se[p, s] = _one_set(cfg, fold_in(k_sets, 1000 * p + s), alpha,
                                                           nu, lam, n_starts=0)
            informed[p, s], on_m[p, s] = np.asarray(gd.overlaps[:, 0]), np.asarray(gd.overlaps[:, 1])
            inf_obj[p, s], inf_grad[p, s] = float(gd.objective[-1, 0]), float(gd.grad_norm[0])
        if progress is not None:
            progress(p * (S + 2) + S + 1, total)
        kp = fold_in(k_rep, p)
        rep_order[p], rep_err[p], rep_se[p], rep_at[p], _ = _replica("softmax", alpha, nu, lam, cfg.L, cfg.n_replica,
                                                                     cfg.n_risk, kp)
        _, lin_err[p], lin_se[p], _, _ = _replica("linear", alpha, nu, lam, cfg.L, cfg.n_replica, cfg.n_risk, kp)
        # M's invariance at the informed runs' mean overlaps, on M and moved off it
        kd = fold_in(k_drift, p)
        k_star, v_star = sample_teacher_sqrtD(fold_in(kd, 0), cfg.D)
        m = np.mean(informed[p, :, -1], axis=0)
        k, v = vectors_on_manifold(fold_in(kd, 1), k_star, v_star, m[0], max(m[1], m[0] ** 2), m[2],
                                   max(m[3], m[2] ** 2))
        fresh = sample_sequences(fold_in(kd, 2), k_star, v_star, "spiked", nu, cfg.L, cfg.n_fresh)
        e = cfg.off_manifold
        for side, (kk, vv) in enumerate(((k, v), (k + e * v_star, v + e * k_star))):
            mu, se = manifold_drift(act, kk, vv, k_star, v_star, fresh.X, fresh.mask, fresh.y)
            drift[p, side], drift_se[p, side] = np.asarray(mu), np.asarray(se)
        if progress is not None:
            progress((p + 1) * (S + 2), total)
    one = {"units": "1"}
    time = np.linspace(0.0, cfg.step_size * max(cfg.n_logs, cfg.n_steps // cfg.n_logs * cfg.n_logs), T)
    coords = {
        "point": ("point", np.arange(P), {"units": "1", "long_name": "point index"}),
        "alpha": ("point", np.array([p[0] for p in cfg.points]), {"units": "1", "long_name": "sample ratio alpha"}),
        "nu": ("point", np.array([p[1] for p in cfg.points]), {"units": "1", "long_name": "signal strength nu"}),
        "lam": ("point", np.array([p[2] for p in cfg.points]),
                {"units": "1", "long_name": "regularisation lambda_k = lambda_v"}),
        "set": ("set", np.arange(S), {"units": "1", "long_name": "training set"}),
        "informed_set": ("informed_set", np.arange(S_inf),
                         {"units": "1", "long_name": "training set of the informed run (the first n_sets: set)"}),
        "start": ("start", np.arange(R), {"units": "1", "long_name": "random start"}),
        "time": ("time", time, {"units": "1", "long_name": "high-dimensional time eta x updates"}),
        "overlap": ("overlap", list(OVERLAP_NAMES), {"units": "1", "long_name": "overlap (divided by D)"}),
        "algorithm": ("algorithm", list(ALGORITHMS), {"units": "1", "long_name": "full-batch GD or minibatch SGD"}),
        "order": ("order", ["m_k", "q_k", "V_k", "m_v", "q_v", "V_v"],
                  {"units": "1", "long_name": "replica order parameter"}),
        "side": ("side", ["on_M", "off_M"], {"units": "1", "long_name": "point on M or moved off it"}),
        "cross": ("cross", list(CROSS), {"units": "1", "long_name": "cross overlap"}),
    }
    data = {
        "gd_overlaps": (("point", "set", "start", "time", "overlap"), traj,
                        {**one, "long_name": "overlaps along GD from random starts"}),
        "gd_objective": (("point", "set", "start", "time"), traj_obj,
                         {**one, "long_name": "objective per sample along GD from random starts"}),
        "informed_overlaps": (("point", "informed_set", "time", "overlap"), informed,
                              {**one, "long_name": "overlaps along GD from the informed start"}),
        "on_m_overlaps": (("point", "informed_set", "time", "overlap"), on_m,
                          {**one, "long_name": "overlaps along GD from a start on M"}),
        "end_overlaps": (("point", "set", "algorithm", "start", "overlap"), end,
                         {**one, "long_name": "overlaps at the end point"}),
        "end_objective": (("point", "set", "algorithm", "start"), end_obj,
                          {**one, "long_name": "objective per sample at the end point"}),
        "end_grad_norm": (("point", "set", "algorithm", "start"), end_grad,
                          {**one, "long_name": "gradient norm |D grad| / sqrt(D) at the end point"}),
        "end_test_error": (("point", "set", "algorithm", "start"), end_err,
                           {**one, "long_name": "test error at the end point"}),
        "end_test_error_se": (("point", "set", "algorithm", "start"), end_err_se,
                              {**one, "long_name": "standard error of the test error"}),
        "end_class": (("point", "set", "algorithm", "start"), end_class,
                      {**one, "long_name": "class of the end point", "flag_values": list(range(4)),
                       "flag_meanings": " ".join(MINIMUM_CLASSES)}),
        "end_minimum": (("point", "set", "algorithm", "start"), end_min,
                        {**one, "long_name": "label of the minimum within its set (-1: unconverged)"}),
        "informed_objective": (("point", "informed_set"), inf_obj,
                               {**one, "long_name": "objective at the informed minimum"}),
        "informed_grad_norm": (("point", "informed_set"), inf_grad, {**one, "long_name": "gradient norm, informed run"}),
        "informed_test_error": (("point", "informed_set"), inf_err, {**one, "long_name": "test error, informed minimum"}),
        "informed_test_error_se": (("point", "informed_set"), inf_err_se, {**one, "long_name": "its standard error"}),
        "replica_order": (("point", "order"), rep_order, {**one, "long_name": "replica fixed point, softmax"}),
        "replica_test_error": ("point", rep_err, {**one, "long_name": "replica test error, softmax"}),
        "replica_test_error_se": ("point", rep_se, {**one, "long_name": "Monte Carlo SE of the replica test error"}),
        "replica_at": ("point", rep_at, {**one, "long_name": "replicon eigenvalue (RS stable iff < 1)"}),
        "linear_replica_test_error": ("point", lin_err, {**one, "long_name": "replica test error, linear attention"}),
        "linear_replica_test_error_se": ("point", lin_se, {**one, "long_name": "its Monte Carlo SE"}),
        "cross_drift": (("point", "side", "cross"), drift,
                        {**one, "long_name": "velocity of the cross overlaps (fresh-sample mean)"}),
        "cross_drift_se": (("point", "side", "cross"), drift_se, {**one, "long_name": "its standard error"}),
    }
    return xr.Dataset(data, coords=coords)


def _fractions(ds: xr.Dataset, p: int, algorithm: str) -> dict:
    c = ds.end_class.isel(point=p).sel(algorithm=algorithm).values
    return {name: float(np.mean(c == i)) for i, name in enumerate(MINIMUM_CLASSES)}


def summarize(ds: xr.Dataset, cfg: LandscapeConfig):
    metrics, checks = {}, []
    for p in range(ds.sizes["point"]):
        tag = f"a{float(ds.alpha[p]):g}_nu{float(ds.nu[p]):g}_lam{float(ds.lam[p]):g}"
        for algorithm in ALGORITHMS:
            for name, f in _fractions(ds, p, algorithm).items():
                metrics[f"{tag}_{algorithm}_frac_{name}"] = f
        mins = ds.end_minimum.isel(point=p).values
        metrics[f"{tag}_minima_per_set"] = float(np.mean([len(set(m[m >= 0].ravel())) for m in mins]))
        metrics[f"{tag}_replica_at"] = float(ds.replica_at[p])
        metrics[f"{tag}_on_m_max_cross"] = float(np.abs(ds.on_m_overlaps.isel(point=p).sel(overlap=list(CROSS))).max())
        metrics[f"{tag}_random_end_max_cross"] = float(
            np.abs(ds.end_overlaps.isel(point=p).sel(algorithm="gd", overlap=list(CROSS))).max())
        # M's invariance: the largest of the three velocities in standard errors, on M and off it
        mu, se = ds.cross_drift.isel(point=p).values, ds.cross_drift_se.isel(point=p).values
        checks.append(_drift_check(tag, mu, se, cfg.off_manifold))
        err = ds.end_test_error.isel(point=p).sel(algorithm="gd").values
        cls = ds.end_class.isel(point=p).sel(algorithm="gd").values
        for i, name in enumerate(MINIMUM_CLASSES[:3]):
            # None where GD reached no minimum of this class (a metric that does not apply: NaN would fail the run)
            metrics[f"{tag}_gd_test_error_{name}"] = float(np.mean(err[cls == i])) if (cls == i).any() else None
        inf = ds.informed_test_error.isel(point=p).values
        metrics[f"{tag}_informed_test_error"] = float(np.mean(inf))
        metrics[f"{tag}_replica_test_error"] = float(ds.replica_test_error[p])
        name = f"{tag}: informed minimum's test error vs replica"
        at = float(ds.replica_at[p])
        if not math.isfinite(float(ds.replica_test_error[p])):
            checks.append(Check.not_evaluated(name, "the replica fixed point did not converge"))
        elif not at < 1:  # the RS prediction does not apply there (several minima): recorded, not checked
            metrics[f"{tag}_replica_rs_stable"] = 0.0
        else:
            metrics[f"{tag}_replica_rs_stable"] = 1.0
            se = math.hypot(float(np.std(inf, ddof=1) / math.sqrt(inf.size)), float(ds.replica_test_error_se[p]))
            checks.append(Check(name, float(ds.replica_test_error[p]), float(np.mean(inf)), 5 * se,
                                basis="5 SE (training sets and the replica's Monte Carlo)",
                                control="linear attention's replica test error",
                                control_theory=float(ds.linear_replica_test_error[p])))
    return metrics, checks


def _drift_check(tag, mu, se, off) -> Check:
    """The cross-overlap velocities on M against 0: the largest of the three in SE; control: the point moved off M."""
    i_on, i_off = int(np.argmax(np.abs(mu[0]) / se[0])), int(np.argmax(np.abs(mu[1]) / se[1]))
    return Check(f"{tag}: cross-overlap velocity on M ({CROSS[i_on]})", 0.0, float(mu[0, i_on]), 5 * float(se[0, i_on]),
                 basis="5 SE of the fresh-sample mean",
                 control=f"the point moved off M (cross overlaps {off:g}), {CROSS[i_off]}",
                 control_simulation=float(mu[1, i_off]))


def finding(metrics: dict, cfg: LandscapeConfig) -> str:
    parts = []
    for alpha, nu, lam in cfg.points:
        tag = f"a{alpha:g}_nu{nu:g}_lam{lam:g}"
        parts.append(f"lambda={lam:g}: GD {100 * metrics[f'{tag}_gd_frac_informed']:.0f}% / SGD "
                     f"{100 * metrics[f'{tag}_sgd_frac_informed']:.0f}% (lower minima "
                     f"{100 * metrics[f'{tag}_gd_frac_lower']:.0f}%), {metrics[f'{tag}_minima_per_set']:.1f} minima "
                     f"per set, replicon {metrics[f'{tag}_replica_at']:.2f}")
    return "Random starts reaching the informed (replica) minimum: " + "; ".join(parts)
