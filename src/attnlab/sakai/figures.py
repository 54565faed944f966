"""Figures of the Sakai et al. presets: densities of Y[0, 0] at each width against the limit, the KL, KS and W1
distances against the width (Figs. 1-3, 5 of the paper), and the score probe (Fig. 2a)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from attnlab.plot import plt

if TYPE_CHECKING:
    from attnlab.sakai.presets import SakaiConfig

__all__ = ["plot"]


def plot(ds: xr.Dataset, cfg: SakaiConfig):
    if cfg.experiment == "scores":
        fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
        x = np.linspace(-4, 4, 400)
        axes[0].hist(ds.g_sqrt.values, bins=200, density=True, alpha=0.6, label="exact sampler")
        axes[0].plot(x, np.exp(-x**2 / 2) / math.sqrt(2 * math.pi), "k", label="limit N(0, 1)")
        axes[0].set(title=f"(QK^T)_00 / sqrt(n), n = {ds.attrs['width']}", xlabel="score")
        axes[1].hist(ds.g_lin.values, bins=200, density=True, alpha=0.6, label="exact sampler")
        axes[1].axvline(0, color="k", label="limit: 0")
        axes[1].set(title="(QK^T)_00 / n (collapses to 0)", xlabel="score")
        for ax in axes:
            ax.legend(fontsize=7)
        fig.suptitle(f"{ds.attrs['paper']}: Fig. 2(a)", fontsize=9)
        return {"scores": fig}
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5), layout="constrained")
    x = ds.x.values
    heads = [int(h) for h in ds.heads.values]
    colors = plt.cm.coolwarm(np.linspace(0, 1, ds.sizes["config"]))
    ax = axes[0]
    for c in range(ds.sizes["config"]):
        F = ds.isel(config=c)
        ax.plot(x, F.density_finite.values, ":", color=colors[c],
                label=f"n={int(F.width)}, H={int(F.config_heads)}" + (f", n_H={int(F.head_width)}"
                                                                      if int(F.head_width) != int(F.width) else ""))
    for h, H in enumerate(heads):
        ax.plot(x, ds.density_limit.values[h], "-", color="k" if len(heads) == 1 else f"C{h}", lw=1.2,
                label=f"infinite width, H={H}")
    if cfg.experiment == "vary_heads":
        v = float(ds.theory_second_moment[0])
        ax.plot(x, np.exp(-x**2 / (2 * v)) / math.sqrt(2 * math.pi * v), "k--", lw=1, label="infinite heads N(0, E v)")
    ax.set(xlabel="Y[0,0]", ylabel="density (KDE, seed 0)", title="densities")
    ax.legend(fontsize=7)
    ax = axes[1]
    xs = np.log(ds.width.values) / np.log(4) if cfg.experiment != "low_rank" else np.log(ds.config_heads.values) / np.log(4)
    kl = ds.kde_kl.values
    ax.errorbar(xs, np.log(kl.mean(1)), yerr=kl.std(1) / kl.mean(1), fmt="o-", label="ln mean KDE-KL (paper's bar)")
    ax.errorbar(xs, np.log(kl.mean(1)), yerr=kl.std(1, ddof=1) / kl.mean(1) / math.sqrt(max(1, kl.shape[1] - 1)) if
                kl.shape[1] > 1 else None, fmt="none", ecolor="k", capsize=3, label="SE of the mean")
    ax.plot(xs, np.log(ds.rb_kl.values), "s--", label="Rao-Blackwellised KL (seed 0)")
    for h, H in enumerate(heads):
        ax.axhline(np.log(ds.kde_kl_null.values[h].mean()), color=f"C{h}", ls=":", lw=1, label=f"KDE-KL null floor H={H}")
        ax.axhline(np.log(max(ds.rb_kl_null.values[h], 1e-12)), color=f"C{h}", ls="-.", lw=1,
                   label=f"RB-KL null floor H={H}")
    ax.set(xlabel="log4 n" if cfg.experiment != "low_rank" else "log4 H (n = 64 H)", ylabel="ln KL", title="KL")
    ax.legend(fontsize=6)
    ax = axes[2]
    for name, m in (("ks", "o"), ("w1", "s")):
        lo, hi = ds[f"{name}_boot_ci"].values
        mid = ds[name].values[:, 0]
        ax.errorbar(xs, mid, yerr=[np.maximum(mid - lo, 0), np.maximum(hi - mid, 0)], fmt=m + "-",
                    label=f"{name.upper()} seed 0, 95% bootstrap")
        ax.plot(xs, ds[f"{name}_pooled"].values, m + ":", label=f"{name.upper()} pooled over seeds")
        for h in range(len(heads)):
            ax.axhline(ds[f"{name}_null"].values[h].mean(), ls="--", lw=0.8, color="C2" if name == "ks" else "C3",
                       label=f"{name.upper()} null floor (per seed)" if h == 0 else None)
    ax.set(yscale="log", xlabel=axes[1].get_xlabel(), title="KS and W1 to the limit")
    ax.legend(fontsize=6)
    fig.suptitle(f"{ds.attrs['paper']}: {cfg.experiment}, psi = {cfg.input_activation}", fontsize=9)
    return {"panels": fig}
