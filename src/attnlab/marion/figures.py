"""The figure of the Marion presets, the 1x4 layout of the official code's ``plot.py``: excess risk, |kappa| and
|nu| against the step, (kappa, nu) trajectories of chosen runs coloured by step, distance to the manifold M."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.ticker import MaxNLocator

from attnlab.plot import LABELS, SIMULATION, THEORY, band, colorbar, panels, paper_figure

__all__ = ["plot"]


_ORACLES = ((1.0, 1.0), (-1.0, -1.0))  # (kappa, nu) of (k*, v*) and (-k*, -v*): the same predictor (erf is odd)


def _title(cfg) -> str:
    algo = (f"online SGD (batch {cfg.batch_size}, $\\varepsilon={cfg.eps:g}$)" if cfg.algorithm == "sgd"
            else "PGD on the population risk")
    start = "from $\\mathcal{M}$" if cfg.init == "manifold" else "from the sphere"
    lam = (f"$\\lambda_t=\\lambda_0/(1+{cfg.schedule_rate:g}\\,t)$, $\\lambda_0={cfg.lambda0:g}$"
           if cfg.lambda_schedule else f"$\\lambda={cfg.lambda0:g}$")
    return f"{algo} {start}: $d={cfg.d}$, $L={cfg.L}$, {lam}, step size ${cfg.step_size:g}$"


def _limits(lo, hi, pad=0.08, min_span=0.25, bound=1.06):
    """Axis limits around the data ``[lo, hi]`` (padded, at least ``min_span`` wide), inside ``[-bound, bound]``."""
    span = max(hi - lo, min_span)
    mid = 0.5 * (lo + hi)
    lo, hi = mid - span / 2 - pad * span, mid + span / 2 + pad * span
    return max(lo, -bound), min(hi, bound)


@paper_figure
def plot(ds: xr.Dataset, cfg):
    """The paper's 1x4 panel (Figs. 4a, 4b, 5, 7): excess risk against the step with the oracle's risk at lambda_t
    (theory, dashed) over the closed form along the iterates (mean, 95% band; SGD: the held-out estimate too);
    |kappa| and |nu| (band, or each run where outcomes split); the (kappa, nu) trajectories of the highlighted
    runs coloured by step, with the oracle points; the distance to M on a log scale."""
    steps = ds.step.values
    individual = cfg.plot_individual_runs  # bimodal outcomes (oracle or spurious point): a mean band would hide them
    fig, axes = panels(4, width=3.1, height=2.7)

    ax = axes[0]
    band(ax, steps, ds.excess_risk.values, label="closed form (mean, 95%)", center="mean")
    if "test_excess_risk" in ds:
        test = ds.test_excess_risk.values
        every = max(1, len(steps) // 20)
        ax.errorbar(steps[::every], test.mean(1)[::every], yerr=test.std(1, ddof=1)[::every] if test.shape[1] > 1
                    else None, color="C1", capsize=1.5, label=r"held-out (mean $\pm$ sd)", **SIMULATION)
    ax.plot(steps, ds.oracle_excess_risk.values, label=r"oracle at $\lambda_t$", **THEORY)
    if not cfg.lambda_schedule:
        ax.axhline(float(ds.spurious_excess_risk), color="0.45", ls=":", lw=1.1, label=r"spurious $k=\pm v^*$")
    mc, se = float(ds.mc_excess_risk), float(ds.mc_excess_risk_se)
    ax.errorbar([steps[-1]], [mc], yerr=[2 * se], color="C3", capsize=2, label="Monte Carlo (run 0)",
                **{**SIMULATION, "marker": "D"})
    ax.set(xlabel=LABELS["step"], ylabel=LABELS["excess_risk"], title="excess risk")
    ax.legend(loc="upper right")

    ax = axes[1]
    for name, color in (("kappa", "C0"), ("nu", "C1")):
        values = np.abs(ds[name].values)
        if individual:
            ax.plot(steps, values, color=color, lw=0.5, alpha=0.5)
            ax.plot([], [], color=color, label=LABELS["abs_" + name])
        else:
            band(ax, steps, values, label=LABELS["abs_" + name], color=color, center="mean")
    ax.axhline(1.0, label="oracle", **THEORY)
    ax.set(xlabel=LABELS["step"], ylabel=r"$|\kappa|$, $|\nu|$", ylim=(-0.03, 1.25),
           title="alignment " + ("(each run)" if individual else "(mean, 95% band)"))
    ax.legend(loc="upper center", ncol=3, columnspacing=1.0, handlelength=1.5)
    ax.set_yticks(np.linspace(0, 1, 6))

    ax = axes[2]
    runs = [r for r in cfg.highlight if r < ds.sizes["repeat"]]
    kap, nu = ds.kappa.values[:, runs], ds.nu.values[:, runs]
    sc = None
    for i, r in enumerate(runs):
        ax.plot(kap[:, i], nu[:, i], color="0.6", lw=0.6, zorder=1)
        sc = ax.scatter(kap[:, i], nu[:, i], c=steps, s=9, cmap="viridis", zorder=2, vmin=steps[0], vmax=steps[-1],
                        marker="os^vD"[i % 5], edgecolors="none")
        ax.plot([], [], linestyle="none", marker="os^vD"[i % 5], color="0.35", markersize=3.5, label=f"run {r}")
    if sc is not None:
        colorbar(fig, sc, ax, LABELS["step"])
    xlim = _limits(*(np.nanmin(kap), np.nanmax(kap)) if runs else (-1.0, 1.0))
    ylim = _limits(*(np.nanmin(nu), np.nanmax(nu)) if runs else (-1.0, 1.0))
    shown = [(a, b) for a, b in _ORACLES if xlim[0] <= a <= xlim[1] and ylim[0] <= b <= ylim[1]]
    if shown:
        ax.plot(*zip(*shown), linestyle="none", marker="*", color="black", markersize=9, zorder=3, label="oracle")
    if runs:
        ax.legend(loc="best", handletextpad=0.2, borderaxespad=0.2)
    for edge in (-1.0, 1.0):  # the feasible square |kappa|, |nu| <= 1 (unit vectors), where it is in view
        ax.axvline(edge, color="0.3", lw=0.6)
        ax.axhline(edge, color="0.3", lw=0.6)
    ax.set(xlabel=LABELS["kappa"], ylabel=LABELS["nu"], xlim=xlim, ylim=ylim,
           title=r"trajectories in $(\kappa, \nu)$")

    ax = axes[3]
    dist = ds.distance_to_manifold.values
    positive = dist[dist > 0]
    floor = max(float(positive.min()) / 3, 1e-30) if positive.size else 1e-17
    dist = np.maximum(dist, floor)
    if individual:
        ax.plot(steps, dist, color="C2", lw=0.5, alpha=0.5)
        ax.plot([], [], color="C2", label="each run")
    else:
        band(ax, steps, dist, label="median, 95% band", color="C2")
    ax.set(xlabel=LABELS["step"], ylabel=LABELS["distance_to_manifold"], yscale="log", ylim=(floor, 2.0),
           title=r"distance to $\mathcal{M}$")
    ax.legend(loc="lower right")
    for ax in axes[[0, 1, 3]]:
        ax.xaxis.set_major_locator(MaxNLocator(4))
    fig.suptitle(_title(cfg))
    return {"panels": fig}
