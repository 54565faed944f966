"""Figures of the Sakai et al. presets, in the layout of the paper's figures.

* ``densities-kl`` (Figs. 1, 3, 5 and ``sakai-wide``): (a) the density of Y[0,0] at each finite width (KDE of seed 0,
  dotted, blue to red as the paper draws them) on the limit law (its Rao-Blackwellised mixture density, theory
  style); (b) ln of the mean official KDE-KL over seeds against log_4 n (log_4 H at low rank, where n = 64 H) with
  the paper's bar, the Rao-Blackwellised KL and both null floors.
* ``densities-kurtosis`` (Fig. 2b): (a) the densities per H with the infinite-head Gaussian N(0, E v); (b) the excess
  kurtosis against H, Monte Carlo (limit and finite width) on the exact limit 3 Var v / (E v)^2, proportional to 1/H.
* ``scores`` (Fig. 2a): the score (QK^T)_00 under 1/sqrt(n) scaling (histogram on its limit N(0, 1)) and under 1/n
  scaling (histogram collapsing on 0).
* ``distances`` (not in the paper): KS and W1 to the limit with bootstrap intervals and null floors, and the second
  moment and excess kurtosis at each width against their limit constants.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from attnlab.plot import LABELS, SIMULATION, THEORY, panels, paper_figure, plt, sparse

if TYPE_CHECKING:
    from attnlab.sakai.configs import SakaiConfig

__all__ = ["plot"]

Y00 = r"$Y_{0,0}$"
FIGURE = {"vary_width": "Fig. 1", "vary_heads": "Fig. 2b", "scores": "Fig. 2a", "low_rank": "Fig. 3",
          "wide": "beyond the paper"}
PSI = {"clip": r"$\psi=\mathrm{clip}$", "relu": r"$\psi=\mathrm{ReLU}$"}
FLOOR = {"color": "0.45", "linewidth": 0.9}


def _int(n: int) -> str:
    """An integer for a mathtext label: powers of 2 from 2^12 on as powers."""
    n = int(n)
    k = n.bit_length() - 1
    return f"2^{{{k}}}" if n >= 4096 and n == 1 << k else str(n)


def _title(ds: xr.Dataset, cfg: SakaiConfig, what: str) -> str:
    fig = "Fig. 5" if cfg.experiment == "vary_width" and cfg.input_activation == "relu" else FIGURE[cfg.experiment]
    return f"Sakai et al., {fig}: {what}, {PSI[cfg.input_activation]}, $s={cfg.n_tokens}$"


def _configs(ds: xr.Dataset):
    """``(H, n, selection)`` of each finite-width configuration (see :func:`attnlab.sakai.summaries._configs`)."""
    heads = [int(h) for h in ds.heads.values]
    if "width" in ds.dims:
        return [(H, int(n), {"heads": H, "width": int(n)}) for H in heads for n in ds.width.values]
    return [(H, int(ds.width.sel(heads=H)), {"heads": H}) for H in heads]


def _legend(ax, **kwargs):
    """The axes' legend with the simulation (error-bar) entries first, then the lines in drawing order."""
    from matplotlib.container import ErrorbarContainer

    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(handles)), key=lambda i: not isinstance(handles[i], ErrorbarContainer))
    if len(handles) > 5:  # a long legend goes below the panel, where it hides no data
        kwargs.update(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    return ax.legend([handles[i] for i in order], [labels[i] for i in order], **kwargs)


def _ticks(ax, values):
    """Log-scale x ticks at the swept values themselves."""
    values = sorted({int(v) for v in values})
    ax.set_xticks(values, [f"${_int(v)}$" for v in values])
    ax.xaxis.set_minor_locator(plt.NullLocator())


def _sweep(ds: xr.Dataset, cfg: SakaiConfig):
    """The swept quantity the distances are drawn against: ``("width", label)`` or ``("heads", label)``."""
    if cfg.experiment in ("vary_heads", "low_rank"):
        return "heads", LABELS["heads"]
    return "width", LABELS["width"]


def _color(h: int, heads: list) -> str:
    """The colour of the h-th H: one colour when the preset has one H, else one per H (the limit law's too)."""
    return "C0" if len(heads) == 1 else f"C{h + 2}"


def _shade(color, i: int, k: int):
    """The i-th of k shades of ``color``, light to full (widths of one H)."""
    from matplotlib.colors import to_rgb

    f = 0.35 + 0.65 * (i / (k - 1) if k > 1 else 1.0)
    return tuple(1 - f * (1 - c) for c in to_rgb(color))


def _densities(ax, ds: xr.Dataset, cfg: SakaiConfig):
    """Finite-width densities (dotted: blue to red along n for one H, else in the colour of their H, lighter for
    smaller n) over the limit law of each H (theory style)."""
    y = ds.y.values
    heads = [int(h) for h in ds.heads.values]
    configs = _configs(ds)
    ramp = plt.cm.coolwarm(np.linspace(0, 1, len(configs)))
    for c, (H, n, sel) in enumerate(configs):
        h = heads.index(H)
        mine = [n_ for H_, n_, _ in configs if H_ == H]
        color = ramp[c] if len(heads) == 1 else _shade(_color(h, heads), mine.index(n), len(mine))
        label = f"$n={_int(n)}$" if len(heads) == 1 else f"$H={H}$, $n={_int(n)}$"
        ax.plot(y, ds.density_finite.sel(sel).values, ":", color=color, lw=1.5, label=label)
    for h, H in enumerate(heads):
        style = THEORY if len(heads) == 1 else {**THEORY, "color": _color(h, heads)}
        label = r"limit $n\to\infty$" + ("" if len(heads) == 1 else f", $H={H}$")
        ax.plot(y, ds.density_limit_rb.values[h], **style, label=label)
    if cfg.experiment == "vary_heads":
        v = float(ds.theory_second_moment[0])
        ax.plot(y, np.exp(-y**2 / (2 * v)) / math.sqrt(2 * math.pi * v), color="0.4", lw=1, ls="-.",
                label=r"$H\to\infty$: $N(0,\mathbb{E}v)$")
    ax.set(xlabel=Y00, ylabel=LABELS["density"], xlim=(y[0], y[-1]), ylim=(0, None))
    if len(ax.get_lines()) > 5:
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    else:
        ax.legend(loc="upper right", fontsize=6.5)


def _kl(ax, ds: xr.Dataset, cfg: SakaiConfig):
    r"""ln mean KDE-KL over seeds against log_4 n (log_4 H at low rank) with the paper's bar std/mean, the
    Rao-Blackwellised KL of seed 0, and the null floors (the same distances between two limit samples); along
    fewer than five widths (heads) markers only (:func:`attnlab.plot.sparse`)."""
    low_rank = cfg.experiment == "low_rank"
    heads = [int(h) for h in ds.heads.values]
    for h, H in enumerate(heads):
        color = "C0" if low_rank else _color(h, heads)
        tag = "" if len(heads) == 1 or low_rank else f", $H={H}$"
        if low_rank:
            sub, x = ds, np.log(ds.heads.values) / np.log(4)
        else:
            sub, x = ds.sel(heads=H), np.log(ds.width.values) / np.log(4)
        if low_rank and h:
            break
        kl = sub.kde_kl.values
        mean = kl.mean(-1)
        ax.errorbar(x, np.log(mean), yerr=kl.std(-1) / mean, **sparse({**SIMULATION, "linestyle": "-"}, len(x)),
                    color=color, capsize=2, label="KDE-KL (official), bar: sd/mean" + tag)
        ax.plot(x, np.log(sub.rb_kl.values), **sparse({"marker": "s", "linestyle": "--", "markerfacecolor": "none"},
                                                      len(x)), color=color, label="Rao-Blackwellised KL" + tag)
    floors = ds.kde_kl_null.mean("seed").values
    rb_floors = np.maximum(ds.rb_kl_null.values, 1e-300)
    if low_rank:  # each H against its own limit: the floors along the heads
        x = np.log(ds.heads.values) / np.log(4)
        ax.plot(x, np.log(floors), **sparse({"linestyle": ":", "marker": "_", "markersize": 8, **FLOOR}, len(x)),
                label="KDE-KL null floor")
        ax.plot(x, np.log(rb_floors), **sparse({"linestyle": "-.", "marker": "_", "markersize": 8, **FLOOR}, len(x)),
                label="RB-KL null floor")
    for h in range(0 if low_rank else len(heads)):
        color = FLOOR["color"] if len(heads) == 1 else _color(h, heads)
        ax.axhline(np.log(floors[h]), ls=":", **{**FLOOR, "color": color},
                   label="KDE-KL null floor" if h == 0 else None)
        ax.axhline(np.log(rb_floors[h]), ls="-.", **{**FLOOR, "color": color},
                   label="RB-KL null floor" if h == 0 else None)
    if not low_rank:  # the heuristic rate: O(1/n) deviations of the law, KL ~ 1/n^2, through the first RB-KL point
        x0 = math.log(int(ds.width.values[0])) / math.log(4)
        bottom = min(np.log(rb_floors).min(), np.log(ds.rb_kl.values).min()) - 1
        y0 = math.log(float(ds.rb_kl.isel(heads=0, width=0)))
        x = np.linspace(x0, min(math.log(int(ds.width.values[-1])) / math.log(4),
                                x0 + (y0 - bottom) / (2 * math.log(4))), 50)
        ax.plot(x, y0 - 2 * math.log(4) * (x - x0), color="0.6", lw=0.8, label=r"$\propto n^{-2}$")
    ax.set(xlabel=r"$\log_4 H$  ($n=64H$)" if low_rank else r"$\log_4 n$",
           ylabel=r"$\ln\,\mathrm{KL}(p_n\,\|\,p_\infty)$")
    _legend(ax, fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # below: the curves fill it


def _kurtosis(ax, ds: xr.Dataset):
    """Excess kurtosis against H: the limit's Monte Carlo (Rao-Blackwellised) and the finite width's, with 2 SE bars,
    on the exact limit 3 Var v / (E v)^2, which is proportional to 1/H (v is a mean over H i.i.d. heads)."""
    H = ds.heads.values.astype(float)
    Hs = np.geomspace(H.min(), H.max(), 100)
    k1 = float(ds.theory_excess_kurtosis[0]) * H[0]
    ax.plot(Hs, k1 / Hs, **THEORY, label=r"limit $3\,\mathrm{Var}\,v/(\mathbb{E}v)^2$")
    ax.errorbar(H, ds.limit_excess_kurtosis_rb.values, yerr=2 * ds.limit_excess_kurtosis_rb_se.values,
                **SIMULATION, color="C0", capsize=2, label=r"limit law, Monte Carlo")
    n = int(ds.width.values[-1])
    fin = ds.finite_excess_kurtosis_rb.sel(width=n)
    ax.errorbar(H * 1.08, fin.values, yerr=2 * ds.finite_excess_kurtosis_rb_se.sel(width=n).values,
                **{**SIMULATION, "marker": "s"}, color="C3", capsize=2, label=f"finite width $n={n}$")
    ax.set(xscale="log", xlabel=LABELS["heads"], ylabel=f"excess kurtosis of {Y00}")
    _ticks(ax, H)
    _legend(ax, fontsize=6.5)


def _main(ds: xr.Dataset, cfg: SakaiConfig):
    fig, axes = panels(2, width=3.4, height=2.9)
    _densities(axes[0], ds, cfg)
    axes[0].set_title(r"(a) density of $Y_{0,0}$ (seed 0)")
    if cfg.experiment == "vary_heads":
        _kurtosis(axes[1], ds)
        axes[1].set_title("(b) excess kurtosis")
        what = f"$n={int(ds.width.values[-1])}$"
    else:
        _kl(axes[1], ds, cfg)
        axes[1].set_title(f"(b) KL to the limit, {ds.sizes['seed']} seeds")
        heads = [int(h) for h in ds.heads.values]
        what = (f"$n_H={int(ds.head_width)}$" if cfg.experiment == "low_rank"
                else "$H=" + ",".join(map(str, heads)) + "$")
    fig.suptitle(_title(ds, cfg, what))
    return fig


def _distances(ds: xr.Dataset, cfg: SakaiConfig):
    """KS and W1 to the limit (seed 0 with its 95% bootstrap interval, pooled over seeds, null floors), and the
    finite-width second moment and excess kurtosis (5 SE bars) against their limit constants."""
    along, xlabel = _sweep(ds, cfg)
    heads = [int(h) for h in ds.heads.values]
    fig, axes = panels(2, 2, width=3.3, height=2.6)
    one = ds.isel(width=0) if along == "heads" and "width" in ds.dims else ds  # vary-heads: its one width
    series = ([(None, one, "C0")] if along == "heads" else
              [(H, ds.sel(heads=H), _color(h, heads)) for h, H in enumerate(heads)])
    def spread(sub, h):  # the series of several H side by side at each width
        return sub[along].values.astype(float) * 1.12 ** (h - (len(series) - 1) / 2)

    for ax, name, label in ((axes[0], "ks", "KS distance to the limit"), (axes[1], "w1", r"$W_1$ to the limit")):
        for h, (H, sub, color) in enumerate(series):
            x = spread(sub, h)
            tag = "" if H is None or len(heads) == 1 else f", $H={H}$"
            ci = sub[f"{name}_boot_ci"].values
            mid = sub[name].isel(seed=0).values
            ax.errorbar(x, mid, yerr=[np.maximum(mid - ci[..., 0], 0), np.maximum(ci[..., 1] - mid, 0)],
                        **SIMULATION, color=color, capsize=2, label="seed 0, 95% bootstrap" + tag)
            ax.plot(x, sub[f"{name}_pooled"].values, "s", color=color, mfc="none", label="seeds pooled" + tag)
        for h in range(len(heads)):
            ax.axhline(float(ds[f"{name}_null"].isel(heads=h).mean()), ls="--", **FLOOR,
                       label="null floor, per seed" if h == 0 else None)
            ax.axhline(float(ds[f"{name}_pooled_null"].isel(heads=h)), ls=":", **FLOOR,
                       label="null floor, pooled" if h == 0 else None)
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=label)
        _ticks(ax, ds[along].values)
        _legend(ax, fontsize=6)
    for ax, name, theory, label in ((axes[2], "second_moment", "theory_second_moment", r"$\mathbb{E}\,Y_{0,0}^2$"),
                                    (axes[3], "excess_kurtosis_rb", "theory_excess_kurtosis",
                                     f"excess kurtosis of {Y00}")):
        for h, (H, sub, color) in enumerate(series):
            x = spread(sub, h)
            tag = "" if H is None or len(heads) == 1 else f", $H={H}$"
            ax.errorbar(x, sub[f"finite_{name}"].values, yerr=5 * sub[f"finite_{name}_se"].values, **SIMULATION,
                        color=color, capsize=2, label="finite width, 5 SE" + tag)
            if along == "heads":
                hs = np.geomspace(x.min(), x.max(), 100)
                if name == "second_moment":  # E v does not depend on H
                    t = np.full_like(hs, float(ds[theory][0]))
                else:  # 3 Var v / (E v)^2 with Var v proportional to 1/H
                    t = float(ds[theory][0]) * float(ds.heads[0]) / hs
                ax.plot(hs, t, **THEORY, label="limit (quadrature)")
            else:
                ax.axhline(float(ds[theory].sel(heads=H)), **{**THEORY, "color": "black" if len(heads) == 1
                                                              else color},
                           label="limit (quadrature)" + tag)
        if name == "second_moment" and along == "width" and cfg.input_activation == "clip":
            ns = np.geomspace(float(ds.width.min()), float(ds.width.max()), 100)
            for h in range(len(heads)):
                m = float(ds[theory][h])
                ax.fill_between(ns, m - 1 / ns, m + 1 / ns, color="0.5", alpha=0.15, linewidth=0,
                                label=r"limit $\pm 1/n$ (bias bound)" if h == 0 else None)
        ax.set(xscale="log", xlabel=xlabel, ylabel=label)
        _ticks(ax, ds[along].values)
        _legend(ax, fontsize=6)
    axes[0].set_title("(a) KS")
    axes[1].set_title(r"(b) $W_1$")
    axes[2].set_title("(c) second moment")
    axes[3].set_title("(d) excess kurtosis")
    fig.suptitle(_title(ds, cfg, "distances and moments against the limit"))
    return fig


def _scores(ds: xr.Dataset, cfg: SakaiConfig):
    """Fig. 2a: the score at 1/sqrt(n) scaling on its limit N(0, 1), and at 1/n scaling collapsing on 0."""
    n = int(ds.width)
    fig, axes = panels(2, width=3.3, height=2.8)
    x = np.linspace(-4, 4, 400)
    ax = axes[0]
    ax.hist(ds.score.sel(scaling=0.5).values, bins=120, density=True, color="C0", alpha=0.55,
            label="exact sampler")
    ax.plot(x, np.exp(-x**2 / 2) / math.sqrt(2 * math.pi), **THEORY, label=r"limit $N(0,1)$")
    ax.set(xlabel=r"$(QK^\top)_{00}/\sqrt{n}$", ylabel=LABELS["density"], xlim=(-4.5, 4.5),
           title=r"(a) $1/\sqrt{n}$ scaling: $O(1)$")
    ax.legend(fontsize=6.5)
    ax = axes[1]
    g = ds.score.sel(scaling=1.0).values
    ax.hist(g, bins=120, density=True, color="C0", alpha=0.55, label="exact sampler")
    ax.axvline(0.0, **THEORY, label=r"limit $\delta_0$")
    ax.set(xlabel=r"$(QK^\top)_{00}/n$", ylabel=LABELS["density"], xlim=(-4.5, 4.5),
           title=r"(b) $1/n$ scaling: collapses to $0$")
    ax.legend(fontsize=6.5)
    fig.suptitle(_title(ds, cfg, f"$n={n}$, $H=1$"))
    return fig


@paper_figure
def plot(ds: xr.Dataset, cfg: SakaiConfig):
    """The preset's figures: the paper's figure first (``scores``, ``densities-kl`` or ``densities-kurtosis``), then
    the distances and moments against the limit."""
    if cfg.experiment == "scores":
        return {"scores": _scores(ds, cfg)}
    name = "densities-kurtosis" if cfg.experiment == "vary_heads" else "densities-kl"
    return {name: _main(ds, cfg), "distances": _distances(ds, cfg)}
