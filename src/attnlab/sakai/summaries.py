"""Metrics, checks (each with its negative control) and the one-line finding of the Sakai et al. presets; they read
only the dataset a run wrote."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from attnlab.registry import Check

if TYPE_CHECKING:
    from attnlab.sakai.configs import SakaiConfig

__all__ = ["summarize", "finding"]

SPEC_SECOND_MOMENT = {"clip": 0.3918, "relu": 0.2548}  # the paper's Monte Carlo constants (4e6 draws, +-0.0001)
SPEC_KURTOSIS = {("clip", 1): 0.243, ("clip", 2): 0.121, ("clip", 256): 0.001, ("relu", 1): 0.0036,
                 ("relu", 2): 0.0018}
BIAS_PER_WIDTH = 1.0  # |E y^2(n) - E y^2(inf)| <= 1/n for n >= 16 (tests/sakai/test_limit.py checks n * bias < 1)


def _summarize_scores(ds, cfg):
    n = int(ds.width)
    g, gl = ds.score.sel(scaling=0.5).values, ds.score.sel(scaling=1.0).values
    N = g.size
    var, var_se = np.mean(g**2), np.std(g**2, ddof=1) / math.sqrt(N)
    sd_lin = float(np.std(gl))
    sd_lin_se = float(np.std(gl**2, ddof=1) / math.sqrt(N) / (2 * sd_lin))
    exact_var = (1 + 2 / n) ** 2 if cfg.input_activation == "clip" else float("nan")
    metrics = {"score_variance": float(var), "score_sd": float(np.sqrt(var)), "score_sd_lin": sd_lin,
               "score_variance_theory": exact_var, "score_sd_lin_leading_order": 1 / math.sqrt(n),
               "reference_ks": float(ds.reference_ks)}
    checks = [Check("brute-force vs exact score sampler (two-sample KS, level 0.001)", 0.0, float(ds.reference_ks),
                    float(ds.reference_crit), basis=f"KS critical value, n = {ds.attrs['reference_width']}",
                    control="the exact sampler's score at 1/n scaling", control_simulation=float(ds.reference_ks_control))]
    if cfg.input_activation == "clip":
        checks += [Check("Var G_00 = (1 + 2/n)^2 (1/sqrt(n) scaling)", exact_var, float(var), 5 * float(var_se),
                         basis=f"5 SE, {N} samples", control="the score at 1/n scaling",
                         control_simulation=float(np.mean(gl**2))),
                   Check("sd of G_00/sqrt(n) = (1 + 2/n)/sqrt(n) (1/n scaling)", (1 + 2 / n) / math.sqrt(n), sd_lin,
                         5 * sd_lin_se, basis=f"5 SE (delta method), {N} samples",
                         control="the score at 1/sqrt(n) scaling", control_simulation=float(np.std(g)))]
    return metrics, checks


def _configs(ds: xr.Dataset):
    """The finite-width configurations of a dataset, as ``(n, n_H, H, selection)``: every (H, n) pair of the
    ``heads`` and ``width`` dimensions at full rank, or each H at low rank, where the width n = H n_H is a coordinate
    along ``heads``; n_H is the scalar coordinate ``head_width`` where the config sets one, else n."""
    heads = [int(h) for h in ds.heads.values]
    d = (lambda n: int(ds.head_width)) if "head_width" in ds.coords else (lambda n: n)
    if "width" in ds.dims:
        return [(int(n), d(int(n)), H, {"heads": H, "width": int(n)}) for H in heads for n in ds.width.values]
    return [(int(ds.width.sel(heads=H)), d(None), H, {"heads": H}) for H in heads]


def summarize(ds: xr.Dataset, cfg: SakaiConfig):
    if cfg.experiment == "scores":
        return _summarize_scores(ds, cfg)
    act = cfg.input_activation
    metrics, checks = {}, []
    heads = [int(h) for h in ds.heads.values]
    for h, H in enumerate(heads):
        L = ds.isel(heads=h)
        metrics[f"limit_second_moment_H{H}"] = float(L.limit_second_moment_rb)
        metrics[f"excess_kurtosis_limit_H{H}"] = float(L.limit_excess_kurtosis_rb)
        metrics[f"excess_kurtosis_theory_H{H}"] = float(L.theory_excess_kurtosis)
        metrics[f"kde_kl_null_mean_H{H}"] = float(L.kde_kl_null.mean())
        metrics[f"ks_null_seed_mean_H{H}"] = float(L.ks_null.mean())
        metrics[f"w1_null_seed_mean_H{H}"] = float(L.w1_null.mean())
        metrics[f"kde_kl_limit_vs_gaussian_H{H}"] = float(L.kde_kl_gauss.mean())
        metrics[f"rb_kl_limit_vs_gaussian_H{H}"] = float(L.rb_kl_gauss)
        metrics[f"rb_kl_null_H{H}"] = float(L.rb_kl_null)
        metrics[f"ks_pooled_null_H{H}"] = float(L.ks_pooled_null)
        metrics[f"w1_pooled_null_H{H}"] = float(L.w1_pooled_null)
        if (act, H) in SPEC_KURTOSIS:
            metrics[f"excess_kurtosis_spec_H{H}"] = SPEC_KURTOSIS[(act, H)]
        checks.append(Check(f"limit E y^2 (H={H}): Monte Carlo vs quadrature", float(L.theory_second_moment),
                            float(L.limit_second_moment_rb), 5 * float(L.limit_second_moment_rb_se),
                            basis="5 SE of the Rao-Blackwellised mean of v",
                            control=f"the limit constant of {'relu' if act == 'clip' else 'clip'} inputs",
                            control_theory=float(L.control_second_moment)))
        checks.append(Check(f"limit excess kurtosis (H={H}): Monte Carlo vs quadrature",
                            float(L.theory_excess_kurtosis), float(L.limit_excess_kurtosis_rb),
                            5 * float(L.limit_excess_kurtosis_rb_se), basis="5 SE (delta method on E v, E v^2)",
                            control=f"the limit law with H = {1 if H > 1 else 4}",
                            control_theory=float(L.control_excess_kurtosis)))
        checks.append(Check(f"brute-force vs exact sampler, n = {ds.attrs['reference_width']}, H = {H} "
                            "(two-sample KS, level 0.001)", 0.0, float(L.reference_ks), float(L.reference_crit),
                            basis=f"asymptotic KS critical value, {ds.attrs['n_reference']} brute-force networks",
                            control="the exact sampler at 1/n scaling (y / sqrt(n))",
                            control_simulation=float(L.reference_ks_control)))
    for n, d, H, sel in _configs(ds):
        F = ds.sel(sel)
        tag = f"n{n}_H{H}" + (f"_nH{d}" if d != n else "")
        metrics[f"kde_kl_mean_{tag}"] = float(F.kde_kl.mean())
        metrics[f"ln_kde_kl_mean_{tag}"] = float(np.log(F.kde_kl.mean()))
        S = F.kde_kl.size
        metrics[f"kde_kl_se_{tag}"] = float(F.kde_kl.std(ddof=1) / math.sqrt(S)) if S > 1 else None
        metrics[f"ks_seed_mean_{tag}"] = float(F.ks.mean())
        metrics[f"w1_seed_mean_{tag}"] = float(F.w1.mean())
        metrics[f"ks_pooled_{tag}"] = float(F.ks_pooled)
        metrics[f"w1_pooled_{tag}"] = float(F.w1_pooled)
        metrics[f"ks_seed0_ci_lo_{tag}"], metrics[f"ks_seed0_ci_hi_{tag}"] = map(float, F.ks_boot_ci.values)
        metrics[f"w1_seed0_ci_lo_{tag}"], metrics[f"w1_seed0_ci_hi_{tag}"] = map(float, F.w1_boot_ci.values)
        metrics[f"rb_kl_{tag}"] = float(F.rb_kl)
        metrics[f"second_moment_{tag}"] = float(F.finite_second_moment)
        metrics[f"excess_kurtosis_{tag}"] = float(F.finite_excess_kurtosis)
    # the largest width of the preset (first H when several): E y^2 against the limit, with the O(1/n) bias bound
    n, _, H, sel = max(_configs(ds), key=lambda c: (c[0], -c[2]))
    F = ds.sel(sel)
    h = heads.index(H)
    metrics["second_moment"] = float(F.finite_second_moment)
    metrics["second_moment_spec"] = SPEC_SECOND_MOMENT[act] if cfg.n_tokens == 4 else None
    metrics["second_moment_limit_quadrature"] = float(ds.theory_second_moment[h])
    if act == "clip" and cfg.head_width is None and cfg.experiment != "low_rank":
        checks.append(Check(f"finite-width E y^2 at n = {n} vs the limit constant", float(ds.theory_second_moment[h]),
                            float(F.finite_second_moment),
                            5 * float(F.finite_second_moment_se) + BIAS_PER_WIDTH / n,
                            basis="5 SE + O(1/n) bias bound 1/n (quadrature 0.39197)",
                            control="the limit constant of relu inputs",
                            control_theory=float(ds.control_second_moment[h])))
    for _, _, H, sel in _configs(ds):  # per H, the last (largest) width
        metrics[f"excess_kurtosis_H{H}"] = float(ds.finite_excess_kurtosis.sel(sel))
    return metrics, checks


def finding(metrics: dict, cfg: SakaiConfig) -> str:
    """The run's result in one line: the distance to the limit law along the width (or the heads), or the scores'
    two scalings."""
    if cfg.experiment == "scores":
        return (f"G_00/sqrt(n) keeps variance {metrics['score_variance']:.3f} (theory "
                f"{metrics['score_variance_theory']:.3f}) while G_00/n collapses to sd {metrics['score_sd_lin']:.4f}")
    tags = [f"n{n}_H{H}" + (f"_nH{d}" if d != n else "") for n, d, H in cfg.configs()]
    ks = [metrics[f"ks_pooled_{tag}"] for tag in tags]
    heads = sorted({H for _, _, H in cfg.configs()})
    null = metrics[f"ks_pooled_null_H{heads[0]}"]
    if cfg.experiment == "vary_heads":
        kurt = [metrics[f"excess_kurtosis_limit_H{H}"] for H in heads]
        return (f"limit excess kurtosis {kurt[0]:.3f} at H = {heads[0]} down to {kurt[-1]:.4f} at H = {heads[-1]}; "
                f"pooled KS to the limit {ks[0]:.4f} to {ks[-1]:.4f} (null floor {null:.4f})")
    what = "H" if cfg.experiment == "low_rank" else "n"
    first, last = cfg.configs()[0], cfg.configs()[-1]
    v0, v1 = (first[2], last[2]) if what == "H" else (first[0], last[0])
    return (f"pooled KS of the finite-width law to the limit falls from {ks[0]:.4f} at {what} = {v0} to {ks[-1]:.4f} "
            f"at {what} = {v1} (null floor {null:.4f}); limit E y^2 {metrics['second_moment_limit_quadrature']:.5f}")
