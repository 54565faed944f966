"""Presets for Duranthon, Marion, Boyer, Loureiro, Zdeborova, "Statistical advantage of softmax attention: insights
from single-location regression" (2025, arXiv 2509.21936).

The population formulas (risk on M, Bayes risk, linear closed form) are derived in :mod:`attnlab.duranthon.population`
and verified here against Monte Carlo. All risks are noiseless excess risks ``E[(x_{eps*}.v*/sqrt(D) - f)^2]`` (the
null predictor scores 1). Optimised risks are Monte Carlo estimates on fresh samples at the key scale chosen on frozen
samples (:func:`attnlab.duranthon.population.optimal_key_scale`), with standard errors.

Modules: configs, runs and registration here; metrics and checks in :mod:`attnlab.duranthon.summaries`; figures in
:mod:`attnlab.duranthon.figures`.

Simulation size: the replica-against-ERM presets fit at ``D = sqrt_ND / sqrt(alpha)``, ``N = alpha D`` (default
sqrt_ND = 500). A fit holds the N L_max tokens of dimension D in float64, N L_max D = sqrt_ND^2 L_max numbers
whatever alpha, and each L-BFGS iteration reads them a few times; the replica prediction does not depend on the size,
while the ERM test error carries a finite-size gap to it. ``bench/erm_scale.py`` runs the
``duranthon-sample-complexity`` code at increasing sqrt_ND up to 10^4 and reports, per size, the gap in standard
errors, the wall time and the peak memory; a single large run is, e.g.,
``attnlab run duranthon-sample-complexity --set sqrt_ND=10000 --set alphas=[1.0]``.
"""

from __future__ import annotations

import math

import numpy as np
import xarray as xr

from attnlab._random import fold_in
from attnlab.duranthon.activations import activation
from attnlab.duranthon.configs import (
    PAPER_LAM_GRID,
    ActivationsConfig,
    LowSNRConfig,
    PopulationConfig,
    SampleComplexityConfig,
)
from attnlab.duranthon.data import LengthLaw, length_law, sample_teacher_sqrtD
from attnlab.duranthon.erm import fresh_test_error
from attnlab.duranthon.population import (
    bayes_risk_is,
    bayes_risk_mc,
    bayes_risk_quad,
    linear_risk,
    optimal_key_scale,
    overlap_risk,
    vectors_on_manifold,
)
from attnlab.duranthon.summaries import (
    _quiet,
    summarize_activations,
    summarize_low_snr,
    summarize_population,
    summarize_sample_complexity,
)
from attnlab.registry import Preset, deferred, register

CITATION = "Duranthon, Marion, Boyer, Loureiro, Zdeborova, arXiv 2509.21936 (2025)"
PAPER = "duranthon"


def _bayes(key, model, nu, L, n):
    """Bayes risk and its SE: quadrature when every length is <= 2 (SE 0), otherwise importance sampling on
    spiked-SLR (:func:`attnlab.duranthon.population.bayes_risk_is`: the risk is a rare-event probability at large nu) and
    plain Monte Carlo on max-SLR (near-ties of the top two tokens are not rare: O(1/nu))."""
    if math.isinf(nu):
        return 0.0, 0.0
    if length_law(L).L_max <= 2:
        return bayes_risk_quad(model, nu, L), 0.0
    if model == "spiked":
        return bayes_risk_is(key, nu, L, n)
    if len(length_law(L).values) > 1:  # shared (k, v), c_nu independent of L: the mean of the per-L risks
        parts = [_bayes(fold_in(key, v), model, nu, v, n) for v in length_law(L).values]
        p = length_law(L).probs
        return sum(pi * b for pi, (b, _) in zip(p, parts)), math.sqrt(sum((pi * s) ** 2 for pi, (_, s) in zip(p, parts)))
    return bayes_risk_mc(key, model, nu, L, n)


# long_name of every coordinate the presets' datasets have (CF): the swept and compared quantities
COORDINATE_NAMES = {
    "model": "SLR model (spiked or max)",
    "L": "sequence length L",
    "nu": "signal strength nu",
    "activation": "attention activation sigma",
    "setting": "model and sequence-length law",
    "variable_L": "the sequence length is random, L ~ U{1,2,3}",
    "alpha": "sample ratio alpha = N/D",
    "lam": "regularisation lambda_k = lambda_v",
    "set": "independent frozen sample set of the replica equations",
    "order": "replica order parameter",
    "bo_order": "Bayes-optimal order parameter",
    "lam_kv": "regularisation of the key and of the value",
    "lam_grid": "grid value of lambda_k = lambda_v",
    "seed": "independent ERM data set",
    "overlap": "overlap of the ERM estimate with the teacher",
    "jacobian": "estimator of V_hat (pointwise derivative or Stein)",
    "branch": "start of the replica iteration (informed or uninformed branch)",
    "jump": "Stein minus pointwise V_hat, component and its standard error",
    "start": "ERM initialisation (informed or random)",
}


def _dimensionless(ds: xr.Dataset) -> xr.Dataset:
    """Every variable and coordinate of these presets is dimensionless (risks are normalised so that the null
    predictor scores 1; counts, flags, labels and indices): ``units = "1"`` wherever a unit is not yet stated, and
    each coordinate's ``long_name`` from :data:`COORDINATE_NAMES`."""
    for name in list(ds.data_vars) + list(ds.coords):
        ds[name].attrs.setdefault("units", "1")
    for name in ds.coords:
        if name in COORDINATE_NAMES:
            ds[name].attrs.setdefault("long_name", COORDINATE_NAMES[name])
    return ds


def _finding_population(m, cfg) -> str:
    gap = m.get("min_linear_minus_softmax")
    text = "optimised softmax attention reaches the Bayes risk at every (model, L, nu)"
    if gap is not None:
        text += f"; linear attention stays above it by at least {gap:.3g}"
    return text


def _finding_activations(m, cfg) -> str:
    pens = {a: m.get(f"variable_L_penalty_spiked_{a}") for a in cfg.activations}
    return "variable-L penalty (spiked, risk at L ~ U{1,2,3} minus the mean of fixed L): " + ", ".join(
        f"{a} {v:+.3f}" for a, v in pens.items() if v is not None)


def _finding_sample_complexity(m, cfg) -> str:
    parts = [f"{a} alpha={al:g}: ERM {m[f'{a}_sim_test_error_alpha{al:g}']:.3f} vs replica "
             f"{m[f'{a}_replica_test_error_alpha{al:g}']:.3f}" for a in cfg.activations for al in cfg.alphas]
    return "; ".join(parts) + f"; Bayes floor {m['bayes_risk']:.3f}"


def _finding_low_snr(m, cfg) -> str:
    return (f"{100 * m['fixed_points_converged_fraction']:.0f}% of the replica points converge along the lambda path; "
            + (f"largest replica-ERM gap {m['theory_vs_simulation_max_abs_gap']:.3g}"
               if m.get("theory_vs_simulation_max_abs_gap") is not None else "no replica-ERM pair to compare"))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-population: risk against nu and L for each activation, Bayes and linear closed forms on top
# --------------------------------------------------------------------------------------------------------------------






def run_population(cfg: PopulationConfig, key, progress=None) -> xr.Dataset:
    shape = (len(cfg.models), len(cfg.Ls), len(cfg.nus))
    risk = np.zeros(shape + (len(cfg.activations),))
    risk_se, kappa, kappa_conv = np.zeros_like(risk), np.zeros_like(risk), np.ones(risk.shape, bool)
    bayes, bayes_se, bayes_mc, bayes_mc_se, lin, lin_se = (np.zeros(shape) for _ in range(6))
    total, done = int(np.prod(shape)), 0
    for i, model in enumerate(cfg.models):
        for j, L in enumerate(cfg.Ls):
            for m, nu in enumerate(cfg.nus):
                kk = fold_in(key, 1000 * i + 100 * j + m)
                bayes[i, j, m], bayes_se[i, j, m] = _bayes(fold_in(kk, 1), model, nu, L, cfg.n_mc)
                bayes_mc[i, j, m], bayes_mc_se[i, j, m] = bayes_risk_mc(fold_in(kk, 2), model, nu, L,
                                                                        cfg.n_mc)
                lin[i, j, m], lin_se[i, j, m], _ = linear_risk(model, nu, L, key=fold_in(kk, 3),
                                                               n=cfg.n_mc)
                padded = LengthLaw(tuple(range(1, max(cfg.Ls) + 1)),
                                   tuple(float(v == L) for v in range(1, max(cfg.Ls) + 1)))  # one compiled shape
                for a, name in enumerate(cfg.activations):
                    o = optimal_key_scale(fold_in(kk, 10 + a), activation(name), model, nu, padded,
                                          cfg.n_mc, kappa_max=cfg.kappa_max)
                    risk[i, j, m, a], risk_se[i, j, m, a], kappa[i, j, m, a] = o.risk, o.se, o.kappa
                    kappa_conv[i, j, m, a] = o.converged
                done += 1
                if progress is not None:
                    progress(done, total)
    # The risk on M from four overlaps against the predictor on sequences in R^D (first model, last L, first nu).
    model, L, nu, act = cfg.models[0], cfg.Ls[-1], cfg.nus[0], activation(cfg.activations[0])
    ov = (1.2, 2.0, 0.8, 1.0)
    k_star, v_star = sample_teacher_sqrtD(fold_in(key, 7), cfg.D_check)
    th, th_se = overlap_risk(fold_in(key, 8), act, model, nu, L, *ov, n=cfg.n_mc)
    k, v = vectors_on_manifold(fold_in(key, 9), k_star, v_star, *ov)
    sim, sim_se = fresh_test_error(fold_in(key, 10), act, k, v, k_star, v_star, model, nu, L, cfg.n_check)

    dims4, dims3 = ("model", "L", "nu", "activation"), ("model", "L", "nu")
    u = {"units": "1"}
    data = {
        "risk": (dims4, risk, {**u, "long_name": "optimised population risk (MC, fresh samples)"}),
        "risk_se": (dims4, risk_se, u),
        "kappa": (dims4, kappa, {**u, "long_name": "optimal key scale m_k (s_k = 0)"}),
        "kappa_converged": (dims4, kappa_conv, {**u, "long_name": "key-scale optimiser converged"}),
        "bayes_risk": (dims3, bayes, {**u, "long_name": "Bayes risk 1 - E|softmax(c_nu chi*)|^2 (quadrature if L<=2; "
                                              "else importance sampling (spiked), Monte Carlo (max))"}),
        "bayes_risk_se": (dims3, bayes_se, u),
        "bayes_risk_mc": (dims3, bayes_mc, u),
        "bayes_risk_mc_se": (dims3, bayes_mc_se, u),
        "linear_closed_form": (dims3, lin, {**u, "long_name": "optimal linear 1+kappa chi risk, closed form"}),
        "linear_closed_form_se": (dims3, lin_se, u),
        "overlap_formula_risk": ((), th, u), "overlap_formula_risk_se": ((), th_se, u),
        "overlap_rd_risk": ((), sim, {**u, "D": cfg.D_check, "n": cfg.n_check}), "overlap_rd_risk_se": ((), sim_se, u),
    }
    attrs = {"paper": CITATION, "risk_definition": "noiseless excess risk E[(x_eps.v*/sqrt(D) - f)^2]",
             "overlap_check": f"{act.name}, {model}, L={L}, nu={nu}, (m_k,q_k,m_v,q_v)={ov}"}
    coords = {"model": list(cfg.models), "L": list(cfg.Ls), "nu": list(cfg.nus), "activation": list(cfg.activations)}
    return _dimensionless(xr.Dataset(data, coords=coords, attrs=attrs))


register(Preset(
    name="duranthon-population", paper=PAPER, citation=CITATION, figure="Fig. 1",
    description="Population (alpha = inf) risk against nu and L for softmax, linear, centred linear and "
                "softplus attention on spiked- and max-SLR, with the Bayes risk and the linear closed form on top.",
    config_cls=PopulationConfig, run=run_population, summarize=summarize_population,
    plot=deferred("attnlab.duranthon.figures:plot_population"),
    defaults={}, finding=_finding_population,
    quick={"nus": (2.0, 5.0), "activations": ("softmax", "linear"), "n_mc": 10_000, "n_check": 2000},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-activations: the variable-L activation table
# --------------------------------------------------------------------------------------------------------------------

_SETTINGS = [("spiked", (1,)), ("spiked", (2,)), ("spiked", (3,)), ("spiked", (1, 2, 3)),
             ("max", (1,)), ("max", (2,)), ("max", (3,)), ("max", (1, 2, 3))]




def _setting_name(model, Ls):
    return f"{model} L={Ls[0]}" if len(Ls) == 1 else f"{model} L~U{{{','.join(map(str, Ls))}}}"


def run_activations(cfg: ActivationsConfig, key, progress=None) -> xr.Dataset:
    n_s, n_a = len(_SETTINGS), len(cfg.activations)
    risk, se, kappa, cshift = (np.zeros((n_s, n_a)) for _ in range(4))
    kappa_conv = np.ones((n_s, n_a), bool)
    bayes, bayes_se, lin, lin_se = (np.zeros(n_s) for _ in range(4))
    for s, (model, Ls) in enumerate(_SETTINGS):
        nu = cfg.nu_spiked if model == "spiked" else cfg.nu_max
        L = Ls[0] if len(Ls) == 1 else Ls
        kk = fold_in(key, s)
        bayes[s], bayes_se[s] = _bayes(fold_in(kk, 1), model, nu, L, cfg.n_mc)
        lin[s], lin_se[s], _ = linear_risk(model, nu, L, key=fold_in(kk, 2), n=cfg.n_mc)
        # zero-probability lengths pad every setting to L_max = 3: one compiled sampler and weight map for all
        padded = LengthLaw((1, 2, 3), tuple(float(v in Ls) / len(Ls) for v in (1, 2, 3)))
        for a, name in enumerate(cfg.activations):
            o = optimal_key_scale(fold_in(kk, 10 + a), activation(name), model, nu, padded, cfg.n_mc,
                                  kappa_max=cfg.kappa_max)
            risk[s, a], se[s, a], kappa[s, a], cshift[s, a] = o.risk, o.se, o.kappa, o.c
            kappa_conv[s, a] = o.converged
        if progress is not None:
            progress(s + 1, n_s)
    d2 = ("setting", "activation")
    u = {"units": "1"}
    data = {"risk": (d2, risk, {**u, "long_name": "optimised population risk (MC, fresh samples)"}),
            "risk_se": (d2, se, u), "kappa": (d2, kappa, u), "erf_c": (d2, cshift, u),
            "kappa_converged": (d2, kappa_conv, {**u, "long_name": "key-scale optimiser converged"}),
            "bayes_risk": (("setting",), bayes, u), "bayes_risk_se": (("setting",), bayes_se, u),
            "linear_closed_form": (("setting",), lin, u), "linear_closed_form_se": (("setting",), lin_se, u)}
    coords = {"setting": [_setting_name(m, Ls) for m, Ls in _SETTINGS], "activation": list(cfg.activations),
              "model": ("setting", [m for m, _ in _SETTINGS]),
              "variable_L": ("setting", [len(Ls) > 1 for _, Ls in _SETTINGS]),
              "nu": ("setting", [cfg.nu_spiked if m == "spiked" else cfg.nu_max for m, _ in _SETTINGS])}
    return _dimensionless(xr.Dataset(data, coords=coords, attrs={"paper": CITATION, "kappa_max": cfg.kappa_max,
                                                                 "risk_definition": "noiseless excess risk"}))


register(Preset(
    name="duranthon-activations", paper=PAPER, citation=CITATION, figure="Fig. 2 / Cor. 4.4 (activation table)",
    description="Optimised population risk of softmax, linear, centred linear, erf (c optimised) and "
                "softplus-normalised attention for fixed L and L ~ U{1,2,3}: the variable-L penalty of "
                "unnormalised activations.",
    config_cls=ActivationsConfig, run=run_activations, summarize=summarize_activations,
    plot=deferred("attnlab.duranthon.figures:plot_activations"),
    defaults={}, quick={"n_mc": 5000}, finding=_finding_activations,
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-sample-complexity: test error against alpha, replica lines and ERM markers
# --------------------------------------------------------------------------------------------------------------------




QUICK_LAM_STAR_GRID = (0.003, 0.01, 0.03, 0.1, 0.3)
"""The quick run's brackets of lambda* (``lam=optimal``): at its sizes (spiked-SLR, nu = 5, L = 2, n_replica = 1000)
the replica test error falls from lambda = 3 down to lambda* ~ 0.1 at alpha = 8, inside, and at alpha = 2 below
PAPER_LAM_GRID's smallest lambda 0.03, down to 0.005-0.015, where the frozen sets' fixed points near RS instability
(some sets with several fixed points at 0.003-0.01) decide whether a root is found or the grid's edge is reported."""




def run_sample_complexity(cfg: SampleComplexityConfig, key, progress=None) -> xr.Dataset:
    from attnlab.duranthon.sample_complexity import theory_vs_simulation

    scale = cfg.informed_scale if math.isinf(cfg.nu) else None
    optimal = cfg.lam == "optimal"
    lam = math.nan if optimal else cfg.lam
    grid = (cfg.lam_star_grid or cfg.lam_grid or PAPER_LAM_GRID) if optimal else (cfg.lam_grid or None)
    return _dimensionless(theory_vs_simulation(key, cfg.model, cfg.nu, cfg.L, cfg.alphas, lam, lam, cfg.activations,
                                cfg.n_replica, cfg.n_sets, cfg.sqrt_ND, cfg.n_seeds, cfg.n_test, cfg.n_risk,
                                informed_scale=scale, lam_grid=grid, grid_rs_stable=cfg.lam_grid_rs_stable,
                                lam_optimal=optimal, progress=progress))


register(Preset(
    name="duranthon-sample-complexity", paper=PAPER, citation=CITATION, figure="Fig. 3 (at fixed lambda)",
    description="Test error against alpha for softmax and linear attention: replica fixed point (reconstructed RS "
                "equations, frozen samples, Anderson-accelerated) against L-BFGS ERM at the sqrt(ND) size rule; "
                "Bayes-optimal curve (spiked-SLR) and Bayes floor at alpha = inf.",
    config_cls=SampleComplexityConfig, run=run_sample_complexity, summarize=summarize_sample_complexity,
    plot=deferred("attnlab.duranthon.figures:plot_sample_complexity"), defaults={}, finding=_finding_sample_complexity,
    quick={"alphas": (2.0, 8.0), "activations": ("softmax",), "n_replica": 1000, "n_sets": 4, "sqrt_ND": 150.0,
           "n_seeds": 8, "n_test": 4000, "n_risk": 20_000, "lam_star_grid": QUICK_LAM_STAR_GRID},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-low-snr: low nu, decreasing lambda; where and why replica theory and ERM part
# --------------------------------------------------------------------------------------------------------------------




def run_low_snr(cfg: LowSNRConfig, key, progress=None) -> xr.Dataset:
    from attnlab.duranthon.sample_complexity import low_snr_diagnostics

    scale = cfg.informed_scale if math.isinf(cfg.nu) else None
    ds = low_snr_diagnostics(key, cfg.model, cfg.nu, cfg.L, cfg.alphas, cfg.lams, cfg.activation, cfg.jacobians,
                               cfg.n_replica, cfg.n_sets, cfg.sqrt_ND, cfg.n_seeds, cfg.n_test, cfg.n_risk,
                               informed_scale=scale, max_iter=cfg.max_iter, qmc=cfg.qmc, progress=progress)
    return _dimensionless(ds)


register(Preset(
    name="duranthon-low-snr", paper=PAPER, citation=CITATION, figure="Sec. 5 discussion (low nu, low lambda)",
    description="Low-SNR regime (spiked nu = 1, L = 3) along a decreasing lambda path: replica fixed points "
                "(Anderson, continuation, informed and uninformed branches, pointwise and Stein V_hat) against "
                "L-BFGS ERM from informed and random starts, with per-point solver diagnostics.",
    config_cls=LowSNRConfig, run=run_low_snr, summarize=_quiet(summarize_low_snr),
    plot=_quiet(deferred("attnlab.duranthon.figures:plot_low_snr")),
    defaults={}, finding=_finding_low_snr,
    quick={"lams": (1.0, 0.1), "n_replica": 256, "sqrt_ND": 200.0, "n_seeds": 6, "n_test": 10_000, "n_risk": 5000,
           "max_iter": 100},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-gd-landscape: which minima plain GD and SGD reach (App. A.2.2, A.2.6); module landscape_preset
# --------------------------------------------------------------------------------------------------------------------

from attnlab.duranthon import landscape_preset as _landscape  # noqa: E402

register(Preset(
    name="duranthon-gd-landscape", paper=PAPER, citation=CITATION, figure="App. A.2.2 / A.2.6 (GD landscape)",
    description="Full-batch GD and minibatch SGD on the empirical risk of softmax attention from many random starts "
                "at a few (alpha, nu, lambda): the minima reached, classified against the informed (replica) "
                "minimum, their test errors against the replica prediction, and M's invariance under the flow.",
    config_cls=_landscape.LandscapeConfig, run=_landscape.run, summarize=_landscape.summarize,
    plot=deferred("attnlab.duranthon.figures:plot_gd_landscape"), defaults={}, finding=_landscape.finding,
    quick={"D": 60, "n_sets": 3, "n_informed_sets": 10, "n_starts": 12, "n_steps": 3000, "sgd_steps": 2000,
           "n_logs": 30, "n_fresh": 5000,
           "n_replica": 500, "n_risk": 10_000},
))
