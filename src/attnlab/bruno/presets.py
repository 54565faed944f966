"""Presets for Bruno, Pasqualotto, Agazzi, "A multiscale analysis of mean-field transformers in the moderate
interaction regime" (NeurIPS 2025, arXiv 2509.25040): Figs 1-4.

All runs simulate the paper's discrete model (Eq. (1): one Euler step of size dt plus renormalisation, no explicit
projection) with the blocked O(N)-memory kernel, SA normalisation; ``--set integrator=bs32`` (with ``tol`` and a
larger ``dt_max``) integrates the SA ODE instead with adaptive Bogacki-Shampine steps
(:func:`attnlab.bruno.integrate.simulate_adaptive`), which reaches the pairing phase's long horizons in far fewer steps.

Step size: the Euler step must keep dt * beta small in the pairing phase. With dt * beta = 0.5 (the Fig. 4 preset's
late steps, dt_max = 0.05 at beta = 10) Euler can merge the closest pair later than a converged integration does, so
after changing the sizes of that preset compare its merge time with ``integrator=bs32``.

Precision: full-size runs compute the attention sums in float32 (tokens and observables stay float64). On CPU that
is the C kernel of :mod:`attnlab.bruno.native` (every preset has S = Q^T K symmetric positive definite), one
exponential per unordered pair of tokens with the scores kept in registers; ``bench/particles.py`` measures it
against the float64 JAX kernels. Quick runs use float64. The forward-heat preset (d = 2, Q = K = I) takes the exact
float64 Fourier sums of :mod:`attnlab.bruno.circle` instead, for its steps and its observables, in O(N K) for N^2
(``implementation=native`` or ``jax`` asks for the kernels back).

Values the paper leaves unstated are chosen here and flagged "[U, chosen]" in each preset's description and figure
title:

* Fig. 1: Q = K = Id; row (a) V = diag(1, 0.5, 0.25) (unique top eigenvalue: two antipodal clusters on the x-axis);
  row (b) V = [[1, -1, 0], [1, 1, 0], [0, 0, 0.25]] (non-gradient: collapse onto the xy great circle plus rotation);
  snapshots at t = 0, 1, 3, 6.
* Fig. 2: Q = K = Id, V = diag(1, 1, -1) (E_max = xy-plane, azimuth kept by the alignment flow); azimuth mixture
  means (1, 3, 5) rad, weights (0.4, 0.35, 0.25), wrapped-normal standard deviation sigma0 = 0.2 read as the
  wrapped-normal variance v = sigma0^2 = 0.04 (heat time tau = v / 2 = 0.02, collapse at t = beta tau = 0.2; the
  other reading of sigma0, tau = sigma0^2, would give 0.4), dt = 1e-2, T = 4.
* Fig. 3: three wrapped normals, means (1, 2.5, 4.5) rad, weights (0.4, 0.35, 0.25), variance 0.1; T = 0.25 at full
  size (5e4 tokens, 250 steps: 6.25e11 pair interactions); the quick run uses beta = 20, N = 2000, T = 1.
* Fig. 4: Q = Id, K = V = S = diag(1, 1, 0.5) (Q^T K = V = S); four azimuth components, means (0, 1, 2.6, 4.4) rad,
  equal weights, variance 0.04, latitude uniform on [-pi/4, pi/4]; dt = 1e-2 growing to 0.05 on log-spaced
  snapshots up to T = 100. The closest pair (1 rad apart) pairs on the time scale e^{beta (1 - cos 1)} ~ 1e2 times
  the prefactor 1 / (2 beta sin^2 1) of the two-point ODE, i.e. t ~ 9.5; the merge is read from two mean-shift
  modes tracked from the two closest means.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import xarray as xr

from attnlab import native as _build
from attnlab.bruno import circle, initial, reduced
from attnlab.bruno import native as bruno_native
from attnlab.bruno.configs import BrunoConfig
from attnlab.bruno.integrate import make_model, simulate, simulate_adaptive
from attnlab.bruno.observables import (
    angle_histogram,
    angles,
    clusters,
    fourier_chi2,
    merge_times,
    observe_fn,
    track_modes,
)
from attnlab.registry import Check, Preset, deferred, register

CITATION = "Bruno, Pasqualotto, Agazzi, NeurIPS 2025"








def _initial(cfg: BrunoConfig, key):
    if cfg.scenario == "alignment":
        return initial.uniform_sphere(key, cfg.n_tokens, cfg.d)
    if cfg.scenario == "forward-heat":
        return initial.wrapped_normal_mixture(key, cfg.n_tokens, cfg.means, cfg.weights, cfg.variance)
    x = initial.latitude_uniform_azimuth_mixture(key, cfg.n_tokens, cfg.means, cfg.weights, cfg.variance)
    if cfg.latitude_range < math.pi / 2:  # shrink latitudes: psi -> psi * range / (pi / 2)
        psi = np.arcsin(np.clip(np.asarray(x[:, 2]), -1, 1)) * cfg.latitude_range / (math.pi / 2)
        th = angles(x)
        x = np.stack([np.cos(psi) * np.cos(th), np.cos(psi) * np.sin(th), np.sin(psi)], axis=1)
    return np.asarray(x)


def implementations(cfg: BrunoConfig) -> dict[str, str]:
    """The implementation of the attention sums of a run with ``cfg`` (``cfg.implementation`` resolved here): the C
    kernel of :mod:`attnlab.bruno.native` applies in float32 for 2 <= d <= 8 on the CPU backend; where it runs, its
    vector width (``attention_vector_bits``: 512 or 256) is recorded too. Where it runs, a
    call whose rows underflow is redone by the JAX kernels (deterministic: the same inputs take the same path).
    With ``auto``, tokens on the circle (d = 2) with ``Q^T K = c I`` and the Euler steps take the exact Fourier sums
    of :mod:`attnlab.bruno.circle` instead (float64, O(N K) for the kernels' N^2: ``"circle"``)."""
    if (cfg.implementation == "auto" and cfg.d == 2 and cfg.integrator == "euler"
            and circle.circle_scale(cfg.matrix("Q"), cfg.matrix("K")) is not None):
        return {"attention": "circle"}
    applies = (cfg.kernel_dtype == "float32" and 2 <= cfg.d <= bruno_native.MAX_D
               and jax.default_backend() == "cpu" and bruno_native.available())
    impl = _build.choose(cfg.implementation, applies, f"kernel_dtype float32 and d <= {bruno_native.MAX_D}",
                         bruno_native.unavailable_reason())
    if impl == "native":  # the two builds sum in different orders: the width is part of what gives the numbers
        return {"attention": impl, "attention_vector_bits": str(bruno_native.vector_bits())}
    return {"attention": impl}


def _simulate(cfg, x0, V, times, progress, offset=0, total=1):
    Q, K = cfg.matrix("Q"), cfg.matrix("K")
    impl = implementations(cfg)["attention"]
    model = make_model(cfg.d, Q, K, V, cfg.beta, kernel_dtype=None if cfg.kernel_dtype == "float64" else "float32",
                       kernel_method=impl)
    B = Q.T @ K
    emax = reduced.emax_basis(Q, K, V)
    obs = observe_fn(B, cfg.beta, emax, on_circle=impl == "circle")
    n = len(times)
    prog = None if progress is None else (lambda k, _: progress(offset * n + k, total * n))
    if cfg.integrator == "bs32":
        xs, o, steps, _ = simulate_adaptive(x0, model, times, tol=cfg.tol, dt0=cfg.dt, dt_max=cfg.dt_max, observe=obs,
                                            progress=prog)
    else:
        xs, o, steps = simulate(x0, model, times, cfg.step_sizes(times), observe=obs, progress=prog)
    return xs, o, steps


_COORDS = {"time": ("1", "time t (the paper's units: dt = 1/L per layer)"),
           "theory_time": ("1", "time t of the reduced-model curves"),
           "dim": ("1", "coordinate of R^d"),
           "row": ("1", "value matrix of the row: (a) V, (b) V_b"),
           "token": ("1", "token index i"),
           "bin": ("rad", "angle (bin centre)"),
           "cluster": ("1", "cluster index"),
           "component": ("1", "mixture component j of the initial law")}


def _sampling_l1(rng, n, probs, draws):
    """Mean and standard deviation of the L1 distance between a histogram of n i.i.d. draws and ``probs``."""
    ls = np.abs(rng.multinomial(n, probs / probs.sum(), size=draws) / n - probs).sum(axis=1)
    return float(ls.mean()), float(ls.std(ddof=1))


def run(cfg: BrunoConfig, key, progress=None) -> xr.Dataset:
    """Simulate the scenario, its observables at every snapshot and the reduced model it is checked against."""
    x0 = _initial(cfg, key)
    times = cfg.snapshot_times()
    tcoord = np.concatenate([[0.0], times])
    data, coords = {}, {"time": tcoord, "dim": np.arange(cfg.d), "token": np.arange(cfg.n_tokens)}
    attrs = {"paper": CITATION, "scenario": cfg.scenario, "beta": cfg.beta, "n_tokens": cfg.n_tokens}
    rows = [("a", cfg.matrix("V"))]
    if cfg.scenario == "alignment" and cfg.V_b is not None:
        rows.append(("b", cfg.matrix("V_b")))
    xs_all, obs_all, steps = [], [], None
    for r, (_, V) in enumerate(rows):
        xs, o, steps = _simulate(cfg, x0, V, times, progress, r, len(rows))
        xs_all.append(xs)
        obs_all.append(o)
    xs = np.stack(xs_all)
    coords["row"] = [name for name, _ in rows]
    dims = ("row", "time")
    data["x"] = (("row", "time", "token", "dim"), xs, {"units": "1", "long_name": "token positions"})
    data["steps"] = (("time",), steps, {"units": "1", "long_name": "steps taken"})
    long_names = {"log_energy": "log interaction energy, log E_beta", "order_parameter": "order parameter eps_beta",
                  "mean_norm": "norm of the mean token", "emax_mass": "mass in E_max, tr(P_E Sigma)"}
    for name, long_name in long_names.items():
        data[name] = (dims, np.stack([o[name] for o in obs_all]), {"units": "1", "long_name": long_name})
    data["second_moment_eigs"] = (dims + ("dim",), np.stack([o["second_moment_eigs"] for o in obs_all]),
                                  {"units": "1", "long_name": "eigenvalues of (1/N) sum_i x_i x_i^T, ascending"})
    counts = np.array([[clusters(x, cfg.beta, cfg.cluster_c)[0] for x in row] for row in xs])
    data["cluster_count"] = (dims, counts, {"units": "1", "long_name": "clusters at angle c beta^-1/2"})
    attrs["V_rows"] = [V.tolist() for _, V in rows]
    rng = np.random.default_rng(0)

    if cfg.scenario == "alignment":
        closed = np.stack([np.stack([reduced.alignment_closed_form(np.asarray(x0), V, t) for t in tcoord])
                           for _, V in rows])
        err = np.arccos(np.clip(np.sum(closed * xs, axis=-1), -1, 1))
        data["x_closed_form"] = (("row", "time", "token", "dim"), closed, {"units": "1"})
        data["alignment_error"] = (dims, err.mean(axis=-1), {"units": "rad", "long_name": "mean angle to closed form"})
        data["alignment_error_se"] = (dims, err.std(axis=-1, ddof=1) / math.sqrt(err.shape[-1]),
                                      {"units": "rad", "long_name": "standard error of the mean angle over tokens"})
        # negative controls: tokens that never move, and the closed form at half the time
        frozen = np.arccos(np.clip(np.sum(closed * np.asarray(x0), axis=-1), -1, 1))
        half = np.stack([np.stack([reduced.alignment_closed_form(np.asarray(x0), V, t / 2) for t in tcoord])
                         for _, V in rows])
        half_err = np.arccos(np.clip(np.sum(half * xs, axis=-1), -1, 1))
        data["alignment_error_frozen"] = (dims, frozen.mean(axis=-1),
                                          {"units": "rad", "long_name": "mean angle of x0 to the closed form"})
        data["alignment_error_half_time"] = (dims, half_err.mean(axis=-1),
                                             {"units": "rad", "long_name": "mean angle to the closed form at t/2"})
        data["V_norm"] = (("row",), np.array([np.linalg.norm(V, 2) for _, V in rows]), {"units": "1"})
        # the mass in E_max along the closed form, tr(P_E Sigma) of normalize(e^{tV} x0), on a fine time grid
        t_fine = np.linspace(0.0, float(tcoord[-1]), 121)
        coords["theory_time"] = t_fine
        mass = []
        for _, V in rows:
            e = reduced.emax_basis(cfg.matrix("Q"), cfg.matrix("K"), V)
            mass.append([float(np.mean(np.sum((reduced.alignment_closed_form(np.asarray(x0), V, t) @ e) ** 2, -1)))
                         for t in t_fine])
        data["emax_mass_closed_form"] = (("row", "theory_time"), np.array(mass),
                                         {"units": "1", "long_name": "mass in E_max of the closed form"})
    if cfg.scenario in ("forward-heat", "backward-heat", "three-phases"):
        gamma = -1 if cfg.scenario == "forward-heat" else 1
        hist = np.stack([angle_histogram(x, cfg.bins)[0] for x in xs[0]])
        edges = angle_histogram(xs[0, 0], cfg.bins)[1]
        var_t = reduced.heat_variances(cfg.variance, tcoord, cfg.beta, gamma)
        heat = np.stack([reduced.wrapped_normal_bin_masses(edges, cfg.means, cfg.weights, v) if v > 0
                         else np.full(cfg.bins, np.nan) for v in var_t])
        coords["bin"] = 0.5 * (edges[1:] + edges[:-1])
        data["histogram"] = (("time", "bin"), hist, {"units": "1", "long_name": "token fraction per angle bin"})
        data["heat_bins"] = (("time", "bin"), heat, {"units": "1", "long_name": "heat-kernel mixture (Eq. 7)"})
        data["heat_variance"] = (("time",), var_t, {"units": "rad^2"})
        attrs["gamma"] = gamma
        attrs["collapse_time"] = float(reduced.backward_collapse_times(cfg.variance, cfg.beta)) if gamma > 0 else -1.0
    if cfg.scenario == "forward-heat":
        grid = 2 * np.pi * np.arange(cfg.pde_grid) / cfg.pde_grid
        dens0 = reduced.wrapped_normal_density(grid, cfg.means, cfg.weights, cfg.variance)
        pde = np.concatenate([dens0[None], reduced.meanfield_s1(dens0, times, cfg.beta, -1)])
        # bin masses of the grid density: periodic trapezoid rule on a fine grid interpolated per bin
        fine = np.linspace(0, 2 * np.pi, cfg.bins * 32 + 1)
        pde_bins = []
        for dens in pde:
            f = np.interp(fine, np.append(grid, 2 * np.pi), np.append(dens, dens[0]))
            cum = np.concatenate([[0], np.cumsum((f[1:] + f[:-1]) / 2 * np.diff(fine))])
            pde_bins.append(np.diff(cum[::32]))
        data["pde_bins"] = (("time", "bin"), np.array(pde_bins), {"units": "1",
                                                                  "long_name": "finite-beta mean-field PDE"})
        samp = np.array([_sampling_l1(rng, cfg.n_tokens, p, cfg.n_sampling) for p in np.array(pde_bins)])
        data["sampling_l1_mean"] = (("time",), samp[:, 0], {"units": "1"})
        data["sampling_l1_sd"] = (("time",), samp[:, 1], {"units": "1"})
    if cfg.scenario in ("backward-heat", "three-phases"):
        # positions where the reduced model predicts them: at the first snapshot showing one cluster per component
        # (the end of the heat phase); later, stragglers and pairing move the clusters (full-size run: +0.016 rad
        # by t = 4 for the component at 1 rad, beyond 5 SE of its initial mean)
        hits = np.flatnonzero(counts[0] == len(cfg.means))
        k_c = int(hits[0]) if hits.size else len(tcoord) - 1
        _, cent, mass = clusters(xs[0, k_c], cfg.beta, cfg.cluster_c)
        attrs["cluster_time"] = float(tcoord[k_c])
        coords["cluster"] = np.arange(len(cent))
        data["cluster_azimuth"] = (("cluster",), angles(cent), {"units": "rad"})
        data["cluster_mass"] = (("cluster",), mass, {"units": "1"})
        data["cluster_latitude"] = (("cluster",), np.arcsin(np.clip(cent[:, 2], -1, 1)), {"units": "rad"})
        coords["component"] = np.arange(len(cfg.means))
        data["component_means"] = (("component",), np.asarray(cfg.means), {"units": "rad"})
        data["component_weights"] = (("component",), np.asarray(cfg.weights), {"units": "1"})
        attrs["variance"] = cfg.variance
    if cfg.scenario == "three-phases":
        Q, K = cfg.matrix("Q"), cfg.matrix("K")
        ev = np.sort(np.linalg.eigvals(cfg.matrix("V") @ K.T @ Q).real)[::-1]
        m = np.sort(np.mod(np.asarray(cfg.means), 2 * np.pi))
        gaps = np.diff(np.concatenate([m, [m[0] + 2 * np.pi]]))
        attrs["t_alignment"] = float(1.0 / (ev[0] - ev[-1]))
        attrs["t_heat"] = float(cfg.beta * cfg.variance / 2)
        attrs["t_pairing"] = float(math.exp(cfg.beta * (1 - math.cos(gaps.min()))))
        mu = np.mod(np.asarray(cfg.means), 2 * np.pi)
        i = int(np.argmin(np.mod(np.roll(mu, -1) - mu, 2 * np.pi)))  # closest neighbours (means sorted)
        j = (i + 1) % len(mu)
        seeds = np.stack([np.cos(mu), np.sin(mu), np.zeros_like(mu)], axis=1)
        modes = track_modes(xs[0], seeds, cfg.beta, cfg.cluster_c)
        pair = np.arccos(np.clip(np.sum(modes[:, i] * modes[:, j], axis=-1), -1, 1))
        data["closest_pair_angle"] = (("time",), pair, {"units": "rad", "long_name": "angle between tracked modes"})
        k0 = int(np.searchsorted(tcoord, attrs["t_alignment"]))  # first snapshot after the alignment time
        if k0 < len(tcoord) and pair[k0] > cfg.cluster_c / math.sqrt(cfg.beta):
            attrs["pairing_start_time"] = float(tcoord[k0])
            attrs["t_pairing_from_modes"] = float(tcoord[k0]) + reduced.two_point_merge_time(
                float(pair[k0]), cfg.cluster_c / math.sqrt(cfg.beta), cfg.beta)
            # the pairing ODE's angle from there on, on a log-spaced grid up to the horizon
            t_fine = np.geomspace(float(tcoord[k0]), float(tcoord[-1]), 160)
            coords["theory_time"] = t_fine
            data["closest_pair_angle_ode"] = (("theory_time",), reduced.two_point_angle(
                float(pair[k0]), t_fine - t_fine[0], cfg.beta), {"units": "rad", "long_name": "pairing ODE "
                                                                  "(two equal clusters) from the tracked pair angle"})
        attrs["t_pairing_two_point"] = reduced.two_point_merge_time(float(gaps.min()), cfg.cluster_c / math.sqrt(cfg.beta),
                                                                    cfg.beta)
    attrs["merges"] = [{"time": t, "clusters_before": a, "clusters_after": b}
                       for t, a, b in merge_times(tcoord, counts[0])]
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    for name, (units, long_name) in _COORDS.items():
        if name in ds.coords:
            ds[name].attrs.update(units=units, long_name=long_name)
    return ds


def _monotone_fraction(log_e, sign):
    """Fraction of snapshot-to-snapshot increments of E with the expected sign (relative round-off slack 1e-9)."""
    diff = sign * np.diff(np.asarray(log_e))
    return float(np.mean(diff >= -1e-9))


def summarize(ds: xr.Dataset, cfg: BrunoConfig):
    """Metrics and the theory-vs-simulation checks of each scenario (reads only the dataset)."""
    sc = ds.attrs["scenario"]
    n = int(ds.attrs["n_tokens"])
    metrics = {"final_cluster_count": float(ds.cluster_count.isel(row=0, time=-1)),
               "final_order_parameter": float(ds.order_parameter.isel(row=0, time=-1)),
               "final_mean_norm": float(ds.mean_norm.isel(row=0, time=-1)),
               "final_emax_mass": float(ds.emax_mass.isel(row=0, time=-1))}
    checks = []
    if sc == "three-phases" or (sc == "forward-heat"):
        sign = 1 if sc == "three-phases" else -1
        metrics["energy_monotone_fraction"] = _monotone_fraction(ds.log_energy.isel(row=0).values, sign)
        log_e = ds.log_energy.isel(row=0).values
        checks.append(Check("energy monotone along the flow (Lyapunov: Q^T K = V = S or -V)", theory=1.0,
                            simulation=metrics["energy_monotone_fraction"], tolerance=0.5 / (len(log_e) - 1),
                            basis="dE/dt = (1/N^2) sum_i Z_i |P S m_i|^2 >= 0: every increment (half of one in "
                                  "the fraction), relative slack 1e-9 per increment",
                            control="the energy read backwards in time",
                            control_simulation=_monotone_fraction(log_e[::-1], sign)))
    else:
        metrics["energy_monotone_fraction"] = _monotone_fraction(ds.log_energy.isel(row=0).values, 1)
    if sc == "alignment":
        times = ds.time.values
        k1 = int(np.argmin(np.abs(times - 1.0)))
        t1 = float(times[k1])
        d = ds.sizes["dim"]
        for r in ds.row.values:
            err = float(ds.alignment_error.sel(row=r).isel(time=k1))
            vn = float(ds.V_norm.sel(row=r))
            se = float(ds.alignment_error_se.sel(row=r).isel(time=k1))
            tol = t1 * vn * (d - 1) / (2 * float(ds.attrs["beta"])) + 5 * se
            metrics[f"alignment_error_vs_closed_form_row_{r}"] = err
            metrics[f"alignment_error_final_row_{r}"] = float(ds.alignment_error.sel(row=r).isel(time=-1))
            frozen = float(ds.alignment_error_frozen.sel(row=r).isel(time=k1))
            half = float(ds.alignment_error_half_time.sel(row=r).isel(time=k1))
            metrics[f"alignment_error_frozen_row_{r}"] = frozen
            metrics[f"alignment_error_half_time_row_{r}"] = half
            checks.append(Check(f"row ({r}): mean angle to normalize(e^(tV) x0) at t = {t1:g}", theory=0.0,
                                simulation=err, tolerance=tol,
                                basis="t |V| (d-1)/(2 beta) finite-beta (vMF mean-length) bias + 5 SE over tokens",
                                control="the closed form at half the time", control_simulation=half))
        metrics["alignment_error_vs_closed_form"] = metrics["alignment_error_vs_closed_form_row_a"]
    if sc == "forward-heat":
        hist, pde, heat = ds.histogram.values[-1], ds.pde_bins.values[-1], ds.heat_bins.values[-1]
        l1_pde, l1_heat = float(np.abs(hist - pde).sum()), float(np.abs(hist - heat).sum())
        bias = float(np.abs(pde - heat).sum())
        mu, sd = float(ds.sampling_l1_mean[-1]), float(ds.sampling_l1_sd[-1])
        metrics.update({"heat_density_l1_error": l1_heat, "pde_density_l1_error": l1_pde,
                        "pde_vs_heat_l1_finite_beta_bias": bias, "sampling_l1_mean": mu, "sampling_l1_sd": sd})
        # goodness of fit through the first Fourier moments of the angle (observables.fourier_chi2): the L1 of a
        # 64-bin histogram of 5e4 tokens cannot tell t = 0.25 from t = 0 (the heat variance grows by 10%); the
        # moments' chi^2 can
        hist0, centres = ds.histogram.values[0], ds.bin.values
        x_pde, k, _ = fourier_chi2(hist, pde, centres, n)
        x_pde0 = fourier_chi2(hist0, pde, centres, n)[0]
        x_heat, _, lam = fourier_chi2(hist, heat, centres, n, shift=pde - heat)
        x_heat0 = fourier_chi2(hist0, heat, centres, n)[0]
        metrics.update({"pde_fourier_chi2": x_pde, "heat_fourier_chi2": x_heat, "heat_fourier_noncentrality": lam})
        checks.append(Check(f"histogram vs finite-beta mean-field PDE (chi^2 of {k // 2} Fourier moments, final "
                            "time)", theory=float(k), simulation=x_pde, tolerance=5 * math.sqrt(2 * k),
                            basis=f"5 sd of chi^2_{k} (multinomial draws of {n} tokens)",
                            control="tokens frozen at t = 0", control_simulation=x_pde0))
        checks.append(Check(f"histogram vs forward heat mixture, Eq. (7) (chi^2 of {k // 2} Fourier moments, final "
                            "time)", theory=k + lam, simulation=x_heat, tolerance=5 * math.sqrt(2 * (k + 2 * lam)),
                            basis=f"5 sd of the noncentral chi^2_{k}: noncentrality {lam:.3g} from the O(1/(beta v)) "
                                  "finite-beta gap between the PDE and Eq. (7)",
                            control="tokens frozen at t = 0", control_simulation=x_heat0))
    if sc in ("backward-heat", "three-phases"):
        tc = float(ds.attrs["collapse_time"])
        k = int(np.argmin(np.abs(ds.time.values - tc / 2)))
        hist, heat = ds.histogram.values[k], ds.heat_bins.values[k]
        metrics["heat_density_l1_error"] = float(np.nansum(np.abs(hist - heat)))
        metrics["heat_density_l1_error_time"] = float(ds.time.values[k])
        metrics["collapse_time_theory"] = tc
        means = ds.component_means.values
        az = ds.cluster_azimuth.values
        if sc == "backward-heat":
            checks.append(Check("cluster count = number of mixture components (end of the heat phase)",
                                theory=len(means), simulation=len(az), tolerance=0.5,
                                basis=f"exact count (counts differ by 1 at least), first snapshot with that count: "
                                      f"t = {ds.attrs['cluster_time']:.3g}",
                                control="the count at t = 0 (before the heat phase)",
                                control_simulation=float(ds.cluster_count.isel(row=0, time=0))))
            if len(az) == len(means):
                order = np.argsort(np.mod(means, 2 * np.pi))
                w = ds.component_weights.values[order]
                gaps = np.abs(np.angle(np.exp(1j * (az - np.mod(means, 2 * np.pi)[order]))))
                se = np.sqrt(float(ds.attrs["variance"]) / (w * n))
                shifted = np.roll(np.mod(means, 2 * np.pi)[order], 1)
                wrong = np.abs(np.angle(np.exp(1j * (az - shifted))))
                for j in range(len(az)):
                    checks.append(Check(f"cluster {j} azimuth vs component mean m_{j} (Eq. 7 collapse point, t = "
                                        f"{ds.attrs['cluster_time']:.3g})",
                                        theory=0.0, simulation=float(gaps[j]), tolerance=5 * float(se[j]),
                                        basis="5 SE of the initial component mean, sqrt(v / (w N))",
                                        control="the cluster matched to the next component's mean",
                                        control_simulation=float(wrong[j])))
    if sc == "three-phases":
        t = ds.time.values
        metrics["t_alignment"] = float(ds.attrs["t_alignment"])
        metrics["t_heat"] = float(ds.attrs["t_heat"])
        metrics["t_pairing_theory"] = float(ds.attrs["t_pairing"])
        pair = ds.closest_pair_angle.values
        thr = cfg.cluster_c / math.sqrt(float(ds.attrs["beta"]))
        merged = np.flatnonzero(pair < thr)
        # pairing merge: the tracked modes of the closest pair come within the cluster threshold angle
        metrics["first_merge_time"] = float(t[merged[0]]) if merged.size else None
        metrics["first_merge_bracket_low"] = float(t[merged[0] - 1]) if merged.size and merged[0] else None
        metrics["closest_pair_angle_final"] = float(pair[-1])
        if merged.size and merged[0] and "t_pairing_from_modes" in ds.attrs:
            lo, hi = float(t[merged[0] - 1]), float(t[merged[0]])
            pred = float(ds.attrs["t_pairing_from_modes"])
            metrics["t_pairing_from_modes"] = pred
            checks.append(Check(f"pairing ODE (Prop 3.11, two equal clusters) from the tracked pair angle at "
                                f"t = {ds.attrs['pairing_start_time']:.3g}: merge time", theory=pred,
                                simulation=(lo + hi) / 2, tolerance=(hi - lo) / 2,
                                basis="the observed merge is known to lie between two snapshots",
                                control="the pairing ODE at half the interaction rate (merge time doubled)",
                                control_theory=2 * pred))
        metrics["t_pairing_two_point_ode"] = float(ds.attrs["t_pairing_two_point"])
    return metrics, checks


def finding(metrics: dict, cfg: BrunoConfig) -> str:
    """The run's result in one line of words."""
    k = int(metrics["final_cluster_count"])
    if cfg.scenario == "alignment":
        return (f"tokens follow normalize(e^(tV) x0) to {metrics['alignment_error_vs_closed_form_row_a']:.3f} rad at "
                f"t = 1 (frozen tokens: {metrics['alignment_error_frozen_row_a']:.3f}); {k} clusters at t = "
                f"{cfg.t_end:g}")
    if cfg.scenario == "backward-heat":
        return (f"{k} clusters at t = {cfg.t_end:g} for {len(cfg.means)} mixture components; the density follows the "
                f"backward heat flow to L1 {metrics['heat_density_l1_error']:.3f} at t = "
                f"{metrics['heat_density_l1_error_time']:.3g}")
    if cfg.scenario == "forward-heat":
        return (f"histogram at t = {cfg.t_end:g} within L1 {metrics['pde_density_l1_error']:.3f} of the mean-field PDE "
                f"and {metrics['heat_density_l1_error']:.3f} of the heat mixture (sampling noise "
                f"{metrics['sampling_l1_mean']:.3f})")
    merge = metrics["first_merge_time"]
    return (f"energy increases over {metrics['energy_monotone_fraction']:.0%} of increments; time scales: alignment "
            f"{metrics['t_alignment']:.2g}, heat {metrics['t_heat']:.2g}; first pair merge at t = {merge:.3g} "
            f"(pairing ODE {metrics.get('t_pairing_from_modes', float('nan')):.3g}); {k} clusters at the end")


def _animate(ds, path):
    """The token cloud's evolution as an animated GIF (when the dataset keeps the token positions ``x``)."""
    if "x" in ds:
        from attnlab.bruno.animate import animate

        animate(ds, path)


UNUSED = {
    "alignment": frozenset({"means", "weights", "variance", "latitude_range", "bins", "pde_grid", "n_sampling"}),
    "backward-heat": frozenset({"V_b", "pde_grid", "n_sampling"}),
    "forward-heat": frozenset({"V_b", "latitude_range"}),
    "three-phases": frozenset({"V_b", "pde_grid", "n_sampling"}),
}
"""The fields of :class:`BrunoConfig` that each scenario does not read: the alignment phase starts uniform on the
sphere (no mixture, no histogram); only it has a second value matrix (row (b)); only the forward heat compares with
the mean-field PDE and its sampling error; only the S^2 mixtures have a latitude range."""


def _preset(name, figure, description, defaults, quick):
    return register(Preset(name=name, paper="bruno", citation=CITATION, figure=figure, description=description,
                           implementations=implementations, finding=finding,
                           config_cls=BrunoConfig, run=run, summarize=summarize, plot=deferred("attnlab.bruno.figures:plot"),
                           defaults=defaults, quick=quick, animate=_animate, unused=UNUSED[defaults["scenario"]]))


_preset("bruno-alignment", "Fig. 1",
        "Alignment phase: d=3, N=1e4, uniform on S^2, beta=30, dt=1e-2, Q=K=Id; row (a) V=diag(1,.5,.25), row (b) "
        "rotation [U, chosen]; tokens against the closed form normalize(e^{tV} x0).",
        {"scenario": "alignment", "n_tokens": 10_000, "d": 3, "beta": 30.0, "dt": 1e-2, "dt_max": 1e-2,
         "t_end": 6.0, "times": (1.0, 3.0, 6.0), "V": ((1.0, 0.0, 0.0), (0.0, 0.5, 0.0), (0.0, 0.0, 0.25)),
         "kernel_dtype": "float32"},
        {"n_tokens": 1000, "kernel_dtype": "float64"})
_preset("bruno-backward-heat", "Fig. 2",
        "Backward heat: d=3, N=1e4, beta=10, latitude uniform, azimuth 3-component wrapped-normal mixture "
        "(sigma0=0.2), V=diag(1,1,-1) [U, chosen]; clusters at the means of Eq. (7).",
        {"scenario": "backward-heat", "n_tokens": 10_000, "d": 3, "beta": 10.0, "dt": 1e-2, "dt_max": 1e-2,
         "t_end": 4.0, "n_snapshots": 12, "t_first": 0.05, "V": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, -1.0)),
         "means": (1.0, 3.0, 5.0), "weights": (0.4, 0.35, 0.25), "variance": 0.04, "V_b": None,
         "kernel_dtype": "float32"},
        {"n_tokens": 2000, "t_end": 2.0, "n_snapshots": 8, "kernel_dtype": "float64"})
_preset("bruno-forward-heat", "Fig. 3",
        "Forward heat: d=2, N=5e4, beta=50, Q=K=Id, V=-Id, dt=1e-3, three wrapped normals [U, chosen]; histogram "
        "against Eq. (7) and the finite-beta mean-field PDE.",
        {"scenario": "forward-heat", "n_tokens": 50_000, "d": 2, "beta": 50.0, "dt": 1e-3, "dt_max": 1e-3,
         "t_end": 0.25, "times": (0.0625, 0.125, 0.25), "V": ((-1.0, 0.0), (0.0, -1.0)), "V_b": None,
         "means": (1.0, 2.5, 4.5), "weights": (0.4, 0.35, 0.25), "variance": 0.1, "kernel_dtype": "float32"},
        {"n_tokens": 2000, "beta": 20.0, "dt": 2.5e-3, "dt_max": 2.5e-3, "t_end": 1.0, "times": (0.25, 0.5, 1.0),
         "pde_grid": 256, "n_sampling": 200,
         "kernel_dtype": "float64"})
_preset("bruno-three-phases", "Fig. 4 (App. E)",
        "Three phases: d=3, N=1e4, beta=10, Q^T K = V = S = diag(1,1,.5), four azimuth components [U, chosen]; "
        "interaction energy against log time with the alignment, heat and pairing time scales.",
        {"scenario": "three-phases", "n_tokens": 10_000, "d": 3, "beta": 10.0, "dt": 1e-2, "dt_max": 5e-2,
         "t_end": 100.0, "n_snapshots": 30, "t_first": 0.01, "V": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.5)),
         "K": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 0.5)), "V_b": None, "means": (0.0, 1.0, 2.6, 4.4),
         "weights": (0.25, 0.25, 0.25, 0.25), "variance": 0.04, "latitude_range": math.pi / 4,
         "kernel_dtype": "float32"},
        {"n_tokens": 800, "t_end": 40.0, "n_snapshots": 20, "kernel_dtype": "float64"})
