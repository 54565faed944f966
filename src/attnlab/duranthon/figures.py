"""Figures of the Duranthon et al. presets: risk against nu and L, the activation table, test error and overlaps
against alpha, and the low-SNR diagnostics along lambda."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr
from matplotlib.colors import to_rgba

from attnlab.duranthon.activations import activation
from attnlab.duranthon.summaries import _mean_se
from attnlab.plot import plt

if TYPE_CHECKING:
    from attnlab.duranthon.presets import ActivationsConfig, LowSNRConfig, PopulationConfig, SampleComplexityConfig


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
                ax.errorbar(Ls, q.risk.values, yerr=q.risk_se.values, fmt="o-", ms=4, lw=0.6,
                            color=to_rgba(f"C{a}", 0.3 + 0.7 * (m + 1) / len(nus)),  # opacity grows with nu
                            label=_act_label(name) if m == len(nus) - 1 else None)
            ax.plot(Ls, p.bayes_risk.values, "k--", lw=0.8, label="Bayes" if m == len(nus) - 1 else None)
        ax.set(xlabel="sequence length L", ylabel="noiseless excess risk",
               title=f"{model}-SLR (darker = larger nu in {list(np.round(nus, 2))})")
        ax.legend(fontsize=7)
    figs["risk_vs_L"] = fig2
    return figs


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


def plot_sample_complexity(ds: xr.Dataset, cfg: SampleComplexityConfig):
    alphas = ds.alpha.values
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4), layout="constrained")
    ax = axes[0]
    for a, name in enumerate(ds.activation.values):
        p = ds.sel(activation=name)
        ax.plot(alphas, p.replica_test_error.values, "-", color=f"C{a}", label=f"{name}: replica (RS)")
        sim = p.sim_test_error.values
        ax.errorbar(alphas, sim.mean(1), yerr=sim.std(1, ddof=1) / np.sqrt(sim.shape[1]), fmt="o", color=f"C{a}",
                    capsize=3, label=f"{name}: L-BFGS ERM (mean +- SE)")
    if "bo_test_error" in ds and bool(np.isfinite(ds.bo_test_error.values).any()):
        ax.plot(alphas, ds.bo_test_error.values, "k-", lw=1.5, label="Bayes-optimal")
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
                ax2.plot(lams, r.replica_iterations.max("set").values, styles.get(br, "--"),
                         color=to_rgba(f"C{j}", 0.4), marker="o", ms=3)
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
