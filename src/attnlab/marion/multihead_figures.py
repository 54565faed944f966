"""The figure of ``marion-toy-multihead`` (Marion et al., ICLR 2025, App. E.3, the two-head toy model): the notebook's
three panels (excess risk on a log axis, matched ``|kappa|`` and matched ``|nu|`` for h = 1, 2), each law of the
signal noise on the same axes, and a fourth panel with the classes of runs next to the notebook's table."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.ticker import MaxNLocator

from attnlab.marion import multihead as mh
from attnlab.plot import LABELS, SIMULATION, panels, paper_figure

__all__ = ["plot"]

_COLOURS = {"independent": "C0", "shared": "C3"}
_NAMES = {"independent": r"independent $z_1, z_2$", "shared": r"shared $z$ (notebook)"}
_HEADS = ("-", "--")


def _mean_band(ax, x, Y, color, ls="-", label=None):
    """Mean over axis 1 with its 95% confidence band (mean +- 1.96 SE over runs, as the notebook's seaborn band)."""
    Y = np.asarray(Y, dtype=float)
    m = Y.mean(axis=1)
    se = Y.std(axis=1, ddof=1) / np.sqrt(Y.shape[1]) if Y.shape[1] > 1 else np.zeros_like(m)
    ax.plot(x, m, color=color, ls=ls, label=label, lw=1.2)
    ax.fill_between(x, m - 1.96 * se, m + 1.96 * se, color=color, alpha=0.15, linewidth=0)


def _title(cfg) -> str:
    lam = (rf"$\lambda_t={cfg.lambda0:g}/(1+{cfg.schedule_rate:g}\,\min(t, {cfg.schedule_cap}))$")
    return (f"Two erf heads, projected SGD (batch {cfg.batch_size}, step {cfg.step_size:g}), {lam}, "
            f"$d={cfg.d}$, $L={cfg.L}$, {cfg.n_repeats} runs")


@paper_figure
def plot(ds: xr.Dataset, cfg):
    """Four panels against the step: the closed-form excess risk (median and quartiles over runs, log axis) with the
    held-out estimate's median (markers) and the Monte Carlo risk's at the end; the matched ``|kappa|`` and ``|nu|``
    curves of the heads assigned to directions 1 and 2 (the config's matching rule, from the last log); and the
    counts of specialised, collapsed, mixed and failed runs per law, next to the notebook's table."""
    steps = ds.step.values
    laws = list(ds.noise.values)
    fig, axes = panels(4, width=3.1, height=2.7)

    ax = axes[0]
    for law in laws:
        sel = ds.sel(noise=law)
        c = _COLOURS[law]
        risk = sel.excess_risk.values
        ax.plot(steps, np.median(risk, axis=1), color=c, lw=1.2, label=_NAMES[law])
        ax.fill_between(steps, *np.percentile(risk, (25, 75), axis=1), color=c, alpha=0.15, linewidth=0)
        test = np.median(sel.test_excess_risk.values, axis=1)
        every = max(1, len(steps) // 12)
        ok = test[::every] > 0  # a held-out estimate can be negative (it is E(T - y)^2 - eps^2 on finite data)
        ax.plot(steps[::every][ok], test[::every][ok], color=c, **{**SIMULATION, "markersize": 3})
        ax.plot([steps[-1]], [float(np.median(sel.mc_excess_risk))], color=c, **{**SIMULATION, "marker": "D"})
    ax.plot([], [], color="0.4", **{**SIMULATION, "markersize": 3}, label="held-out")
    ax.plot([], [], color="0.4", **{**SIMULATION, "marker": "D"}, label="Monte Carlo, end")
    ax.set(yscale="log", xlabel=LABELS["step"], ylabel=LABELS["excess_risk"],
           title="excess risk (median, quartiles)")
    ax.legend(loc="upper right")

    for ax, var, sym, ylabel in ((axes[1], "kappa", "abs_kappa", r"$|k_h\cdot k^*_h|$, matched"),
                                 (axes[2], "nu", "abs_nu", r"$|v_h\cdot v^*_h|$, matched")):
        for law in laws:
            sel = ds.sel(noise=law)
            swap = mh.match_swap(sel.kappa.isel(step=-1).values, cfg.matching)
            m = mh.matched(sel[var].values, swap[None, :])  # (step, run, 2)
            for h in range(2):
                _mean_band(ax, steps, m[..., h], _COLOURS[law], ls=_HEADS[h])
        for law in laws:
            ax.plot([], [], color=_COLOURS[law], label=_NAMES[law])
        for h in range(2):
            ax.plot([], [], color="0.3", ls=_HEADS[h], label=f"$h={h + 1}$")
        ax.set(xlabel=LABELS["step"], ylabel=ylabel, ylim=(0.0, 1.0), title=f"matched {LABELS[sym]} (mean, 95%)")
        ax.legend(loc="upper left", ncol=2, columnspacing=0.8, handlelength=1.6)

    ax = axes[3]
    from attnlab.marion.multihead_preset import notebook_classes

    groups = []
    for law in laws:
        code, _ = mh.classify(ds.kappa.sel(noise=law).isel(step=-1).values, cfg.align_threshold, cfg.dominance)
        groups.append((_NAMES[law] + ", here", _COLOURS[law], np.bincount(code, minlength=4)))
    nb, _ = notebook_classes(cfg)
    groups.append(("notebook table", "0.55", np.bincount(nb, minlength=4)))
    width = 0.8 / len(groups)
    x = np.arange(4)
    top = 0
    for i, (label, color, counts) in enumerate(groups):
        ax.bar(x + (i - (len(groups) - 1) / 2) * width, counts, width=width, color=color, label=label)
        top = max(top, int(np.max(counts)))
    ax.set_xticks(x, ("special-\nised", "col-\nlapsed", "mixed", "failed"))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="class of the run (last log)", ylabel="runs", title="classes of runs (keys)", ylim=(0, 1.5 * top))
    ax.legend(loc="upper left", ncol=1)
    for ax in axes[:3]:
        ax.xaxis.set_major_locator(MaxNLocator(4))
    fig.suptitle(_title(cfg))
    return {"panels": fig}
