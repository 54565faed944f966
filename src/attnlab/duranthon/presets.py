"""Presets for Duranthon, Marion, Boyer, Loureiro, Zdeborova, "Statistical advantage of softmax attention: insights
from single-location regression" (2025, arXiv 2509.21936).

The paper body was not available (spec, first section): the population formulas are the spec's derivation [I],
verified here against Monte Carlo. All risks are noiseless excess risks ``E[(x_{eps*}.v*/sqrt(D) - f)^2]`` (the null
predictor scores 1). Optimised risks are Monte Carlo estimates on fresh samples at the key scale chosen on frozen
samples (:func:`attnlab.duranthon.population.optimal_key_scale`), with standard errors.

Simulation size: the replica-against-ERM presets fit at ``D = sqrt_ND / sqrt(alpha)``, ``N = alpha D`` (default
sqrt_ND = 500). This machine (2 cores, 24 GB) reaches sqrt_ND = 10^4: at alpha = 1, D = N = 10,000, three L-BFGS
fits take 92 s with an 8.7 GB peak, and the ERM test error is within 0.006 (1.3 SE) of the replica's
(``bench/erm_scale.py``; ``attnlab run duranthon-sample-complexity --set sqrt_ND=10000 --set alphas=[1.0]``).
"""

from __future__ import annotations

import math
from typing import Literal

import jax
import numpy as np
import pydantic
import xarray as xr

from attnlab.config import ExperimentConfig
from attnlab.duranthon.activations import ACTIVATIONS, activation
from attnlab.duranthon.data import LengthLaw, length_law, sample_teacher_sqrtD
from attnlab.duranthon.population import (
    bayes_risk_is,
    bayes_risk_mc,
    bayes_risk_quad,
    linear_risk,
    mc_risk_in_RD,
    optimal_key_scale,
    overlap_risk,
    vectors_on_manifold,
)
from attnlab.plot import plt
from attnlab.registry import Check, Preset, register

CITATION = "Duranthon, Marion, Boyer, Loureiro, Zdeborova, arXiv 2509.21936 (2025)"
PAPER = "duranthon"
ROUND_OFF = 1e-10  # absolute floor of tolerances: at L = 1 every risk is 0 up to float64 round-off
ActName = Literal["softmax", "linear", "centred_linear", "erf", "softplus"]


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
        parts = [_bayes(jax.random.fold_in(key, v), model, nu, v, n) for v in length_law(L).values]
        p = length_law(L).probs
        return sum(pi * b for pi, (b, _) in zip(p, parts)), math.sqrt(sum((pi * s) ** 2 for pi, (_, s) in zip(p, parts)))
    return bayes_risk_mc(key, model, nu, L, n)


# --------------------------------------------------------------------------------------------------------------------
# duranthon-population: risk against nu and L for each activation, Bayes and linear closed forms on top
# --------------------------------------------------------------------------------------------------------------------



def _positive_finite(name: str, values):
    """Validator body shared by the tuple fields of positive, finite numbers (nus, alphas)."""
    if any(not math.isfinite(x) or x <= 0 for x in values):
        raise ValueError(f"every {name} must be finite and > 0, got {values}")
    return values

class PopulationConfig(ExperimentConfig):
    """Config of ``duranthon-population`` (field names are the ``--set`` keys)."""

    models: tuple[Literal["spiked", "max"], ...] = ("spiked", "max")
    nus: tuple[float, ...] = pydantic.Field((1.0, 2.0, 5.0, 10.0), min_length=1, description="signal strengths")
    Ls: tuple[int, ...] = pydantic.Field((2, 3), min_length=1, description="fixed sequence lengths")
    activations: tuple[ActName, ...] = ("softmax", "linear", "centred_linear", "softplus")
    n_mc: int = pydantic.Field(50_000, ge=1000, description="Monte Carlo samples per risk estimate")
    kappa_max: float = pydantic.Field(40.0, gt=0, description="upper end of the key-scale search")
    D_check: int = pydantic.Field(40, ge=4, description="dimension of the R^D check of the risk on M")
    n_check: int = pydantic.Field(4000, ge=100, description="sequences in the R^D check")

    _nus = pydantic.field_validator("nus")(classmethod(lambda cls, v: _positive_finite("nu", v)))

    @pydantic.field_validator("Ls")
    @classmethod
    def _Ls(cls, v):
        if any(x < 1 for x in v):
            raise ValueError(f"every sequence length must be >= 1, got {v}")
        return v


def run_population(cfg: PopulationConfig, key, progress=None) -> xr.Dataset:
    shape = (len(cfg.models), len(cfg.Ls), len(cfg.nus))
    risk = np.zeros(shape + (len(cfg.activations),))
    risk_se, kappa = np.zeros_like(risk), np.zeros_like(risk)
    bayes, bayes_se, bayes_mc, bayes_mc_se, lin, lin_se = (np.zeros(shape) for _ in range(6))
    total, done = int(np.prod(shape)), 0
    for i, model in enumerate(cfg.models):
        for j, L in enumerate(cfg.Ls):
            for m, nu in enumerate(cfg.nus):
                kk = jax.random.fold_in(key, 1000 * i + 100 * j + m)
                bayes[i, j, m], bayes_se[i, j, m] = _bayes(jax.random.fold_in(kk, 1), model, nu, L, cfg.n_mc)
                bayes_mc[i, j, m], bayes_mc_se[i, j, m] = bayes_risk_mc(jax.random.fold_in(kk, 2), model, nu, L,
                                                                        cfg.n_mc)
                lin[i, j, m], lin_se[i, j, m], _ = linear_risk(model, nu, L, key=jax.random.fold_in(kk, 3),
                                                               n=cfg.n_mc)
                padded = LengthLaw(tuple(range(1, max(cfg.Ls) + 1)),
                                   tuple(float(v == L) for v in range(1, max(cfg.Ls) + 1)))  # one compiled shape
                for a, name in enumerate(cfg.activations):
                    o = optimal_key_scale(jax.random.fold_in(kk, 10 + a), activation(name), model, nu, padded,
                                          cfg.n_mc, kappa_max=cfg.kappa_max)
                    risk[i, j, m, a], risk_se[i, j, m, a], kappa[i, j, m, a] = o.risk, o.se, o.kappa
                done += 1
                if progress is not None:
                    progress(done, total)
    # The risk on M from four overlaps against the predictor on sequences in R^D (first model, last L, first nu).
    model, L, nu, act = cfg.models[0], cfg.Ls[-1], cfg.nus[0], activation(cfg.activations[0])
    ov = (1.2, 2.0, 0.8, 1.0)
    k_star, v_star = sample_teacher_sqrtD(jax.random.fold_in(key, 7), cfg.D_check)
    th, th_se = overlap_risk(jax.random.fold_in(key, 8), act, model, nu, L, *ov, n=cfg.n_mc)
    k, v = vectors_on_manifold(jax.random.fold_in(key, 9), k_star, v_star, *ov)
    sim, sim_se = mc_risk_in_RD(jax.random.fold_in(key, 10), act, k, v, k_star, v_star, model, nu, L, cfg.n_check)

    dims4, dims3 = ("model", "L", "nu", "activation"), ("model", "L", "nu")
    u = {"units": "1"}
    data = {
        "risk": (dims4, risk, {**u, "long_name": "optimised population risk (MC, fresh samples)"}),
        "risk_se": (dims4, risk_se, u),
        "kappa": (dims4, kappa, {**u, "long_name": "optimal key scale m_k (s_k = 0)"}),
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
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _tag(model, L, nu):
    return f"{model}_L{L}_nu{nu:g}"


def summarize_population(ds: xr.Dataset, cfg: PopulationConfig):
    metrics, checks = {}, []
    acts = list(ds.activation.values)
    for model in ds.model.values:
        for L in ds.L.values:
            for nu in ds.nu.values:
                p = ds.sel(model=model, L=L, nu=nu)
                tag = _tag(model, int(L), float(nu))
                metrics[f"bayes_risk_{tag}"] = float(p.bayes_risk)
                metrics[f"linear_closed_form_risk_{tag}"] = float(p.linear_closed_form)
                for a in acts:
                    metrics[f"{a}_risk_{tag}"] = float(p.risk.sel(activation=a))
                if "linear" in acts:
                    q = p.sel(activation="linear")
                    checks.append(Check(f"linear closed form vs MC-optimised linear, {tag}", float(p.linear_closed_form),
                                        float(q.risk), 5 * math.hypot(float(q.risk_se), float(p.linear_closed_form_se)),
                                        "5 SE"))
                if "softmax" in acts:
                    q = p.sel(activation="softmax")
                    checks.append(Check(f"Bayes risk vs MC-optimised softmax (Prop. 4.2), {tag}", float(p.bayes_risk),
                                        float(q.risk), 5 * math.hypot(float(q.risk_se), float(p.bayes_risk_se)) + ROUND_OFF,
                                "5 SE + 1e-10 round-off"))
                if int(L) <= 2:
                    checks.append(Check(f"Bayes quadrature vs Monte Carlo, {tag}", float(p.bayes_risk),
                                        float(p.bayes_risk_mc), 5 * float(p.bayes_risk_mc_se), "5 SE"))
                elif str(model) == "spiked":
                    checks.append(Check(f"Bayes importance sampling vs plain Monte Carlo, {tag}", float(p.bayes_risk),
                                        float(p.bayes_risk_mc),
                                        5 * math.hypot(float(p.bayes_risk_mc_se), float(p.bayes_risk_se)), "5 SE"))
    checks.append(Check(f"risk on M from 4 overlaps vs predictor in R^D ({ds.attrs['overlap_check']})",
                        float(ds.overlap_formula_risk), float(ds.overlap_rd_risk),
                        5 * math.hypot(float(ds.overlap_formula_risk_se), float(ds.overlap_rd_risk_se)), "5 SE"))
    if "softmax" in acts and "linear" in acts:
        metrics["min_linear_minus_softmax"] = float((ds.risk.sel(activation="linear")
                                                     - ds.risk.sel(activation="softmax")).min())
    return metrics, checks


def _act_label(name):
    return activation(name).label if name != "erf" else "erf 1+erf(c+chi), c optimised"


def plot_population(ds: xr.Dataset, cfg: PopulationConfig):
    models, Ls, nus, acts = list(ds.model.values), list(ds.L.values), ds.nu.values, list(ds.activation.values)
    fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.4), layout="constrained", squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, model in zip(axes[0], models):
        for j, L in enumerate(Ls):
            p = ds.sel(model=model, L=L)
            ls = styles[j % 4]
            for a, name in enumerate(acts):
                q = p.sel(activation=name)
                ax.errorbar(nus, q.risk.values, yerr=q.risk_se.values, fmt="o", ms=4, color=f"C{a}", capsize=2,
                            label=f"{_act_label(name)} (MC)" if j == 0 else None)
            ax.plot(nus, p.bayes_risk.values, "k" + ls, lw=1.2, label=f"Bayes, L={L}")
            ax.plot(nus, p.linear_closed_form.values, color="C1", ls=ls, lw=1, label=f"linear closed form, L={L}")
        ax.set(xlabel="signal strength nu", ylabel="noiseless excess risk", title=f"{model}-SLR, alpha = infinity",
               xscale="log", yscale="log")
        ax.legend(fontsize=7)
    figs = {"risk_vs_nu": fig}
    fig2, axes2 = plt.subplots(1, len(models), figsize=(6 * len(models), 4.4), layout="constrained", squeeze=False)
    for ax, model in zip(axes2[0], models):
        for m, nu in enumerate(nus):
            p = ds.sel(model=model, nu=nu)
            for a, name in enumerate(acts):
                q = p.sel(activation=name)
                ax.errorbar(Ls, q.risk.values, yerr=q.risk_se.values, fmt="o-", ms=4, color=f"C{a}", lw=0.6,
                            alpha=0.3 + 0.7 * (m + 1) / len(nus), label=_act_label(name) if m == len(nus) - 1 else None)
            ax.plot(Ls, p.bayes_risk.values, "k--", lw=0.8, label="Bayes" if m == len(nus) - 1 else None)
        ax.set(xlabel="sequence length L", ylabel="noiseless excess risk",
               title=f"{model}-SLR (darker = larger nu in {list(np.round(nus, 2))})")
        ax.legend(fontsize=7)
    figs["risk_vs_L"] = fig2
    return figs


register(Preset(
    name="duranthon-population", paper=PAPER, citation=CITATION, figure="Fig. 1 [I]",
    description="Population (alpha = inf) risk against nu and L for softmax, linear, centred linear and "
                "softplus attention on spiked- and max-SLR, with the Bayes risk and the linear closed form on top.",
    config_cls=PopulationConfig, run=run_population, summarize=summarize_population, plot=plot_population,
    defaults={}, quick={"nus": (2.0, 5.0), "activations": ("softmax", "linear"), "n_mc": 10_000, "n_check": 2000},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-activations: the variable-L activation table (spec 3.6)
# --------------------------------------------------------------------------------------------------------------------

_SETTINGS = [("spiked", (1,)), ("spiked", (2,)), ("spiked", (3,)), ("spiked", (1, 2, 3)),
             ("max", (1,)), ("max", (2,)), ("max", (3,)), ("max", (1, 2, 3))]


class ActivationsConfig(ExperimentConfig):
    """Config of ``duranthon-activations``: fixed L in {1, 2, 3} and L ~ U{1, 2, 3} for each model."""

    nu_spiked: float = pydantic.Field(5.0, gt=0, allow_inf_nan=False, description="nu of spiked-SLR")
    nu_max: float = pydantic.Field(math.inf, gt=0, description="nu of max-SLR (inf allowed)")
    activations: tuple[ActName, ...] = ACTIVATIONS
    n_mc: int = pydantic.Field(100_000, ge=1000, description="Monte Carlo samples per risk estimate")
    kappa_max: float = pydantic.Field(1000.0, gt=0, description="upper end of the key-scale search")


def _setting_name(model, Ls):
    return f"{model} L={Ls[0]}" if len(Ls) == 1 else f"{model} L~U{{{','.join(map(str, Ls))}}}"


def run_activations(cfg: ActivationsConfig, key, progress=None) -> xr.Dataset:
    n_s, n_a = len(_SETTINGS), len(cfg.activations)
    risk, se, kappa, cshift = (np.zeros((n_s, n_a)) for _ in range(4))
    bayes, bayes_se, lin, lin_se = (np.zeros(n_s) for _ in range(4))
    for s, (model, Ls) in enumerate(_SETTINGS):
        nu = cfg.nu_spiked if model == "spiked" else cfg.nu_max
        L = Ls[0] if len(Ls) == 1 else Ls
        kk = jax.random.fold_in(key, s)
        bayes[s], bayes_se[s] = _bayes(jax.random.fold_in(kk, 1), model, nu, L, cfg.n_mc)
        lin[s], lin_se[s], _ = linear_risk(model, nu, L, key=jax.random.fold_in(kk, 2), n=cfg.n_mc)
        # zero-probability lengths pad every setting to L_max = 3: one compiled sampler and weight map for all
        padded = LengthLaw((1, 2, 3), tuple(float(v in Ls) / len(Ls) for v in (1, 2, 3)))
        for a, name in enumerate(cfg.activations):
            o = optimal_key_scale(jax.random.fold_in(kk, 10 + a), activation(name), model, nu, padded, cfg.n_mc,
                                  kappa_max=cfg.kappa_max)
            risk[s, a], se[s, a], kappa[s, a], cshift[s, a] = o.risk, o.se, o.kappa, o.c
        if progress is not None:
            progress(s + 1, n_s)
    d2 = ("setting", "activation")
    u = {"units": "1"}
    data = {"risk": (d2, risk, {**u, "long_name": "optimised population risk (MC, fresh samples)"}),
            "risk_se": (d2, se, u), "kappa": (d2, kappa, u), "erf_c": (d2, cshift, u),
            "bayes_risk": (("setting",), bayes, u), "bayes_risk_se": (("setting",), bayes_se, u),
            "linear_closed_form": (("setting",), lin, u), "linear_closed_form_se": (("setting",), lin_se, u)}
    coords = {"setting": [_setting_name(m, Ls) for m, Ls in _SETTINGS], "activation": list(cfg.activations),
              "model": ("setting", [m for m, _ in _SETTINGS]),
              "variable_L": ("setting", [len(Ls) > 1 for _, Ls in _SETTINGS]),
              "nu": ("setting", [cfg.nu_spiked if m == "spiked" else cfg.nu_max for m, _ in _SETTINGS])}
    return xr.Dataset(data, coords=coords, attrs={"paper": CITATION, "kappa_max": cfg.kappa_max,
                                                  "risk_definition": "noiseless excess risk"})


def _penalty(ds, model, act):
    """Variable-L risk minus the mean of the fixed-L optima (L = 1, 2, 3), with its SE."""
    sub = ds.sel(activation=act).where(ds.model == model, drop=True)
    var = sub.where(sub.variable_L, drop=True)
    fixed = sub.where(~sub.variable_L, drop=True)
    value = float(var.risk.values[0]) - float(fixed.risk.mean())
    err = math.sqrt(float(var.risk_se.values[0]) ** 2 + float((fixed.risk_se**2).sum()) / fixed.sizes["setting"] ** 2)
    return value, err


def summarize_activations(ds: xr.Dataset, cfg: ActivationsConfig):
    metrics, checks = {}, []
    for s in ds.setting.values:
        p = ds.sel(setting=s)
        tag = s.replace(" ", "_").replace("~", "").replace("{", "").replace("}", "").replace(",", "").replace("=", "")
        metrics[f"bayes_risk_{tag}"] = float(p.bayes_risk)
        metrics[f"linear_closed_form_risk_{tag}"] = float(p.linear_closed_form)
        for a in ds.activation.values:
            metrics[f"{a}_risk_{tag}"] = float(p.risk.sel(activation=a))
        if "linear" in ds.activation.values:
            q = p.sel(activation="linear")
            checks.append(Check(f"linear closed form vs MC-optimised linear, {s}", float(p.linear_closed_form),
                                float(q.risk), 5 * math.hypot(float(q.risk_se), float(p.linear_closed_form_se)) + ROUND_OFF,
                                "5 SE + 1e-10 round-off"))
        if "softmax" in ds.activation.values and math.isfinite(float(p.nu)):
            q = p.sel(activation="softmax")
            checks.append(Check(f"Bayes risk vs MC-optimised softmax (shared k, v), {s}", float(p.bayes_risk),
                                float(q.risk), 5 * math.hypot(float(q.risk_se), float(p.bayes_risk_se)) + ROUND_OFF,
                                "5 SE + 1e-10 round-off"))
    for model in ("spiked", "max"):
        for a in ds.activation.values:
            metrics[f"variable_L_penalty_{model}_{a}"], metrics[f"variable_L_penalty_{model}_{a}_se"] = \
                _penalty(ds, model, a)
    return metrics, checks


def plot_activations(ds: xr.Dataset, cfg: ActivationsConfig):
    settings, acts = list(ds.setting.values), list(ds.activation.values)
    fig, ax = plt.subplots(figsize=(12, 4.6), layout="constrained")
    width = 0.8 / (len(acts) + 1)
    x = np.arange(len(settings))
    ax.bar(x - 0.4 + width / 2, ds.bayes_risk.values, width, yerr=ds.bayes_risk_se.values, color="k", label="Bayes")
    for a, name in enumerate(acts):
        q = ds.sel(activation=name)
        ax.bar(x - 0.4 + (a + 1.5) * width, q.risk.values, width, yerr=5 * q.risk_se.values, color=f"C{a}",
               label=_act_label(name))
    ax.set_xticks(x, [f"{s}\nnu={float(n):g}" for s, n in zip(settings, ds.nu.values)], fontsize=8)
    ax.set(ylabel="optimised noiseless excess risk (error bars 5 SE)",
           title="activations at alpha = infinity: fixed L vs L ~ U{1,2,3} (shared k, v)")
    ax.legend(fontsize=7, ncol=2)
    return {"activation_table": fig}


register(Preset(
    name="duranthon-activations", paper=PAPER, citation=CITATION, figure="Fig. 2 / Cor. 4.4 [I] (spec 3.6 table)",
    description="Optimised population risk of softmax, linear, centred linear, erf (c optimised) and "
                "softplus-normalised attention for fixed L and L ~ U{1,2,3}: the variable-L penalty of "
                "unnormalised activations.",
    config_cls=ActivationsConfig, run=run_activations, summarize=summarize_activations, plot=plot_activations,
    defaults={}, quick={"n_mc": 5000},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-sample-complexity: test error against alpha, replica lines and ERM markers
# --------------------------------------------------------------------------------------------------------------------


class _ReplicaVsERMConfig(ExperimentConfig):
    """Fields shared by the replica-against-ERM presets (sample complexity, low SNR)."""

    model: Literal["spiked", "max"] = "spiked"
    n_sets: int = pydantic.Field(2, ge=2, description="independent frozen sets (their spread gives the SE)")
    sqrt_ND: float = pydantic.Field(500.0, gt=0, description="simulation size: D = sqrt_ND/sqrt(alpha)")
    n_test: int = pydantic.Field(4000, ge=100, description="fresh test samples per ERM run")
    informed_scale: float = pydantic.Field(5.0, gt=0, description="key scale of the informed start if nu = inf")

    @pydantic.model_validator(mode="after")
    def _nu(self):
        if math.isinf(self.nu) and self.model == "spiked":
            raise ValueError("nu = inf is defined for max-SLR only")
        return self


# The paper's Fig. 3 settings [3P] (spec 4.5/5): model, nu, L; lambda tuned by grid search (grid U: ours below)
PAPER_SETTINGS = {"fig3-spiked-nu1": {"model": "spiked", "nu": 1.0, "L": 3},
                  "fig3-spiked-nu2": {"model": "spiked", "nu": 2.0, "L": 3},
                  "fig3-max-nuinf": {"model": "max", "nu": math.inf, "L": 3}}
PAPER_LAM_GRID = (0.03, 0.1, 0.3, 1.0, 3.0)


class SampleComplexityConfig(_ReplicaVsERMConfig):
    """Config of ``duranthon-sample-complexity`` (one model, nu, L per run; lambda fixed or by grid search).

    ``setting`` names one of the paper's Fig. 3 settings (:data:`PAPER_SETTINGS`): it fixes model, nu and L (an
    explicit different value is an error) and, unless given, searches lambda over :data:`PAPER_LAM_GRID`::

        attnlab sweep duranthon-sample-complexity --grid setting=fig3-spiked-nu1,fig3-spiked-nu2,fig3-max-nuinf
    """

    setting: Literal["custom", "fig3-spiked-nu1", "fig3-spiked-nu2", "fig3-max-nuinf"] = "custom"
    nu: float = pydantic.Field(5.0, gt=0, description="signal strength (inf allowed for max-SLR)")
    L: int = pydantic.Field(2, ge=1, description="sequence length")
    alphas: tuple[float, ...] = pydantic.Field((1.0, 2.0, 4.0, 8.0), min_length=1)
    lam: float = pydantic.Field(1.0, gt=0, description="lambda_k = lambda_v (when lam_grid is empty)")
    lam_grid: tuple[float, ...] = pydantic.Field((), description="lambda_k = lambda_v grid: per alpha and activation "
                                                 "the lambda of lowest replica test error (empty: fixed lam)")
    lam_grid_rs_stable: bool = pydantic.Field(True, description="grid search among RS-stable (AT) fixed points only")
    activations: tuple[Literal["softmax", "linear"], ...] = ("softmax", "linear")
    n_replica: int = pydantic.Field(1500, ge=50, description="frozen samples per replica set")
    n_seeds: int = pydantic.Field(3, ge=2, description="ERM repeats per alpha")
    n_risk: int = pydantic.Field(50_000, ge=1000, description="Monte Carlo samples of the test-error formula")

    _alphas = pydantic.field_validator("alphas")(classmethod(lambda cls, v: _positive_finite("alpha", v)))
    _lam_grid = pydantic.field_validator("lam_grid")(classmethod(lambda cls, v: _positive_finite("lambda", v)))

    @pydantic.model_validator(mode="before")
    @classmethod
    def _paper_setting(cls, values):
        if not isinstance(values, dict) or values.get("setting", "custom") == "custom":
            return values
        values = dict(values)
        for k, v in PAPER_SETTINGS.get(values["setting"], {}).items():
            if k in values and (values[k] != v if k == "model" else float(values[k]) != float(v)):
                raise ValueError(f"setting={values['setting']} fixes {k}={v}, got {k}={values[k]}")
            values[k] = v
        values.setdefault("lam_grid", PAPER_LAM_GRID)
        return values


def run_sample_complexity(cfg: SampleComplexityConfig, key, progress=None) -> xr.Dataset:
    from attnlab.duranthon.sample_complexity import theory_vs_simulation

    scale = cfg.informed_scale if math.isinf(cfg.nu) else None
    return theory_vs_simulation(key, cfg.model, cfg.nu, cfg.L, cfg.alphas, cfg.lam, cfg.lam, cfg.activations,
                                cfg.n_replica, cfg.n_sets, cfg.sqrt_ND, cfg.n_seeds, cfg.n_test, cfg.n_risk,
                                informed_scale=scale, lam_grid=cfg.lam_grid or None,
                                grid_rs_stable=cfg.lam_grid_rs_stable, progress=progress)


def summarize_sample_complexity(ds: xr.Dataset, cfg: SampleComplexityConfig):
    metrics = {"bayes_risk": float(ds.bayes_population),
               "fixed_points_converged_fraction": float(ds.replica_converged.mean())}
    checks, gaps = [], []
    for a in ds.activation.values:
        for al in ds.alpha.values:
            p = ds.sel(activation=a, alpha=al)
            sim = p.sim_test_error.values
            sim_mean, sim_se = float(sim.mean()), float(sim.std(ddof=1) / math.sqrt(sim.size))
            metrics[f"{a}_sim_test_error_alpha{al:g}"] = sim_mean
            metrics[f"{a}_replica_test_error_alpha{al:g}"] = float(p.replica_test_error)
            if "lambda_opt" in ds:
                metrics[f"{a}_lambda_alpha{al:g}"] = float(p.lambda_opt.sel(lam_kv="lambda_k"))
            if bool(p.replica_converged.all()) and math.isfinite(float(p.replica_test_error)):
                gaps.append(abs(float(p.replica_test_error) - sim_mean))
                checks.append(Check(f"replica vs ERM test error, {a}, alpha={al:g} (D={int(ds.D.sel(alpha=al))})",
                                    float(p.replica_test_error), sim_mean,
                                    5 * math.hypot(sim_se, float(p.replica_test_error_se)),
                                    f"5 SE ({sim.size} ERM seeds, {ds.sizes['set']} frozen sets)"))
    metrics["theory_vs_simulation_max_abs_gap"] = max(gaps) if gaps else float("nan")
    if "replica_at_eigenvalue" in ds:
        metrics["max_at_eigenvalue"] = float(np.nanmax(ds.replica_at_eigenvalue.values))
    if "replica_converged_grid" in ds and ds.sizes["lam_grid"] > 1:
        metrics["grid_fixed_points_converged_fraction"] = float(ds.replica_converged_grid.mean())
    if "bo_test_error" in ds and bool(np.isfinite(ds.bo_test_error.values).any()):
        metrics["bo_fixed_points_converged_fraction"] = float(ds.bo_converged.mean())
        for al in ds.alpha.values:
            p = ds.sel(alpha=al)
            bo, bo_se = float(p.bo_test_error), float(p.bo_test_error_se)
            metrics[f"bo_test_error_alpha{al:g}"] = bo
            if not math.isfinite(bo):
                continue
            # spec 6 item 5: BO lies below every ERM curve, and above the population Bayes risk
            for a in ds.activation.values:
                q = p.sel(activation=a)
                if math.isfinite(float(q.replica_test_error)):
                    erm = float(q.replica_test_error)
                    tol = 5 * math.hypot(bo_se, float(q.replica_test_error_se))
                    checks.append(Check(f"Bayes-optimal <= ERM replica ({a}), alpha={al:g}: max(0, BO - ERM)", 0.0,
                                        max(0.0, bo - erm), tol, "one-sided, 5 SE"))
            floor = float(ds.bayes_population)
            tol = 5 * math.hypot(bo_se, float(ds.bayes_population_se))
            checks.append(Check(f"Bayes-optimal >= population Bayes risk, alpha={al:g}: max(0, Bayes - BO)", 0.0,
                                max(0.0, floor - bo), tol, "one-sided, 5 SE"))
    return metrics, checks


def plot_sample_complexity(ds: xr.Dataset, cfg: SampleComplexityConfig):
    alphas = ds.alpha.values
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained")
    ax = axes[0]
    for a, name in enumerate(ds.activation.values):
        p = ds.sel(activation=name)
        ax.plot(alphas, p.replica_test_error.values, "-", color=f"C{a}", label=f"{name}: replica (RS, spec 4.2)")
        sim = p.sim_test_error.values
        ax.errorbar(alphas, sim.mean(1), yerr=sim.std(1, ddof=1) / np.sqrt(sim.shape[1]), fmt="o", color=f"C{a}",
                    capsize=3, label=f"{name}: L-BFGS ERM (mean +- SE)")
    if "bo_test_error" in ds and bool(np.isfinite(ds.bo_test_error.values).any()):
        ax.plot(alphas, ds.bo_test_error.values, "k-", lw=1.5, label="Bayes-optimal (spec 4.3)")
    ax.axhline(float(ds.bayes_population), color="k", ls="--", lw=1, label="Bayes risk, alpha = inf")
    lam_txt = "lambda by grid search" if ds.attrs.get("lambda_grid_search") else f"lambda={ds.attrs['lambda_k']:g}"
    ax.set(xlabel="alpha = N/D", ylabel="test error E(y - f)^2", xscale="log",
           title=f"{ds.attrs['model']}-SLR, nu={ds.attrs['nu']:g}, L={ds.attrs['L']}, {lam_txt}")
    ax.legend(fontsize=7)
    ax = axes[1]
    for a, name in enumerate(ds.activation.values):
        p = ds.sel(activation=name)
        for o, mk in (("m_k", "o"), ("m_v", "s")):
            ax.plot(alphas, p.replica_order.sel(order=o).mean("set").values, "-", color=f"C{a}")
            ax.plot(alphas, p.sim_overlaps.sel(overlap=o).mean("seed").values, mk, color=f"C{a}",
                    label=f"{name} {o}")
    ax.set(xlabel="alpha", ylabel="overlap", xscale="log", title="overlaps: replica (lines) vs ERM (markers)")
    ax.legend(fontsize=7)
    return {"sample_complexity": fig}


register(Preset(
    name="duranthon-sample-complexity", paper=PAPER, citation=CITATION, figure="Fig. 3 [I] (at fixed lambda)",
    description="Test error against alpha for softmax and linear attention: replica fixed point (reconstructed spec "
                "4.2, frozen samples, Anderson-accelerated) against L-BFGS ERM at the sqrt(ND) size rule; "
                "Bayes-optimal curve (spec 4.3, spiked-SLR) and Bayes floor at alpha = inf.",
    config_cls=SampleComplexityConfig, run=run_sample_complexity, summarize=summarize_sample_complexity,
    plot=plot_sample_complexity, defaults={},
    quick={"alphas": (2.0, 8.0), "activations": ("softmax",), "n_replica": 300, "sqrt_ND": 150.0, "n_seeds": 3,
           "n_test": 1000, "n_risk": 5000},
))


# --------------------------------------------------------------------------------------------------------------------
# duranthon-low-snr: low nu, decreasing lambda; where and why replica theory and ERM part
# --------------------------------------------------------------------------------------------------------------------


class LowSNRConfig(_ReplicaVsERMConfig):
    """Config of ``duranthon-low-snr`` (spiked-SLR by default, nu = 1, L = 3: the paper's low-SNR setting)."""

    nu: float = pydantic.Field(1.0, gt=0, description="signal strength (inf allowed for max-SLR)")
    L: int = pydantic.Field(3, ge=1, description="sequence length")
    alphas: tuple[float, ...] = pydantic.Field((2.0,), min_length=1)
    lams: tuple[float, ...] = pydantic.Field((1.0, 0.3, 0.1, 0.03, 0.01), min_length=2,
                                             description="lambda_k = lambda_v path (continuation, decreasing)")
    activation: Literal["softmax", "linear"] = "softmax"
    jacobians: tuple[Literal["implicit", "stein"], ...] = ("implicit", "stein")
    n_replica: int = pydantic.Field(1024, ge=50, description="frozen samples per replica set")
    qmc: bool = pydantic.Field(True, description="frozen sets by scrambled Sobol (independent scrambles) or MC")
    n_seeds: int = pydantic.Field(3, ge=2, description="ERM data sets per alpha (informed and random start each)")
    n_risk: int = pydantic.Field(20_000, ge=1000, description="Monte Carlo samples of the test-error formula")
    max_iter: int = pydantic.Field(200, ge=10, description="map evaluations per replica point")

    _alphas = pydantic.field_validator("alphas")(classmethod(lambda cls, v: _positive_finite("alpha", v)))
    _lams = pydantic.field_validator("lams")(classmethod(lambda cls, v: _positive_finite("lambda", v)))


def run_low_snr(cfg: LowSNRConfig, key, progress=None) -> xr.Dataset:
    from attnlab.duranthon.sample_complexity import low_snr_diagnostics

    scale = cfg.informed_scale if math.isinf(cfg.nu) else None
    return low_snr_diagnostics(key, cfg.model, cfg.nu, cfg.L, cfg.alphas, cfg.lams, cfg.activation, cfg.jacobians,
                               cfg.n_replica, cfg.n_sets, cfg.sqrt_ND, cfg.n_seeds, cfg.n_test, cfg.n_risk,
                               informed_scale=scale, max_iter=cfg.max_iter, qmc=cfg.qmc, progress=progress)


def _mean_se(x, axis):
    x = np.asarray(x, dtype=float)
    n = np.sum(np.isfinite(x), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nanmean(x, axis=axis), np.nanstd(x, axis=axis, ddof=1) / np.sqrt(n)


def summarize_low_snr(ds: xr.Dataset, cfg: LowSNRConfig):
    """Metrics per (alpha, lambda, V_hat estimator, branch): replica test error (mean over frozen sets), ERM test
    error per start (mean over seeds), their gap, the non-convex fraction and the jump terms' z-scores. Checks: at the
    largest lambda (the control, where the proximal problem is convex) the replica matches ERM (5 SE) and the jump
    terms vanish (5 SE); wherever no sample is non-convex the jump terms vanish (5 SE)."""
    metrics = {"fixed_points_converged_fraction": float(ds.replica_converged.mean())}
    checks, gaps = [], []
    lam_max = float(ds.lam.max())
    for al in ds.alpha.values:
        for lam in ds.lam.values:
            p = ds.sel(alpha=al, lam=lam)
            tag = f"alpha{al:g}_lam{lam:g}"
            st, st_se = _mean_se(p.sim_test_error.values, -1)  # per start
            for k, start in enumerate(ds.start.values):
                metrics[f"sim_test_error_{start}_{tag}"] = float(st[k])
            so = np.nanmean(p.sim_objective.values, -1)
            metrics[f"sim_objective_informed_minus_random_{tag}"] = float(so[0] - so[1])
            for jac in ds.jacobian.values:
                for br in ds.branch.values:
                    q = p.sel(jacobian=jac, branch=br)
                    conv = bool(q.replica_converged.all())
                    te, te_se = _mean_se(q.replica_test_error.values, 0)
                    te_se = float(np.hypot(te_se, np.nanmean(q.replica_test_error_se.values)))
                    key = f"{jac}_{br}_{tag}"
                    metrics[f"replica_test_error_{key}"] = float(te)
                    metrics[f"replica_converged_{key}"] = float(conv)
                    metrics[f"replica_objective_{key}"] = float(q.replica_objective.mean())
                    metrics[f"nonconvex_fraction_{key}"] = float(q.replica_nonconvex_fraction.mean())
                    if "replica_at_eigenvalue" in q:
                        metrics[f"at_eigenvalue_max_{key}"] = float(np.nanmax(q.replica_at_eigenvalue.values)) \
                            if np.isfinite(q.replica_at_eigenvalue.values).any() else float("nan")
                    for sec in ("k", "v"):
                        j = q.replica_jump.sel(jump=f"jump_{sec}").values
                        js = q.replica_jump.sel(jump=f"jump_{sec}_se").values
                        z = float(np.nanmax(np.abs(j) / js)) if np.isfinite(j).any() else float("nan")
                        metrics[f"jump_{sec}_max_z_{key}"] = z
                    if conv and math.isfinite(float(te)):
                        gap = float(te) - float(st[0])
                        metrics[f"gap_vs_informed_erm_{key}"] = gap
                        gaps.append(abs(gap))
                        tol = 5 * math.hypot(te_se, float(st_se[0]))
                        if float(lam) == lam_max and br == "informed":
                            checks.append(Check(f"replica ({jac} V_hat) vs informed ERM test error, control "
                                                f"lambda={lam:g}, alpha={al:g}", float(te), float(st[0]), tol,
                                                f"5 SE ({ds.sizes['seed']} ERM seeds, {ds.sizes['set']} sets)"))
                    if jac == ds.jacobian.values[0] and conv:
                        for s in ds.set.values:
                            r = q.sel(set=s)
                            if float(r.replica_nonconvex_fraction) == 0.0:
                                for sec in ("k", "v"):
                                    j = float(r.replica_jump.sel(jump=f"jump_{sec}"))
                                    js = float(r.replica_jump.sel(jump=f"jump_{sec}_se"))
                                    if math.isfinite(j):
                                        checks.append(Check(f"V_hat_{sec}: Stein = pointwise where every proximal "
                                                            f"problem is convex ({br}, lambda={lam:g}, alpha={al:g}, "
                                                            f"set {int(s)})", 0.0, j, 5 * js + ROUND_OFF, "5 SE"))
    metrics["theory_vs_simulation_max_abs_gap"] = max(gaps) if gaps else float("nan")
    if "replica_at_eigenvalue" in ds:
        # where RS is locally unstable (replicon eigenvalue >= 1, :func:`attnlab.duranthon.replica.at_eigenvalue`) the RS
        # fixed point, converged or not, is not the right description; the unconverged points are counted here
        at, conv = ds.replica_at_eigenvalue.values, ds.replica_converged.values
        tried = np.isfinite(at) & ~conv
        metrics["unconverged_points"] = int(tried.sum())
        metrics["unconverged_points_at_unstable_fraction"] = float((at[tried] >= 1).mean()) if tried.any() \
            else float("nan")
        for lam in ds.lam.values:
            ok = ds.replica_converged.sel(lam=lam).values
            a = ds.replica_at_eigenvalue.sel(lam=lam).values[ok]
            metrics[f"at_eigenvalue_max_converged_lam{lam:g}"] = float(a.max()) if a.size else float("nan")
        ok = ds.replica_converged.sel(lam=lam_max).values
        a = ds.replica_at_eigenvalue.sel(lam=lam_max).values[ok]
        if a.size:
            checks.append(Check(f"RS stable at the control lambda={lam_max:g}: max(0, replicon eigenvalue - 1)", 0.0,
                                max(0.0, float(a.max()) - 1.0), 0.0, "exact (AT condition rho(T) < 1)"))
    return metrics, checks


def plot_low_snr(ds: xr.Dataset, cfg: LowSNRConfig):
    lams = ds.lam.values
    figs = {}
    for al in ds.alpha.values:
        p = ds.sel(alpha=al)
        fig, axes = plt.subplots(1, 5, figsize=(27, 4.6), layout="constrained")
        ax = axes[0]
        styles = {"informed": "-", "uninformed": ":"}
        for j, jac in enumerate(ds.jacobian.values):
            for br in ds.branch.values:
                q = p.sel(jacobian=jac, branch=br)
                te = q.replica_test_error.where(q.replica_converged).mean("set").values  # converged sets only
                ax.plot(lams, te, styles.get(br, "--"), color=f"C{j}", marker=".",
                        label=f"replica, {jac} V_hat, {br} start")
        for k, start in enumerate(ds.start.values):
            m, se = _mean_se(p.sim_test_error.sel(start=start).values, -1)
            ax.errorbar(lams * (1 + 0.04 * (k - 0.5)), m, yerr=se, fmt="os"[k], color="k" if k == 0 else "0.5",
                        capsize=3, label=f"L-BFGS ERM, {start} start (D={int(p.D)})")
        ax.set(xscale="log", xlabel="lambda_k = lambda_v", ylabel="test error E(y - f)^2",
               title=f"{ds.attrs['model']}-SLR nu={ds.attrs['nu']:g} L={ds.attrs['L']} alpha={al:g}: test error")
        ax.legend(fontsize=6)
        ax = axes[1]
        for o, mk in (("m_k", "o"), ("m_v", "s"), ("q_k", "^")):
            for j, jac in enumerate(ds.jacobian.values):
                q = p.sel(jacobian=jac, branch="informed")
                conv_o = q.replica_order.sel(order=o).where(q.replica_converged)  # converged sets only
                ax.plot(lams, conv_o.mean("set").values, "-", color=f"C{j}", marker=mk, ms=3,
                        label=f"replica {jac}: {o}")
            m, se = _mean_se(p.sim_overlaps.sel(start="informed", overlap=o).values, -1)
            ax.errorbar(lams, m, yerr=se, fmt=mk, color="k", mfc="none", capsize=2, label=f"ERM informed: {o}")
        ax.set(xscale="log", xlabel="lambda", ylabel="overlap",
               title="overlaps (informed branch / start; replica: converged sets)")
        ax.legend(fontsize=6, ncol=2)
        ax = axes[2]
        q = p.sel(jacobian=ds.jacobian.values[0], branch="informed")
        ax.plot(lams, q.replica_nonconvex_fraction.mean("set").values, "k-o", ms=3,
                label="fraction of non-convex proximal problems")
        ax.set(xscale="log", xlabel="lambda", ylabel="fraction of samples",
               title="non-convexity and the jump term of V_hat (informed)")
        ax.legend(fontsize=6, loc="upper left")
        ax2 = ax.twinx()
        for sec, c in (("k", "C3"), ("v", "C4")):
            z = np.abs(q.replica_jump.sel(jump=f"jump_{sec}").values) / q.replica_jump.sel(jump=f"jump_{sec}_se").values
            ax2.plot(lams, np.nanmax(z, axis=-1), "--", color=c, marker="x",
                     label=f"|Stein - pointwise V_hat_{sec}| / SE (max over sets)")
        ax2.axhline(5, color="0.6", lw=0.8)
        ax2.set(ylabel="z-score")
        ax2.legend(fontsize=6, loc="upper right")
        ax = axes[3]
        ax2 = ax.twinx()
        for j, jac in enumerate(ds.jacobian.values):
            for br in ds.branch.values:
                r = p.sel(jacobian=jac, branch=br)
                ax.plot(lams, r.replica_residual.max("set").values, styles.get(br, "--"), color=f"C{j}", marker="+",
                        label=f"{jac} V_hat, {br}: max residual")
                ax2.plot(lams, r.replica_iterations.max("set").values, styles.get(br, "--"), color=f"C{j}",
                         marker="o", ms=3, alpha=0.4)
        ax.axhline(1e-8, color="0.6", lw=0.8)
        ax.set(xscale="log", yscale="log", xlabel="lambda", ylabel="residual max|F(x) - x| (crosses)",
               title="convergence report (Anderson, tol 1e-8)")
        ax2.set(ylabel="map evaluations (faint circles)")
        ax.legend(fontsize=6)
        ax = axes[4]
        if "replica_at_eigenvalue" in p:
            for j, jac in enumerate(ds.jacobian.values):
                for br in ds.branch.values:
                    r = p.sel(jacobian=jac, branch=br)
                    ev = r.replica_at_eigenvalue.where(r.replica_converged)  # converged sets only
                    ax.plot(lams, ev.max("set").values, styles.get(br, "--"), color=f"C{j}", marker="d", ms=3,
                            label=f"{jac} V_hat, {br}")
        ax.axhline(1.0, color="k", lw=0.8, ls="--", label="RS unstable above")
        ax.set(xscale="log", yscale="log", xlabel="lambda", ylabel="replicon eigenvalue rho(T), max over sets",
               title="de Almeida-Thouless stability of the RS fixed point")
        ax.legend(fontsize=6)
        figs[f"low_snr_alpha{al:g}"] = fig
    return figs


def _quiet(fn):
    """Run ``fn`` without numpy's all-NaN RuntimeWarnings (points on a stopped continuation path are NaN)."""
    import functools
    import warnings

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return fn(*args, **kwargs)

    return wrapped


register(Preset(
    name="duranthon-low-snr", paper=PAPER, citation=CITATION, figure="Sec. 5 discussion [3P] (low nu, low lambda)",
    description="Low-SNR regime (spiked nu = 1, L = 3) along a decreasing lambda path: replica fixed points "
                "(Anderson, continuation, informed and uninformed branches, pointwise and Stein V_hat) against "
                "L-BFGS ERM from informed and random starts, with per-point solver diagnostics.",
    config_cls=LowSNRConfig, run=run_low_snr, summarize=_quiet(summarize_low_snr), plot=_quiet(plot_low_snr),
    defaults={},
    quick={"lams": (1.0, 0.1), "n_replica": 256, "sqrt_ND": 200.0, "n_seeds": 2, "n_test": 1000, "n_risk": 5000,
           "max_iter": 100},
))
