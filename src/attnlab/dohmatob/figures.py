"""The figures of the Dohmatob presets (Figure 2 panels, the flow on M, the phase diagram)."""

from __future__ import annotations

import numpy as np

from attnlab.plot import band, plt

__all__ = ["CITATION", "plot_rgd", "plot_flow", "plot_phase"]

CITATION = "Dohmatob, NeurIPS 2025"


def plot_rgd(ds, cfg):
    links = list(ds.link.values)
    fig, axes = plt.subplots(2, len(links), figsize=(5.2 * len(links), 8), layout="constrained", squeeze=False)
    steps = ds.step.values
    for j, link in enumerate(links):
        ax = axes[0, j]
        for i, start in enumerate(ds.start.values):
            x = ds.sel(link=link, start=start)
            col = f"C{i}"
            band(ax, steps, np.maximum(x.test_excess_risk.values, 1e-4), label=f"test, {start} start", color=col)
            ax.plot(steps, np.median(x.train_excess_risk.values, axis=1), ":", color=col, lw=1, label="train")
            ax.plot(steps, np.median(x.mean_field_risk.values, axis=1), "--", color=col, lw=1.2,
                    label="R_bar at iterate")
            ax.plot(steps, np.median(x.flow_mean_field_risk.values, axis=1), "-.", color="k" if i else "grey",
                    lw=1, label="R_bar along flow")
        ax.set(yscale="log", xlabel="step", ylabel="excess risk E(f-y)^2 - eps^2", title=f"{link} link")
        ax.legend(fontsize=6)
        ax = axes[1, j]
        for i, start in enumerate(ds.start.values):
            x = ds.sel(link=link, start=start)
            band(ax, steps, x.mu.values, label=f"mu, {start}", color=f"C{2 * i}")
            band(ax, steps, x.nu.values, label=f"nu, {start}", color=f"C{2 * i + 1}")
            ax.plot(steps, np.median(x.flow_mu.values, axis=1), "--", color=f"C{2 * i}", lw=1)
            ax.plot(steps, np.median(x.flow_nu.values, axis=1), "--", color=f"C{2 * i + 1}", lw=1)
        ax.axhline(ds.attrs["transition_mu"], color="k", lw=0.6, ls=":", label="psi / c")
        ax.set(xlabel="step", ylim=(-1.05, 1.05), title="overlaps (dashed: mean-field flow from the same start)")
        ax.legend(fontsize=6)
    fig.suptitle(f"{CITATION}, Fig. 2: RGD on the empirical risk, d={cfg.d}, L={cfg.L}, beta={cfg.beta}, "
                 f"gamma={cfg.gamma:.4f}, n={cfg.n_train}, s={cfg.step_size}", fontsize=9)
    return {"panels": fig}


_KIND_STYLE = {"sink": ("o", "C2"), "source": ("s", "C3"), "saddle": ("X", "C1"), "degenerate": ("D", "C7")}


def plot_flow(ds, cfg):
    links = list(ds.link.values)
    fig, axes = plt.subplots(1, len(links), figsize=(5.2 * len(links), 4.8), layout="constrained", squeeze=False)
    for j, link in enumerate(links):
        ax = axes[0, j]
        x = ds.sel(link=link)
        for s in range(x.sizes["start"]):
            ax.plot(x.mu.values[s], x.nu.values[s], color="C0", lw=0.7, alpha=0.7)
            ax.plot(x.mu.values[s, -1], x.nu.values[s, -1], ".", color="C0", ms=3)
        ax.axvline(ds.attrs["transition_mu"], color="k", lw=0.6, ls=":")
        sel = ds.sp_link.values == link
        for mu, nu, kind in zip(ds.sp_mu.values[sel], ds.sp_nu.values[sel], ds.sp_kind.values[sel]):
            mk, col = _KIND_STYLE[kind]
            ax.plot(mu, nu, mk, color=col, ms=9, mec="k", label=kind)
        h, lab = ax.get_legend_handles_labels()
        uniq = dict(zip(lab, h))
        ax.legend(uniq.values(), uniq.keys(), fontsize=7, loc="lower left")
        ax.set(xlabel="mu", ylabel="nu", xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), title=f"{link} link: flow on M")
    fig.suptitle(f"{CITATION}: 2-D mean-field flow on M (d={cfg.d}, L={cfg.L}, beta={cfg.beta}, "
                 f"gamma={cfg.gamma:.4f}); dotted: mu = psi / c", fontsize=9)
    return {"phase_portrait": fig}


def plot_phase(ds, cfg):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    ax = axes[0]
    im = ax.pcolormesh(ds.alpha.values, ds.gamma.values, ds.mf_oracle_risk.values / ds.sigma_bar_1.values[:, None],
                       shading="auto", cmap="viridis", vmin=0, vmax=1)
    fig.colorbar(im, ax=ax, label="mean-field oracle risk / sigma_bar(1)")
    ax.plot(ds.alpha.values, ds.gamma_boundary.values, "w-", lw=2, label="sqrt(1 - gamma^2) = psi(alpha, beta)")
    learn = ds.mc_oracle_risk.values < 0.5 * ds.sigma_bar_1_mc.values[:, None]
    for i, g in enumerate(ds.gamma_mc.values):
        for j, a in enumerate(ds.alpha_mc.values):
            ax.plot(a, g, "o" if learn[i, j] else "x", color="w" if learn[i, j] else "r", ms=8, mec="k")
    ax.set(xlabel="alpha = log(L - 1) / d", ylabel="gamma", title=f"learnability (beta = {cfg.beta}); "
           f"MC points at d = {cfg.d_mc}: o learnt, x not", xlim=(0, cfg.alpha_max))
    ax.legend(fontsize=7, loc="lower left")
    ax = axes[1]
    for i, g in enumerate(ds.gamma_mc.values):
        ax.errorbar(ds.margin_mc.values[i], ds.mc_oracle_risk.values[i] / ds.sigma_bar_1_mc.values[i],
                    yerr=5 * ds.mc_oracle_risk_se.values[i] / ds.sigma_bar_1_mc.values[i], fmt="o", label=f"MC, gamma={g}")
        ax.plot(ds.margin_mc.values[i], ds.mf_oracle_risk_mc_points.values[i] / ds.sigma_bar_1_mc.values[i], "k_", ms=12)
    ax.axvline(0, color="k", lw=0.6, ls=":")
    ax.set(xlabel="c - psi", ylabel="oracle risk / sigma_bar(1)",
           title="oracle risk: Monte Carlo (dots) vs mean field (bars)")
    ax.legend(fontsize=7)
    fig.suptitle(f"{CITATION}: phase diagram, {cfg.link} link", fontsize=9)
    return {"phase_diagram": fig}
