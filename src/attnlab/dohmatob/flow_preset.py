"""The mean-field presets of Dohmatob (NeurIPS 2025): ``dohmatob-flow`` (the 2-D flow on M, its stationary points
and their classification, Props. 6, 7, 10) and ``dohmatob-phase-diagram`` (learnability in (gamma, alpha), Prop. 2
and Condition 2): configs, runs and summaries. Their figures are in :mod:`attnlab.dohmatob.figures`."""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pydantic
import xarray as xr

from attnlab import programs
from attnlab._random import fold_in
from attnlab.config import ExperimentConfig
from attnlab.dohmatob.flows import field2, field4, integrate, stationary_points_on_M
from attnlab.dohmatob.meanfield import (
    DohmatobModel,
    dual_kernel,
    mc_risk_batches_to_se,
    mc_risk_gammas,
    mean_field_risk,
    mean_field_risk_roundoff,
    rem_constants_alpha,
)
from attnlab.dohmatob.model import check_links
from attnlab.registry import Check
from attnlab.slr import resolving_se
from attnlab.slr.overlaps import DohmatobOverlaps

__all__ = ["CITATION", "PROP10", "FlowConfig", "run_flow", "summarize_flow", "PhaseConfig", "run_phase",
           "summarize_phase"]

CITATION = "Dohmatob, NeurIPS 2025"


def _by_link(fn, models):
    """``(z, i) -> fn(z, models[i])``: one function of the link's index (``lax.switch`` over the links), so that one
    traced and compiled program serves every link (under ``vmap`` over ``i`` every branch is evaluated and the
    link's own selected)."""
    branches = [lambda z, m=m: fn(z, m) for m in models]
    return lambda z, i: jax.lax.switch(i, branches, z)


@partial(programs.jit, static_argnames=("models", "ts"))
def _flows(y0, models: tuple, ts: tuple):
    """Every link's flows from the rows of ``y0`` (2 n_links, k, 4) in one compiled program: group ``g < n_links``
    holds 2-D flows of link ``g`` run as two copies of themselves, (mu, nu, mu, nu) under (field2, field2), group
    ``n_links + l`` the 4-D flows of link ``l``. The solve is traced once with the group's index a traced scalar
    (``lax.map`` over the groups, ``vmap`` over the rows), so that ``lax.switch`` runs the group's own branch only
    (under ``vmap`` over a batched index every branch would be evaluated for every row, at every step of the slowest
    trajectory). Returns the trajectories (2 n_links, k, len(ts), 4) and whether each solve succeeded."""
    n_links = len(models)
    twice = _by_link(lambda z, m: jnp.concatenate([field2(z[:2], m)] * 2), models)
    f4 = _by_link(field4, models)

    def field(z, i):
        return jax.lax.switch(i // n_links, [twice, f4], z, i % n_links)

    def per_group(args):
        rows, i = args
        sol = jax.vmap(lambda y: integrate(field, y, np.asarray(ts), i))(rows)
        return sol.ys, sol.succeeded

    return jax.lax.map(per_group, (y0, jnp.arange(y0.shape[0])))


@partial(programs.jit, static_argnames=("models",))
def _field_grid(grid_points, models: tuple):
    """The 2-D field of every link at the points ``grid_points`` (n, 2): (n_links, n, 2)."""
    f2 = _by_link(field2, models)
    return jax.vmap(lambda i: jax.vmap(lambda z: f2(z, i))(grid_points))(jnp.arange(len(models)))


@partial(programs.jit, static_argnames=("models",))
def _field_norms(y, which, models: tuple):
    """max |field2| at each point ``y`` (n, 2) for its link ``which`` (n,)."""
    f2 = _by_link(field2, models)
    return jax.vmap(lambda z, i: jnp.max(jnp.abs(f2(z, i))))(y, which)


@partial(programs.jit, static_argnames=("models",))
def _risks_on_m(y, which, models: tuple):
    """The mean-field risk and the bound on its round-off at each point (mu, nu) = ``y`` (n, 2) of M, for its link
    ``which`` (n,)."""
    return jax.vmap(lambda z, i: jax.lax.switch(i, [
        lambda z, m=m: (mean_field_risk(DohmatobOverlaps.on_M(z[0], z[1]), m),
                        mean_field_risk_roundoff(DohmatobOverlaps.on_M(z[0], z[1]), m)) for m in models], z))(y, which)


def _pad_rows(n: int, size: int) -> np.ndarray:
    """Row indices ``0 .. n - 1`` padded to ``size`` by repeating row 0 (the padding computes that row again)."""
    return np.concatenate([np.arange(n), np.zeros(size - n, dtype=int)])


# Prop. 10 as printed (the ReLU item with the typo fixed as in its proof, App. F.3)
PROP10 = {
    "linear": {(1, 1): "sink", (1, -1): "source", (-1, 1): "saddle", (-1, -1): "saddle"},
    "quadratic": {(1, 1): "sink", (1, -1): "sink", (-1, 1): "saddle", (-1, -1): "saddle", (-1, 0): "saddle",
                  (1, 0): "source", ("B=0", 0): "saddle"},
    "relu": {(1, 1): "sink", (-1, 1): "saddle", (1, -1): "degenerate", (-1, -1): "degenerate"},
}


class FlowConfig(ExperimentConfig):
    """Config of the mean-field flow experiment (field names are the ``--set`` keys)."""

    d: int = pydantic.Field(100, ge=4, description="dimension")
    L: int = pydantic.Field(20, ge=2, description="sequence length")
    beta: float = pydantic.Field(1.0, gt=0, description="normalised inverse temperature, lambda = beta sqrt(d)")
    gamma: float = pydantic.Field(1 / math.sqrt(2), gt=0, lt=1, description="secret-token std, c = sqrt(1 - gamma^2)")
    links: tuple[str, ...] = pydantic.Field(("linear", "quadratic", "relu"), description="links sigma, one flow each")
    n_grid: int = pydantic.Field(9, ge=2, description="starting points per axis of the phase portrait")
    t_max: float = pydantic.Field(50.0, gt=0, description="time horizon of the flows")
    n_times: int = pydantic.Field(101, ge=2, description="saved times on [0, t_max]")
    n_mc: int = pydantic.Field(20_000, ge=100, description="Monte Carlo samples per stationary point with mu = 1, at "
                               "most (each drawn until its SE resolves its check's control)")

    @pydantic.field_validator("links")
    @classmethod
    def _links(cls, v):
        return check_links(v)


FIELD_GRID = 41
"""Points per axis of the grid on [-1, 1]^2 at which the closed-form field (Prop. 6) is stored for the streamlines of
the phase portrait (one compiled, vmapped evaluation per link)."""

PERTURB = 1e-6
"""Distance inside the square at which the field check's control evaluates the field (far above the bisection's
bracket, 1e-12, far below the grid spacing of the root search, 1e-3)."""
OFF_M = 1e-8  # distance off M of the starts of the invariance check's control (100x its tolerance)
BISECT_XTOL = 1e-12  # the bracket of flows._bisect


def _trivial(p) -> bool:
    """The field vanishes at ``p`` by algebra: both coordinates are +-1 (the (1 - mu^2), (1 - nu^2) factors)."""
    return abs(p.mu) == 1.0 and abs(p.nu) == 1.0


def _point_key(p):
    mu = "B=0" if p.family.startswith("B=0") else int(round(p.mu))
    return (mu, int(round(p.nu)))


def run_flow(cfg: FlowConfig, key, progress=None) -> xr.Dataset:
    g = np.linspace(-0.95, 0.95, cfg.n_grid)
    starts = np.array([(a, b) for a in g for b in g])
    ts = np.linspace(0.0, cfg.t_max, cfg.n_times)
    grid = np.linspace(-1.0, 1.0, FIELD_GRID)
    grid_points = jnp.asarray(np.stack(np.meshgrid(grid, grid), axis=-1).reshape(-1, 2))  # row: nu, column: mu
    models = tuple(DohmatobModel(cfg.d, cfg.L, cfg.beta, cfg.gamma, link) for link in cfg.links)
    n_links, n_starts = len(models), len(starts)
    # M is invariant under the 4-D flow (r = 0): integrate from points of M, record the largest |eta|, |zeta|, and,
    # as the check's control, from the same points a distance OFF_M off M
    on_m = starts[:: max(1, n_starts // 8)]
    y4 = np.concatenate([on_m, np.zeros((len(on_m), 2))], axis=1)
    y4 = np.concatenate([y4, np.concatenate([on_m, np.full((len(on_m), 2), OFF_M)], axis=1)])
    # every link's 2-D flows from every start and 4-D flows from y4 in one solve (one trace of the integrator): a 2-D
    # flow runs as two copies of itself, (mu, nu, mu, nu) under (field2, field2), which leaves the RMS error norm and
    # so every step of the 2-D solve as they were; the 4-D rows are padded to the 2-D count with their first row
    n_rows = max(n_starts, len(y4))
    y0 = np.concatenate([np.broadcast_to(np.tile(starts, 2)[_pad_rows(n_starts, n_rows)], (n_links, n_rows, 4)),
                         np.broadcast_to(y4[_pad_rows(len(y4), n_rows)], (n_links, n_rows, 4))])
    ys, ok = (np.asarray(x) for x in _flows(jnp.asarray(y0), models, tuple(float(t) for t in ts)))
    both, failed = np.where(ok[..., None, None], ys, np.nan), ~ok  # NaN where a solve failed
    traj, failed2 = both[:n_links, :n_starts, :, :2], failed[:n_links, :n_starts]
    t4 = both[n_links:, :len(y4)].reshape(n_links, 2, len(on_m), len(ts), 4)
    failed4 = failed[n_links:, :len(y4)]
    fields = np.asarray(_field_grid(grid_points, models)).reshape(n_links, FIELD_GRID, FIELD_GRID, 2)
    inv = np.max(np.abs(t4[:, 0, :, :, 2:]), axis=(1, 2, 3))
    inv_control = np.max(np.abs(t4[:, 1, :, :, 2:]), axis=(1, 2, 3))
    failures = failed2.reshape(n_links, -1).sum(axis=1) + failed4.reshape(n_links, -1).sum(axis=1)
    points = [stationary_points_on_M(m) for m in models]
    y = jnp.array([[p.mu, p.nu] for sps in points for p in sps])
    which = jnp.array([li for li, sps in enumerate(points) for _ in sps])
    F = np.asarray(_field_norms(y, which, models))
    # the control of the field check: the field a distance PERTURB inside the square from each point
    Fp = np.asarray(_field_norms(y - PERTURB * jnp.where(y > 0, 1.0, -1.0), which, models))
    # the mean-field risk and the bound on its float64 round-off (it vanishes by algebra at the located points, where
    # its computed value is round-off of that size)
    R, R_roundoff = (np.asarray(x) for x in _risks_on_m(y, which, models))
    # located points (mu = 1): the mean field's premise holds; compare with the exact model, each point drawn until its
    # SE resolves its check's control, the mirror point (-1, nu) (none: all n_mc; the other points: two chunks)
    o = [DohmatobOverlaps.on_M(jnp.array([p.mu for p in sps]), jnp.array([p.nu for p in sps])) for sps in points]
    targets, j = [], 0
    for sps in points:
        risk = {(p.mu, p.nu): R[j + i] for i, p in enumerate(sps)}
        targets.append([resolving_se(risk[p.mu, p.nu], risk.get((-p.mu, p.nu), np.nan)) if p.mu == 1.0 else np.inf
                        for p in sps])
        j += len(sps)
    mcs = mc_risk_batches_to_se([fold_in(key, li) for li in range(n_links)], o, models, targets, cfg.n_mc)
    pts_rows, j = [], 0
    for li, (link, sps) in enumerate(zip(cfg.links, points)):
        mc, mc_se, mc_n = (np.asarray(x) for x in mcs[li])
        for i, p in enumerate(sps):
            located = p.mu == 1.0
            expected = PROP10.get(link, {}).get(_point_key(p), "")
            pts_rows.append((link, p.mu, p.nu, p.kind, expected, p.family, float(np.real(p.eigenvalues[0])),
                             float(np.real(p.eigenvalues[-1])), float(F[j]), float(R[j]),
                             float(mc[i]) if located else np.nan, float(mc_se[i]) if located else np.nan,
                             p.converged, float(Fp[j]), _trivial(p), float(R_roundoff[j]),
                             int(mc_n[i]) if located else 0))
            j += 1
        if progress is not None:
            progress(li + 1, n_links)
    cols = list(zip(*pts_rows))
    pd = ("point",)
    data = {
        "mu": (("link", "start", "time"), traj[..., 0], {"units": "1"}),
        "nu": (("link", "start", "time"), traj[..., 1], {"units": "1"}),
        "field_mu": (("link", "grid_nu", "grid_mu"), fields[..., 0], {
            "units": "1/time", "long_name": "mu' of the 2-D flow on M (Prop. 6), closed form"}),
        "field_nu": (("link", "grid_nu", "grid_mu"), fields[..., 1], {
            "units": "1/time", "long_name": "nu' of the 2-D flow on M (Prop. 6), closed form"}),
        "mu0": (("start",), starts[:, 0], {"units": "1"}),
        "nu0": (("start",), starts[:, 1], {"units": "1"}),
        "invariance_max_offM": (("link",), np.array(inv), {"units": "1", "long_name": "max |eta|, |zeta| of the 4-D "
                                                                                      "flow started on M"}),
        "invariance_max_offM_control": (("link",), np.array(inv_control), {
            "units": "1", "long_name": f"max |eta|, |zeta| of the 4-D flow started {OFF_M:g} off M"}),
        "flow_failures": (("link",), np.array(failures), {"units": "1",
                                                          "long_name": "failed ODE solves (their rows are NaN)"}),
        "sp_link": (pd, np.array(cols[0], dtype=object).astype(str), {"units": "1"}),
        "sp_mu": (pd, np.array(cols[1]), {"units": "1"}),
        "sp_nu": (pd, np.array(cols[2]), {"units": "1"}),
        "sp_kind": (pd, np.array(cols[3]).astype(str), {"units": "1"}),
        "sp_kind_prop10": (pd, np.array(cols[4]).astype(str), {"units": "1"}),
        "sp_family": (pd, np.array(cols[5]).astype(str), {"units": "1"}),
        "sp_eig_min": (pd, np.array(cols[6]), {"units": "1/time"}),
        "sp_eig_max": (pd, np.array(cols[7]), {"units": "1/time"}),
        "sp_field_norm": (pd, np.array(cols[8]), {"units": "1/time"}),
        "sp_mean_field_risk": (pd, np.array(cols[9]), {"units": "y^2"}),
        "sp_mean_field_risk_roundoff": (pd, np.array(cols[15]), {
            "units": "y^2", "long_name": "bound on the float64 round-off of the mean-field risk"}),
        "sp_mc_risk": (pd, np.array(cols[10]), {"units": "y^2", "max_samples": cfg.n_mc}),
        "sp_mc_count": (pd, np.array(cols[16]), {
            "units": "1", "long_name": "Monte Carlo sequences drawn (until the SE resolves the check's control)"}),
        "sp_mc_risk_se": (pd, np.array(cols[11]), {"units": "y^2"}),
        "sp_converged": (pd, np.array(cols[12], dtype=bool), {"units": "1",
                                                              "long_name": "the root finding for nu converged"}),
        "sp_field_norm_perturbed": (pd, np.array(cols[13]), {"units": "1/time", "perturbation": PERTURB,
                                                             "long_name": "max |F| a distance PERTURB inside"}),
        "sp_trivial": (pd, np.array(cols[14], dtype=bool), {
            "units": "1", "long_name": "the field vanishes by algebra: mu, nu in {-1, 1} (the (1 - x^2) factors)"}),
    }
    m0 = DohmatobModel(cfg.d, cfg.L, cfg.beta, cfg.gamma)
    coords = {"link": list(cfg.links), "start": np.arange(len(starts)), "time": ts, "point": np.arange(len(pts_rows)),
              "grid_mu": grid, "grid_nu": grid}
    ds = xr.Dataset(data, coords=coords,
                    attrs={"paper": CITATION, "transition_mu": float(m0.transition_mu), "psi": float(m0.psi)})
    for c, units, long_name in (("link", "1", "link function sigma"),
                                ("start", "1", "starting point (mu0, nu0) of the flow on the grid"),
                                ("time", "time", "time of the mean-field gradient flow"),
                                ("point", "1", "stationary point on M (all links)"),
                                ("grid_mu", "1", "mu of the field's grid"), ("grid_nu", "1", "nu of the field's grid")):
        ds[c].attrs.update(units=units, long_name=long_name)
    ds.mu0.attrs["long_name"] = "mu at the start of the flow"
    ds.nu0.attrs["long_name"] = "nu at the start of the flow"
    return ds


_REVERSED = {"sink": "source", "source": "sink"}


def summarize_flow(ds: xr.Dataset, cfg: FlowConfig):
    metrics: dict[str, float] = {"transition_mu": float(ds.attrs["transition_mu"]),
                                 "flow_failures": float(ds.flow_failures.sum()),
                                 "stationary_points_unconverged": float((~ds.sp_converged.values).sum())}
    checks = []
    kinds, expected = ds.sp_kind.values, ds.sp_kind_prop10.values
    reversed_kinds = np.array([_REVERSED.get(k, k) for k in kinds])
    for link in ds.link.values:
        sel = (ds.sp_link.values == link) & (expected != "")
        agree = int(np.sum(kinds[sel] == expected[sel]))
        metrics[f"n_stationary_points_{link}"] = float(np.sum(ds.sp_link.values == link))
        metrics[f"prop10_agreement_{link}"] = float(agree)
        metrics[f"prop10_listed_{link}"] = float(sel.sum())
        if link in ("linear", "relu"):  # quadratic: our (-1, 0) is a source, Prop. 10 says saddle (reported)
            checks.append(Check(
                f"Prop. 10 classification on M, {link} link (points agreeing)", theory=float(sel.sum()),
                simulation=float(agree), tolerance=0.5, basis="exact count (integers: half a unit)",
                control="the classification of the time-reversed flow (Jacobian -J: sinks and sources swapped)",
                control_simulation=float(np.sum(reversed_kinds[sel] == expected[sel]))))
    # the field at the located stationary points where it does not vanish by algebra: the dual-kernel critical nu
    # (bisection) and the B = 0 points (mu* in closed form); bound: |J| x the bisection bracket + round-off
    nontrivial = ~ds.sp_trivial.values
    scale = np.maximum(np.abs(ds.sp_eig_min.values), np.abs(ds.sp_eig_max.values))
    metrics["field_max_at_trivial_points"] = float(ds.sp_field_norm.values[~nontrivial].max()) \
        if (~nontrivial).any() else None
    metrics["n_nontrivial_stationary_points"] = float(nontrivial.sum())
    name = "field at the stationary points where it does not vanish by algebra (max |F|)"
    if nontrivial.any():
        F, Fp = ds.sp_field_norm.values[nontrivial], ds.sp_field_norm_perturbed.values[nontrivial]
        tol = 2.0 * float(scale[nontrivial].max()) * BISECT_XTOL + 1e-12
        w = int(np.argmax(F))
        checks.append(Check(
            name, theory=0.0, simulation=float(F[w]), tolerance=tol,
            basis=f"bisection bracket {BISECT_XTOL:g} x 2 max|eigenvalue| + 1e-12 round-off, "
                  f"{int(nontrivial.sum())} points",
            control=f"the field a distance {ds.sp_field_norm_perturbed.attrs['perturbation']:g} inside the square "
                    "from each of these points whose Jacobian is not flat (max |eigenvalue| > 1e-8; smallest)",
            control_simulation=float(Fp[scale[nontrivial] > 1e-8].min()) if (scale[nontrivial] > 1e-8).any()
            else None))
    else:
        checks.append(Check.not_evaluated(name, "no stationary point off the corners (the linear link has none): "
                                                "run a nonlinear link", theory=0.0))
    for link in ds.link.values:
        if link in ("linear", "quadratic"):
            checks.append(Check(f"M invariant under the 4-D flow, {link} link (max |eta|, |zeta|)", theory=0.0,
                                simulation=float(ds.invariance_max_offM.sel(link=link)), tolerance=1e-10,
                                basis="float64 round-off",
                                control=f"the 4-D flow started a distance {OFF_M:g} off M (eta = zeta = {OFF_M:g})",
                                control_simulation=float(ds.invariance_max_offM_control.sel(link=link))))
        metrics[f"invariance_max_offM_{link}"] = float(ds.invariance_max_offM.sel(link=link))
    # the tolerance: 5 SE of the Monte Carlo plus the closed form's own float64 round-off (the risk vanishes by algebra
    # at the located points, where its computed value is round-off whose digits depend on XLA's evaluation order)
    sel = np.isfinite(ds.sp_mc_risk.values)
    gap = np.abs(ds.sp_mean_field_risk.values - ds.sp_mc_risk.values)[sel]
    se = ds.sp_mc_risk_se.values[sel]
    tol = 5 * se + ds.sp_mean_field_risk_roundoff.values[sel]
    w = int(np.flatnonzero(sel)[np.argmax(gap / tol)])
    # control: the mean-field risk of the mirror point (-mu, nu) of the same link (the secret token not located)
    mirror = np.flatnonzero((ds.sp_link.values == ds.sp_link.values[w]) & (ds.sp_mu.values == -ds.sp_mu.values[w])
                            & (ds.sp_nu.values == ds.sp_nu.values[w]))
    checks.append(Check("mean-field risk vs Monte Carlo at the stationary points with mu = 1 (worst point)",
                        theory=float(ds.sp_mean_field_risk.values[w]),
                        simulation=float(ds.sp_mc_risk.values[w]),
                        tolerance=5 * float(ds.sp_mc_risk_se.values[w]) + float(ds.sp_mean_field_risk_roundoff.values[w]),
                        basis=f"5 SE ({int(ds.sp_mc_count.values[w])} samples) + the closed form's float64 "
                              f"round-off bound ({float(ds.sp_mean_field_risk_roundoff.values[w]):.1e})",
                        control=f"the mean-field risk at the mirror point (mu, nu) = (-1, {float(ds.sp_nu.values[w]):g}) "
                                f"of the {ds.sp_link.values[w]} link",
                        control_theory=float(ds.sp_mean_field_risk.values[mirror[0]]) if mirror.size else None))
    metrics["mean_field_vs_mc_worst_gap_in_se"] = float(np.max(gap / se))
    metrics["mean_field_vs_mc_worst_gap_in_tolerance"] = float(np.max(gap / tol))
    return metrics, checks


# ------------------------------------------------------------------------------------------------------------------
# dohmatob-phase-diagram: learnability in (gamma, alpha) (Prop. 2, Condition 2)


class PhaseConfig(ExperimentConfig):
    """Config of the phase-diagram experiment (field names are the ``--set`` keys)."""

    beta: float = pydantic.Field(1.0, gt=0, description="normalised inverse temperature, lambda = beta sqrt(d)")
    d: int = pydantic.Field(100, ge=4, description="dimension of the mean-field oracle-risk map")
    n_gamma: int = pydantic.Field(80, ge=2, description="grid points of gamma on [0.02, 0.98]")
    n_alpha: int = pydantic.Field(80, ge=2, description="grid points of alpha = log(L - 1) / d in (0, alpha_max]")
    alpha_max: float = pydantic.Field(0.6, gt=0, description="largest alpha of the grid")
    link: str = pydantic.Field("linear", description="link sigma of the values and labels")
    d_mc: int = pydantic.Field(50, ge=4, description="dimension of the Monte Carlo points")
    gammas_mc: tuple[float, ...] = pydantic.Field((0.3, 0.6, 0.8, 0.9, 0.97),
                                                  description="gammas of the Monte Carlo points, in (0, 1)")
    L_mc: tuple[int, ...] = pydantic.Field((3, 21, 101, 401), description="sequence lengths of the Monte Carlo "
                                           "points, >= 3")
    n_mc: int = pydantic.Field(4000, ge=100, description="Monte Carlo sequences per point")

    @pydantic.field_validator("link")
    @classmethod
    def _link(cls, v):
        return check_links((v,))[0]

    @pydantic.field_validator("gammas_mc")
    @classmethod
    def _gammas(cls, v):
        if not all(0 < g < 1 for g in v):
            raise ValueError(f"gammas_mc must lie in (0, 1), got {v}")
        return v

    @pydantic.field_validator("L_mc")
    @classmethod
    def _Ls(cls, v):
        if not all(L >= 3 for L in v):
            raise ValueError(f"L_mc must be >= 3 (alpha = log(L - 1) / d > 0), got {v}")
        return v


def run_phase(cfg: PhaseConfig, key, progress=None) -> xr.Dataset:
    gammas = np.linspace(0.02, 0.98, cfg.n_gamma)
    alphas = np.linspace(cfg.alpha_max / cfg.n_alpha, cfg.alpha_max, cfg.n_alpha)
    rem = rem_constants_alpha(alphas, cfg.beta)
    psi = np.asarray(rem.psi)
    c = np.sqrt(1 - gammas**2)
    learnable = c[:, None] > psi[None, :]
    # mean-field oracle risk R_bar(1, 1, 0, 0) at dimension d (p(1) = sigmoid((c - psi) beta d)); r drops out at rho = 0
    p1 = 1 / (1 + np.exp(-(c[:, None] - psi[None, :]) * cfg.beta * cfg.d))
    sb1 = np.array([float(dual_kernel(1.0, g, cfg.link)) for g in gammas])
    # on M at the oracle, H1 = H2 = H0 = sigma_bar(1) (a = b = 0): R_bar = sigma_bar(1) (1 - p)^2
    mf_oracle = sb1[:, None] * (1 - p1) ** 2
    # Monte Carlo oracle risks at finite d_mc, L in L_mc
    mc = np.zeros((len(cfg.gammas_mc), len(cfg.L_mc)))
    mc_se = np.zeros_like(mc)
    mf_mc = np.zeros_like(mc)
    oracle = DohmatobOverlaps.on_M(1.0, 1.0)
    for j, L in enumerate(cfg.L_mc):  # one compiled program per L for all gammas
        keys = jnp.stack([jax.random.fold_in(key, i * 100 + j) for i in range(len(cfg.gammas_mc))])
        mean, se = mc_risk_gammas(keys, oracle, cfg.gammas_mc, cfg.d_mc, L, cfg.beta, cfg.link, cfg.n_mc)
        mc[:, j], mc_se[:, j] = np.asarray(mean), np.asarray(se)
        for i, g in enumerate(cfg.gammas_mc):
            mf_mc[i, j] = float(mean_field_risk(oracle, DohmatobModel(cfg.d_mc, L, cfg.beta, g, cfg.link)))
        if progress is not None:
            progress(j + 1, len(cfg.L_mc))
    alpha_mc = np.log(np.array(cfg.L_mc) - 1.0) / cfg.d_mc
    psi_mc = np.asarray(rem_constants_alpha(alpha_mc, cfg.beta).psi)
    c_mc = np.sqrt(1 - np.array(cfg.gammas_mc) ** 2)
    sb1_mc = np.array([float(dual_kernel(1.0, g, cfg.link)) for g in cfg.gammas_mc])
    gamma_boundary = np.where(psi < 1, np.sqrt(np.clip(1 - psi**2, 0, 1)), np.nan)
    data = {
        "psi": (("alpha",), psi, {"units": "1"}),
        "gamma_boundary": (("alpha",), gamma_boundary, {"units": "1", "long_name": "sqrt(1 - psi^2)"}),
        "learnable": (("gamma", "alpha"), learnable, {"units": "1", "long_name": "sqrt(1 - gamma^2) > psi"}),
        "mf_oracle_risk": (("gamma", "alpha"), mf_oracle, {"units": "y^2", "d": cfg.d}),
        "sigma_bar_1": (("gamma",), sb1, {"units": "y^2"}),
        "mc_oracle_risk": (("gamma_mc", "L_mc"), mc, {"units": "y^2", "n_samples": cfg.n_mc, "d": cfg.d_mc}),
        "mc_oracle_risk_se": (("gamma_mc", "L_mc"), mc_se, {"units": "y^2"}),
        "mf_oracle_risk_mc_points": (("gamma_mc", "L_mc"), mf_mc, {"units": "y^2"}),
        "alpha_mc": (("L_mc",), alpha_mc, {"units": "1"}),
        "margin_mc": (("gamma_mc", "L_mc"), c_mc[:, None] - psi_mc[None, :], {"units": "1", "long_name": "c - psi"}),
        "psi_mc": (("L_mc",), psi_mc, {"units": "1", "long_name": "psi at the Monte Carlo points' alpha"}),
        "sigma_bar_1_mc": (("gamma_mc",), sb1_mc, {"units": "y^2"}),
    }
    # the mean-field oracle risk over sigma_bar(1) is (1 - p)^2 with p = sigmoid((c - psi) beta d): one curve of the
    # margin c - psi at the Monte Carlo points' dimension d_mc, whatever gamma and L
    lo, hi = float(np.min(c_mc[:, None] - psi_mc[None, :])), float(np.max(c_mc[:, None] - psi_mc[None, :]))
    pad = 0.05 * max(hi - lo, 2.0)
    margin = np.linspace(lo - pad, hi + pad, 241)
    data["mf_oracle_risk_ratio_curve"] = (("margin",), (1 - 1 / (1 + np.exp(-margin * cfg.beta * cfg.d_mc))) ** 2, {
        "units": "1", "long_name": "mean-field oracle risk / sigma_bar(1) = (1 - p)^2 at d_mc", "d": cfg.d_mc})
    coords = {"gamma": gammas, "alpha": alphas, "gamma_mc": list(cfg.gammas_mc), "L_mc": list(cfg.L_mc),
              "margin": margin}
    ds = xr.Dataset(data, coords=coords, attrs={"paper": CITATION, "link": cfg.link, "beta": cfg.beta})
    for c, long_name in (("gamma", "secret-token standard deviation gamma"),
                         ("alpha", "alpha = log(L - 1) / d"),
                         ("gamma_mc", "gamma of the Monte Carlo points"),
                         ("L_mc", "sequence length L of the Monte Carlo points"),
                         ("margin", "margin c - psi, c = sqrt(1 - gamma^2)")):
        ds[c].attrs.update(units="1", long_name=long_name)
    return ds


def summarize_phase(ds: xr.Dataset, cfg: PhaseConfig):
    margin = ds.margin_mc.values
    scale = 5 * ds.gamma_mc.values[:, None] / math.sqrt(cfg.d_mc)  # logit-fluctuation scale, as in dohmatob-rgd
    deep_in = margin >= scale
    deep_out = margin <= -scale
    mc, se, mf = ds.mc_oracle_risk.values, ds.mc_oracle_risk_se.values, ds.mf_oracle_risk_mc_points.values
    metrics = {"learnable_fraction_of_grid": float(ds.learnable.mean()),
               "n_mc_points_deep_learnable": float(deep_in.sum()), "n_mc_points_deep_unlearnable": float(deep_out.sum())}
    checks = []
    if deep_in.any():
        gap = np.abs(mc - mf) / se
        gap = np.where(deep_in, gap, -np.inf)
        w = np.unravel_index(np.argmax(gap), gap.shape)
        checks.append(Check("oracle risk, mean field vs Monte Carlo, deep in the learnable phase (Prop. 2A, worst point)",
                            theory=float(mf[w]), simulation=float(mc[w]), tolerance=5 * float(se[w]),
                            basis=f"5 SE, {cfg.n_mc} samples, d = {cfg.d_mc}; c - psi >= 5 gamma / sqrt(d); "
                                  f"worst of {int(deep_in.sum())} points",
                            control="the mean-field risk at the phase boundary c = psi (p = 1/2: sigma_bar(1) / 4)",
                            control_theory=float(0.25 * ds.sigma_bar_1_mc.values[w[0]])))
    else:
        checks.append(Check.not_evaluated(
            "oracle risk, mean field vs Monte Carlo, deep in the learnable phase (Prop. 2A, worst point)",
            "no Monte Carlo point deep in the learnable phase (c - psi >= 5 gamma / sqrt(d))"))
    # phase predicted by c > psi vs the Monte Carlo oracle risk below / above half of sigma_bar_gamma(1)
    half = 0.5 * ds.sigma_bar_1_mc.values[:, None]
    far = deep_in | deep_out
    agree = ((mc < half) == (margin > 0)) & far
    # control: the prediction with gamma and c = sqrt(1 - gamma^2) swapped (the signal token's mean and spread)
    swapped = ((mc < half) == (ds.gamma_mc.values[:, None] - ds.psi_mc.values[None, :] > 0)) & far
    checks.append(Check("learnability predicted by c > psi vs Monte Carlo oracle risk < sigma_bar(1)/2 (points far "
                        "from the boundary)", theory=float(far.sum()), simulation=float(agree.sum()), tolerance=0.5,
                        basis=f"exact count (integers: half a unit), {int(far.sum())} points",
                        control="the prediction gamma > psi (gamma and c = sqrt(1 - gamma^2) swapped)",
                        control_simulation=float(swapped.sum())))
    near = ~far
    if near.any():
        metrics["max_mf_vs_mc_gap_near_boundary"] = float(np.max(np.abs(mc - mf)[near]))
    if deep_out.any():
        metrics["max_mf_vs_mc_gap_deep_unlearnable"] = float(np.max(np.abs(mc - mf)[deep_out]))
    return metrics, checks
