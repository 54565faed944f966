"""The figures of ``marion-transformer-single-head`` and ``marion-transformer-multihead`` (Marion et al., ICLR 2025,
App. E.3, the transformer experiments): the notebooks' panels (held-out excess risk on a log axis with the LayerNorm
floor, the alignments with the oracle directions, the rank-1 ratio of ``W_Q^T W_K``) with the corrected and the
notebook's model on the same axes, and the register's attention on the signal token (single head)."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.ticker import MaxNLocator

from attnlab.plot import LABELS, SIMULATION, THEORY, panels, paper_figure

__all__ = ["plot"]

_COLOURS = {"corrected": "C0", "notebook": "C3", "custom": "C2"}
_NAMES = {"corrected": "corrected", "notebook": "notebook", "custom": "custom switches"}
_HEADS = ("-", "--")
_KAPPA = {"exact": r"$|\cos(q_a, k^*)|$", "notebook": r"$|e_1(W_K^a)\cdot k^*|$"}
_NU = {"exact": r"$\cos(\tilde w_a, v^*)$", "notebook": r"$\cos(w_a, v^*)$"}


def _mean_band(ax, x, Y, color, ls="-", label=None):
    """Mean over runs (axis 1, NaN ignored) with its 95% band (mean +- 1.96 SE, as the notebooks' seaborn band)."""
    Y = np.asarray(Y, dtype=float)
    ok = np.isfinite(Y)
    n = ok.sum(axis=1)
    m = np.where(n > 0, np.where(ok, Y, 0.0).sum(axis=1) / np.maximum(n, 1), np.nan)
    var = np.where(ok, (Y - m[:, None]) ** 2, 0.0).sum(axis=1) / np.maximum(n - 1, 1)
    se = np.where(n > 1, np.sqrt(var / np.maximum(n, 1)), 0.0)
    ax.plot(x, m, color=color, ls=ls, label=label, lw=1.2)
    ax.fill_between(x, m - 1.96 * se, m + 1.96 * se, color=color, alpha=0.15, linewidth=0)


def _risk_panel(ax, ds):
    steps = ds.step.values
    for label in ds.model.values:
        sel = ds.sel(model=label)
        c = _COLOURS[str(label)]
        risk = sel.test_excess_risk.values
        med = np.median(risk, axis=1)
        ok = med > 0  # a held-out estimate of E(y_hat - y)^2 - eps^2 can be negative
        ax.plot(steps[ok], med[ok], color=c, lw=1.2, label=_NAMES[str(label)])
        lo, hi = np.percentile(risk, (25, 75), axis=1)
        ax.fill_between(steps, np.where(lo > 0, lo, np.nan), np.where(hi > 0, hi, np.nan), color=c, alpha=0.15,
                        linewidth=0)
        ax.axhline(float(np.median(sel.layernorm_floor)), **{**THEORY, "color": c, "linewidth": 1.0})
        ax.plot([steps[-1]], [float(np.median(sel.mc_excess_risk))], color=c, **{**SIMULATION, "marker": "D"})
    ax.plot([], [], **{**THEORY, "color": "0.3", "linewidth": 1.0}, label="LayerNorm floor")
    ax.plot([], [], color="0.3", **{**SIMULATION, "marker": "D"}, label="Monte Carlo, end")
    ax.set(yscale="log", xlabel=LABELS["step"], ylabel=LABELS["excess_risk"].replace("T(X)", r"\hat y"),
           title="held-out excess risk (median, quartiles)")
    ax.legend(loc="upper right")


def _rank1_panel(ax, ds):
    steps = ds.step.values
    for label in ds.model.values:
        sel = ds.sel(model=label)
        for h in range(ds.sizes["head"]):
            _mean_band(ax, steps, sel.rank1_ratio.values[:, :, h], _COLOURS[str(label)], ls=_HEADS[h % 2])
    for label in ds.model.values:
        ax.plot([], [], color=_COLOURS[str(label)], label=_NAMES[str(label)])
    if ds.sizes["head"] > 1:
        for h in range(ds.sizes["head"]):
            ax.plot([], [], color="0.3", ls=_HEADS[h % 2], label=f"head $a={h + 1}$")
    ax.set(xlabel=LABELS["step"], ylabel=r"$s_1^2/\sum_i s_i^2$ of $W_Q^{a\top} W_K^a$", ylim=(0.0, 1.05),
           title="rank-1 ratio (mean, 95%)")
    ax.legend(loc="center right")


def _title(cfg) -> str:
    heads = "one head" if cfg.N_HEADS == 1 else f"{cfg.N_HEADS} heads of width {cfg.head_width}"
    return (f"Register + pre-LN softmax attention ({heads}) + ReLU FFN, SGD (batch {cfg.batch_size}, step "
            f"{cfg.step_size:g}), $d={cfg.d}$, $L={cfg.L}$, {cfg.n_repeats} runs")


@paper_figure
def plot(ds: xr.Dataset, cfg):
    """Four panels against the step. Single head: held-out excess risk, alignments of the register's attention
    direction with k* and of the value map with v*, rank-1 ratio, attention on the signal token. Multi-head: held-out
    excess risk, matched key alignments, matched value alignments (curves h = 1, 2 by the config's matching rule),
    rank-1 ratio per head."""
    from attnlab.marion.transformer_summary import headline

    steps = ds.step.values
    kappa, nu = headline(ds, cfg)
    fig, axes = panels(4, width=3.1, height=2.7)
    _risk_panel(axes[0], ds)
    if cfg.N_HEADS == 1:
        ax = axes[1]
        for label in ds.model.values:
            c = _COLOURS[str(label)]
            _mean_band(ax, steps, np.abs(kappa.sel(model=label).values[:, :, 0, 0]), c, "-")
            _mean_band(ax, steps, nu.sel(model=label).values[:, :, 0, 0], c, "--")
        for label in ds.model.values:
            ax.plot([], [], color=_COLOURS[str(label)], label=_NAMES[str(label)])
        ax.plot([], [], color="0.3", ls="-", label=_KAPPA[cfg.alignment])
        ax.plot([], [], color="0.3", ls="--", label=_NU[cfg.alignment])
        ax.set(xlabel=LABELS["step"], ylabel="alignment with oracle parameters", ylim=(-0.2, 1.05),
               title="alignments (mean, 95%)")
        ax.legend(loc="lower right", ncol=2, columnspacing=0.8, handlelength=1.6)
        _rank1_panel(axes[2], ds)
        ax = axes[3]
        for label in ds.model.values:
            _mean_band(ax, steps, ds.attention_signal.sel(model=label).values[:, :, 0, 0], _COLOURS[str(label)])
            ax.plot([], [], color=_COLOURS[str(label)], label=_NAMES[str(label)])
        ax.axhline(1.0 / (cfg.L + 1), **{**THEORY, "linewidth": 1.0}, label=r"uniform, $1/(L+1)$")
        ax.set(xlabel=LABELS["step"], ylabel=r"attention $a_1$ of the register on $X_1$", ylim=(0.0, 1.05),
               title="attention on the signal token (mean, 95%)")
        ax.legend(loc="center right")
    else:
        from attnlab.marion.transformer_summary import matched_curves

        mk, mn, _ = matched_curves(ds, kappa, nu, cfg)
        rule = {"head1": "head-1 rule", "best": "best assignment"}[cfg.matching]
        for ax, curves, sym, kind in ((axes[1], np.abs(mk), _KAPPA[cfg.alignment], "key"),
                                      (axes[2], mn, _NU[cfg.alignment], "value")):
            for i, label in enumerate(ds.model.values):
                for h in range(2):
                    _mean_band(ax, steps, curves[i, ..., h], _COLOURS[str(label)], ls=_HEADS[h])
            for label in ds.model.values:
                ax.plot([], [], color=_COLOURS[str(label)], label=_NAMES[str(label)])
            for h in range(2):
                ax.plot([], [], color="0.3", ls=_HEADS[h], label=f"$h={h + 1}$")
            ax.set(xlabel=LABELS["step"], ylabel=sym, ylim=(-0.2, 1.05),
                   title=f"matched {kind}s, {rule} (mean, 95%)")
            ax.legend(loc="lower right", ncol=2, columnspacing=0.8, handlelength=1.6)
        _rank1_panel(axes[3], ds)
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(4))
    fig.suptitle(_title(cfg))
    return {"panels": fig}
