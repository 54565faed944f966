"""The figure of the Marion presets: excess risk, |kappa| and |nu|, (kappa, nu) trajectories, distance to M."""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnlab.plot import band, plt

__all__ = ["CITATION", "plot"]

CITATION = "Marion, Berthier, Biau, Boyer, ICLR 2025"


def plot(ds: xr.Dataset, cfg):
    """The paper's 1x4 panel: excess risk, |kappa| and |nu|, (kappa, nu) trajectories, distance to M."""
    steps = ds.step.values
    fig, axes = plt.subplots(1, 4, figsize=(19, 4.2), layout="constrained")
    ax = axes[0]
    band(ax, steps, ds.excess_risk.values, label="closed form (median, 95% band)")
    if "test_excess_risk" in ds:
        band(ax, steps, ds.test_excess_risk.values, label="held-out estimate")
    ax.plot(steps, ds.oracle_excess_risk.values, "k--", lw=1, label="oracle at lambda_t")
    ax.set(xlabel="step", ylabel="excess risk  E(T-y)^2 - eps^2", title="excess risk")
    ax.legend(fontsize=7)
    ax = axes[1]
    if cfg.plot_individual_runs:  # bimodal outcomes (oracle or spurious point): a median band would hide them
        ax.plot(steps, np.abs(ds.kappa.values), color="C0", lw=0.6, alpha=0.6)
        ax.plot(steps, np.abs(ds.nu.values), color="C1", lw=0.6, alpha=0.6)
        ax.plot([], [], color="C0", label="|kappa| (each run)")
        ax.plot([], [], color="C1", label="|nu| (each run)")
    else:
        band(ax, steps, np.abs(ds.kappa.values), label="|kappa|")
        band(ax, steps, np.abs(ds.nu.values), label="|nu|")
    ax.set(xlabel="step", ylim=(-0.02, 1.02), title="overlaps with the oracle")
    ax.legend(fontsize=7)
    ax = axes[2]
    for r in [r for r in cfg.highlight if r < cfg.n_repeats]:
        sc = ax.scatter(ds.kappa.values[:, r], ds.nu.values[:, r], c=steps, s=6, cmap="viridis")
    if cfg.highlight:
        fig.colorbar(sc, ax=ax, label="step")
    ax.set(xlabel="kappa", ylabel="nu", xlim=(-1.05, 1.05), ylim=(-1.05, 1.05), title="(kappa, nu) trajectories")
    ax = axes[3]
    band(ax, steps, np.maximum(ds.distance_to_manifold.values, 1e-17), label="median, 95% band")
    ax.set(xlabel="step", yscale="log", title="distance to M")
    fig.suptitle(f"{CITATION}: d={cfg.d}, L={cfg.L}, lambda0={cfg.lambda0}, schedule={cfg.lambda_schedule}, "
                 f"{cfg.algorithm.upper()}, init={cfg.init}", fontsize=9)
    return {"panels": fig}
