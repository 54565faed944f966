"""Figures of ``sakai-kernel`` (the infinite-width kernels of attention for many inputs, beyond the paper).

* ``kernel``: (a) the one-layer kernel's entries (theory, randomised QMC) against the finite-width covariance at the
  largest width (simulation, 2 SE bars), and the 1/n-scaling kernel (control) against the same estimates; (b) the mean
  |finite-width covariance - kernel| along the width with a 1/n line and the Monte Carlo noise level; (c) the stack
  ``[attention, relu, attention]``: its kernel against the joint law extrapolated to H = inf and against finite
  width at H = n_heads; (d) the excess kurtosis of a random projection of the outputs against H.
* ``random-kernel``: the law of the random kernel ``w^T C w`` of a random projection w at the fewest and the most
  heads, finite width against the joint law, with its H -> inf value; the KS distance against H.
* ``matrices``: the first data set's token kernel, its attention kernel and the finite-width z-scores.

``sakai-kernel-regression`` (:func:`plot_regression`): one figure, ``regression``.

A curve along the widths or the heads is drawn as markers only when it has fewer than five points
(:func:`attnlab.plot.sparse`).
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnlab.plot import LABELS, SIMULATION, THEORY, colorbar, panels, paper_figure, sparse

__all__ = ["plot", "plot_regression"]

COLORS = {"gaussian": "C0", "planted": "C3"}
NAMES = {"gaussian": "Gaussian tokens", "planted": "planted signal"}


def _upper(a):
    iu = np.triu_indices(a.shape[-1])
    return a[..., iu[0], iu[1]]


def _entries(ax, ds: xr.Dataset):
    n = int(ds.width.values[-1])
    lo, hi = np.inf, -np.inf
    for kind in ds.dataset.values:
        D = ds.sel(dataset=kind)
        x, xl = _upper(D.kernel.values), _upper(D.kernel_linear.values)
        y = _upper(D.finite_cov.sel(width=n).values)
        e = 2 * np.sqrt(_upper(D.finite_cov_se.sel(width=n).values) ** 2 + _upper(D.kernel_se.values) ** 2)
        c = COLORS.get(str(kind), "C1")
        ax.plot(xl, y, "x", color=c, alpha=0.35, ms=3, label=f"{NAMES.get(str(kind), kind)}: $1/n$ kernel (control)")
        ax.errorbar(x, y, yerr=e, **{**SIMULATION, "markersize": 2.5}, color=c, capsize=0,
                    label=f"{NAMES.get(str(kind), kind)}: $1/\\sqrt{{n}}$ kernel")
        lo, hi = min(lo, x.min(), xl.min(), y.min()), max(hi, x.max(), xl.max(), y.max())
    t = np.linspace(lo, hi, 2)
    ax.plot(t, t, **THEORY, label="$y=x$")
    ax.set(xlabel=r"kernel $K'_{(a,i),(b,j)}$ ($H\to\infty$, QMC)",
           ylabel=f"finite width $\\mathbb{{E}}\\,y_{{ai}}y_{{bj}}$, $n={n}$, $H={ds.attrs['n_heads']}$")
    ax.legend(fontsize=5.5, loc="upper left")


def _bias(ax, ds: xr.Dataset):
    n = ds.width.values.astype(float)
    for kind in ds.dataset.values:
        D = ds.sel(dataset=kind)
        c = COLORS.get(str(kind), "C1")
        bias = np.array([np.abs(_upper(D.finite_cov.sel(width=w).values - D.kernel.values)).mean()
                         for w in ds.width.values])
        noise = np.array([np.sqrt(2 / np.pi) * _upper(np.sqrt(D.finite_cov_se.sel(width=w).values ** 2
                                                              + D.kernel_se.values ** 2)).mean()
                          for w in ds.width.values])
        ax.plot(n, bias, **sparse({**SIMULATION, "linestyle": "-"}, n.size), color=c, label=NAMES.get(str(kind), kind))
        ax.plot(n, noise, **sparse({"linestyle": ":", "linewidth": 1}, n.size), color=c,
                label=r"noise level $\sqrt{2/\pi}\,\mathrm{SE}$")
        ax.plot(n, bias[0] * n[0] / n, **{**THEORY, "color": c, "linewidth": 0.9}, label=r"$\propto 1/n$")
    ax.set(xscale="log", yscale="log", xlabel=LABELS["width"],
           ylabel=r"mean $|\mathbb{E}\,y y^\top - K'|$ over entries")
    ax.set_xticks(n, [str(int(w)) for w in n])
    ax.minorticks_off()
    ax.legend(fontsize=5.5)


def _stack(ax, ds: xr.Dataset):
    for kind in ds.dataset.values:
        D = ds.sel(dataset=kind)
        c = COLORS.get(str(kind), "C1")
        x = _upper(D.kernel_stack.values)
        y, e = _upper(D.stack_extrapolated.values), 2 * _upper(D.stack_extrapolated_se.values)
        f = _upper(D.stack_finite_cov.values)
        one = _upper(D.stack_limit_cov.sel(stack_heads=1).values)
        ax.plot(x, one, "x", color=c, alpha=0.35, ms=3, label=f"{NAMES.get(str(kind), kind)}: joint law, $H=1$")
        ax.plot(x, f, "s", color=c, mfc="none", ms=2.5, alpha=0.7,
                label=f"finite width, $n={int(ds.width.values[-1])}$, $H={ds.attrs['n_heads']}$")
        ax.errorbar(x, y, yerr=e, **{**SIMULATION, "markersize": 2.5}, color=c, capsize=0,
                    label=r"joint law extrapolated to $H\to\infty$")
    lo, hi = ax.get_xlim()
    ax.plot([lo, hi], [lo, hi], **THEORY, label="$y=x$")
    ax.set(xlabel=r"stack kernel ($H\to\infty$, composed maps)", ylabel="covariance of the stack's outputs")
    ax.legend(fontsize=5.5, loc="upper left")


def _kurtosis(ax, ds: xr.Dataset):
    p = "random"
    for kind in ds.dataset.values:
        D = ds.sel(dataset=kind, projection=p)
        c = COLORS.get(str(kind), "C1")
        H = ds.heads.values.astype(float)
        Hs = np.geomspace(H.min(), H.max(), 50)
        k1 = float(D.kurtosis_limit.values[0]) * H[0]
        ax.plot(Hs, k1 / Hs, **{**THEORY, "color": c}, label=r"one layer: $\kappa_1/H$")
        ax.errorbar(H, D.kurtosis_limit.values, yerr=2 * D.kurtosis_limit_se.values, **SIMULATION, color=c,
                    capsize=2, label=f"{NAMES.get(str(kind), kind)}: joint law")
        ax.errorbar(H * 1.1, D.kurtosis_finite.values, yerr=2 * D.kurtosis_finite_se.values,
                    **{**SIMULATION, "marker": "s"}, mfc="none", color=c, capsize=2,
                    label=f"finite width $n={int(ds.attrs['law_width'])}$")
        Hst = ds.stack_heads.values.astype(float)
        ax.errorbar(Hst * 0.9, D.kurtosis_stack_limit.values, yerr=2 * D.kurtosis_stack_limit_se.values,
                    **{**SIMULATION, "marker": "^"}, color=c, alpha=0.6, capsize=2, label="stack: joint law")
    ax.set(xscale="log", yscale="log", xlabel=LABELS["heads"], ylabel=r"excess kurtosis of $w^\top y$")
    ax.legend(fontsize=5.5, ncol=2)


def _kernel(ds: xr.Dataset, cfg):
    fig, axes = panels(2, 2, width=3.4, height=3.0)
    _entries(axes[0], ds)
    axes[0].set_title("(a) one attention layer")
    _bias(axes[1], ds)
    axes[1].set_title(r"(b) finite-width bias, $O(1/n)$")
    _stack(axes[2], ds)
    axes[2].set_title(r"(c) stack: attention, ReLU, attention")
    _kurtosis(axes[3], ds)
    axes[3].set_title(r"(d) non-Gaussianity against $H$")
    m, s = ds.sizes["sequence"], ds.sizes["position"]
    fig.suptitle(f"Attention kernel at $1/\\sqrt{{n}}$ scaling: $m={m}$ sequences of $s={s}$ tokens (beyond Sakai et al.)")
    return fig


def _random_kernel(ds: xr.Dataset, cfg):
    fig, axes = panels(3, width=3.0, height=2.7)
    p = "random"
    kind = ds.dataset.values[0]
    D = ds.sel(dataset=kind, projection=p)
    w = ds.projection_vector.sel(projection=p).values
    v_inf = float(w @ D.kernel.values @ w)
    n = int(ds.attrs["law_width"])
    for ax, h in zip(axes[:2], (ds.heads.values[0], ds.heads.values[-1])):
        f, lim = D.mixing_finite.sel(heads=h).values, D.mixing_limit.sel(heads=h).values
        bins = np.linspace(min(f.min(), lim.min()), max(f.max(), lim.max()), 40)
        ax.hist(f, bins=bins, density=True, color="C0", alpha=0.5, label=f"finite width $n={n}$")
        ax.hist(lim, bins=bins, density=True, histtype="step", color="black", lw=1.2, ls="--",
                label=r"joint law $n\to\infty$")
        ax.axvline(v_inf, color="C3", lw=1.2, label=r"$H\to\infty$: $w^\top K' w$")
        ax.set(xlabel=r"random kernel $w^\top C\,w$", ylabel=LABELS["density"], title=f"$H={int(h)}$")
        ax.legend(fontsize=5.5)
    ax = axes[2]
    H = ds.heads.values.astype(float)
    for kind in ds.dataset.values:
        ax.plot(H, ds.ks_mixing.sel(dataset=kind).max("projection").values,
                **sparse({**SIMULATION, "linestyle": "-"}, H.size), color=COLORS.get(str(kind), "C1"),
                label=f"{NAMES.get(str(kind), kind)}: $w^\\top C w$")
        ax.plot(H, ds.ks_output.sel(dataset=kind).max("projection").values,
                **sparse({"marker": "s", "linestyle": "--", "markerfacecolor": "none"}, H.size),
                color=COLORS.get(str(kind), "C1"), label=r"$w^\top y$")
        ax.plot([ds.attrs["n_heads"]], [float(ds.ks_mixing_widest.sel(dataset=kind).max())], "^", ms=6,
                color=COLORS.get(str(kind), "C1"), label=f"$w^\\top C w$ at $n={int(ds.width.values[-1])}$")
    ax.axhline(float(ds.ks_crit), color="0.4", lw=0.9, ls=":", label="KS critical value")
    ax.set(xscale="log", xlabel=LABELS["heads"], ylabel="KS(finite width, joint law)",
           title="largest KS over 4 projections")
    ax.set_xticks(H, [str(int(h)) for h in H])
    ax.minorticks_off()
    ax.legend(fontsize=5.5)
    fig.suptitle(f"{NAMES.get(str(kind), kind)}: the random kernel of a finite number of heads")
    return fig


def _matrices(ds: xr.Dataset, cfg):
    fig, axes = panels(3, width=2.9, height=2.6)
    kind = ds.dataset.values[0]
    D = ds.sel(dataset=kind)
    n = int(ds.width.values[-1])
    z = (D.finite_cov.sel(width=n).values - D.kernel.values) / np.sqrt(D.finite_cov_se.sel(width=n).values ** 2
                                                                        + D.kernel_se.values ** 2)
    for ax, mat, label, title in ((axes[0], D.input_kernel.values, r"$K$", "(a) token kernel $UU^\\top/d$"),
                                  (axes[1], D.kernel.values, r"$K'$", "(b) attention kernel"),
                                  (axes[2], z, r"$z$", f"(c) finite width $n={n}$: z-scores")):
        lim = np.abs(mat).max()
        im = ax.imshow(mat, cmap="RdBu_r", vmin=-lim, vmax=lim)
        colorbar(fig, im, ax, label)
        ax.set(xlabel=r"token $(b,j)$", ylabel=r"token $(a,i)$", title=title)
        ax.grid(False)
    fig.suptitle(f"{NAMES.get(str(kind), kind)}: kernels of all tokens of all sequences")
    return fig


@paper_figure
def plot(ds: xr.Dataset, cfg):
    """The figures of ``sakai-kernel``: ``kernel``, ``random-kernel`` and ``matrices``."""
    return {"kernel": _kernel(ds, cfg), "random-kernel": _random_kernel(ds, cfg), "matrices": _matrices(ds, cfg)}


@paper_figure
def plot_regression(ds: xr.Dataset, cfg):
    """The figure of ``sakai-kernel-regression``: (a) test error of readout-trained networks against the width, with
    the random-kernel predictions (finite H) and kernel ridge regression (H -> inf); (b) the random-kernel prediction
    against 1/H, extrapolated to H = inf; (c) fully trained networks along gradient descent."""
    fig, axes = panels(3, width=3.2, height=2.9)
    krr = ds.krr_error.values
    k, k_se = krr.mean(), krr.std(ddof=1) / np.sqrt(krr.size)
    ax = axes[0]
    n = ds.width.values.astype(float)
    for h, H in enumerate(ds.heads.values):
        e = ds.readout_error.sel(heads=H)
        c = f"C{h}"
        ax.errorbar(n * 1.04 ** h, e.mean("network").values, yerr=2 * e.std("network").values / np.sqrt(e.sizes["network"]),
                    **SIMULATION, color=c, capsize=2, label=f"readout trained, $H={int(H)}$")
        r = ds.random_kernel_error.sel(kernel_heads=H)
        ax.axhline(float(r.mean()), **{**THEORY, "color": c}, label=f"random kernel $C(p)$, $H={int(H)}$")
    ax.axhline(k, color="black", lw=1.4, label=r"kernel ridge regr., $H\to\infty$")
    ax.axhline(float(ds.krr_error_linear), color="0.5", lw=1, ls=":", label=r"kernel at $1/n$ scaling")
    ax.set(xscale="log", xlabel=LABELS["width"], ylabel="test mean squared error", title="(a) readout trained")
    ax.set_xticks(n, [str(int(w)) for w in n])
    ax.minorticks_off()
    ax.legend(fontsize=5.5)
    ax = axes[1]
    H = ds.kernel_heads.values.astype(float)
    r = ds.random_kernel_error
    mean, se = r.mean("network").values, r.std("network").values / np.sqrt(r.sizes["network"])
    ax.errorbar(1 / H, mean, yerr=2 * se, **SIMULATION, color="C2", capsize=2, label=r"random kernel $C(p)$ (Monte Carlo)")
    sel = np.isin(H, np.asarray(cfg.limit_heads, float))
    t = 1 / H[sel]
    b, a = np.polyfit(t, mean[sel], 1, w=1 / se[sel])
    x = np.linspace(0, t.max(), 20)
    ax.plot(x, a + b * x, **{**THEORY, "color": "C2"}, label=r"$a+b/H$ fit")
    ax.errorbar([0.0], [k], yerr=[2 * k_se], **{**SIMULATION, "marker": "s"}, color="black", capsize=2,
                label=r"kernel ridge regr. ($H\to\infty$)")
    ax.set_xscale("symlog", linthresh=2 * t.max())  # linear over the fit, logarithmic beyond
    ax.set(xlabel=r"$1/H$", ylabel="test mean squared error", title=r"(b) random kernel, $n\to\infty$")
    ax.legend(fontsize=5.5)
    ax = axes[2]
    steps = ds.step.values
    for w, nw in enumerate(ds.train_width.values):
        te = ds.trained_test_curve.sel(train_width=nw)
        tr = ds.trained_train_curve.sel(train_width=nw)
        ax.plot(steps, te.mean("init").values, color=f"C{w + 3}", label=f"test, $n={int(nw)}$")
        ax.plot(steps, tr.mean("init").values, color=f"C{w + 3}", ls=":", lw=1, label=f"training, $n={int(nw)}$")
    ax.axhline(k, color="black", lw=1.4, label=r"kernel ridge regr., $H\to\infty$")
    ax.axhline(float(ds.noise_floor), color="0.5", lw=0.9, ls="--", label=r"noise $\varepsilon^2$")
    ax.set(yscale="log", xlabel=LABELS["step"], ylabel="mean squared error",
           title=f"(c) all weights trained, $H={ds.attrs['train_heads']}$")
    ax.legend(fontsize=5.5, ncol=2)
    fig.suptitle(f"Single-location regression, $s={cfg.n_tokens}$, $d={cfg.token_dim}$, {cfg.n_train} training "
                 "sequences: the kernel regime and training")
    return fig
