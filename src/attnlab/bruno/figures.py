"""Figures of the Bruno et al. presets, in the layout of the paper's figures.

* ``clouds`` (Fig. 1, alignment): the token cloud on S^2 at t = 0, 1, 3, 6, row (a) and row (b); tokens coloured by
  their initial azimuth, so that where each part of the initial law goes can be followed.
* ``closed-form`` (alignment): the mass in E_max against t, simulation on the closed form normalize(e^{tV} x0), and
  the tokens' mean angle to the closed form with the finite-beta bias bound of the check.
* ``histograms`` (Fig. 3, forward heat): the histogram of the angle at four times on the forward heat mixture of
  Eq. (7) and the finite-beta mean-field PDE.
* ``clouds`` (Fig. 2, backward heat; Fig. 4): the cloud on S^2 over the azimuth histogram at chosen times, on the
  backward heat mixture of Eq. (7) until the collapse and the collapse points (the component means) after it.
* ``energy`` (Fig. 4, three phases): the interaction energy against log time with the alignment, heat and pairing
  time scales, the cluster count, and the closest pair's angle on the pairing ODE.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from attnlab.plot import LABELS, SIMULATION, THEORY, colorbar, panels, paper_figure, plt

if TYPE_CHECKING:
    from attnlab.bruno.configs import BrunoConfig

__all__ = ["plot"]

FIGURE = {"alignment": "Fig. 1", "backward-heat": "Fig. 2", "forward-heat": "Fig. 3", "three-phases": "Fig. 4"}
WHAT = {"alignment": "alignment", "backward-heat": "backward heat", "forward-heat": "forward heat",
        "three-phases": "three phases"}
AZIMUTH = r"azimuth $\theta$ (rad)"
THETA0 = r"initial azimuth $\theta_0$ (rad)"
CYCLIC = "twilight"


def _title(ds: xr.Dataset, extra: str = "") -> str:
    sc = ds.attrs["scenario"]
    return (f"Bruno et al., {FIGURE[sc]}: {WHAT[sc]}, $d={ds.sizes['dim']}$, $N={int(ds.attrs['n_tokens'])}$, "
            rf"$\beta={float(ds.attrs['beta']):g}$" + extra + " (values the paper leaves unstated: [U, chosen])")


def _matrix(V) -> str:
    """A value matrix in mathtext: diag(...) when diagonal, else its rows."""
    V = np.asarray(V, float)
    num = lambda v: f"{v:g}"  # noqa: E731
    if np.all(V == np.diag(np.diag(V))):
        return r"V=\mathrm{diag}(" + ",".join(map(num, np.diag(V))) + ")"
    return "V=(" + ",".join("(" + ",".join(map(num, row)) + ")" for row in V) + ")"


def _pick(times, wanted):
    return sorted({int(np.argmin(np.abs(times - w))) for w in wanted})


def _azimuth(x):
    return np.mod(np.arctan2(x[..., 1], x[..., 0]), 2 * np.pi)


def _sphere(fig, pos, x, theta0, title: str):
    """A 3-D panel of the tokens ``x`` (N, 3) on S^2, coloured by their initial azimuth ``theta0``; returns the
    scatter (the caller gives it a colour bar)."""
    ax = fig.add_subplot(*pos, projection="3d")
    sc = ax.scatter(x[:, 0], x[:, 1], x[:, 2], s=1.5, c=theta0, cmap=CYCLIC, vmin=0, vmax=2 * np.pi,
                    depthshade=False, linewidths=0, rasterized=True)
    ticks = [-1, 0, 1]
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), xticks=ticks, yticks=ticks, zticks=ticks, title=title)
    ax.set_xlabel(r"$x_1$", labelpad=-10)
    ax.set_ylabel(r"$x_2$", labelpad=-10)
    ax.set_zlabel(r"$x_3$", labelpad=-10)
    ax.tick_params(labelsize=6, pad=-3)
    ax.set_box_aspect((1, 1, 1))
    return sc


def _shared_colorbar(fig, scatters, axes):
    """One colour bar, for the initial azimuth, beside ``axes``: every scatter of the figure has the same colour map
    and norm, so it describes each of them (each is given it as its ``colorbar``)."""
    cb = colorbar(fig, scatters[0], list(axes), THETA0)
    cb.set_ticks([0, np.pi, 2 * np.pi], labels=[r"$0$", r"$\pi$", r"$2\pi$"])
    for sc in scatters[1:]:
        sc.colorbar = cb
    return cb


def _subsample(n: int, max_tokens: int = 3000):
    return slice(None, None, max(1, -(-n // max_tokens)))


def _alignment(ds: xr.Dataset):
    times = ds.time.values
    idx = _pick(times, [0, 1, 3, 6, times[-1]])[:4]
    rows = list(ds.row.values)
    keep = _subsample(ds.sizes["token"])
    fig = plt.figure(figsize=(2.6 * len(idx) + 0.6, 2.6 * len(rows)))
    scatters, axes = [], []
    for r, row in enumerate(rows):
        xs = ds.x.sel(row=row).values[:, keep]
        theta0 = _azimuth(xs[0])
        for c, k in enumerate(idx):
            sc = _sphere(fig, (len(rows), len(idx), r * len(idx) + c + 1), xs[k], theta0,
                         f"({row}) $t={times[k]:.3g}$")
            scatters.append(sc)
            axes.append(sc.axes)
    _shared_colorbar(fig, scatters, axes)
    matrices = "; ".join(f"row ({row}): ${_matrix(V)}$" for row, V in zip(rows, ds.attrs["V_rows"]))
    fig.suptitle(_title(ds) + "\n" + r"$Q=K=I$, " + matrices)
    return fig


def _closed_form(ds: xr.Dataset):
    """The alignment phase against its closed form normalize(e^{tV} x0) (Q = K = Id)."""
    times = ds.time.values
    beta, d = float(ds.attrs["beta"]), ds.sizes["dim"]
    fig, axes = panels(2, width=3.3, height=2.8)
    ax = axes[0]
    for r, row in enumerate(ds.row.values):
        color = f"C{r}"
        ax.plot(ds.theory_time.values, ds.emax_mass_closed_form.sel(row=row).values, **{**THEORY, "color": color},
                label=f"({row}) closed form")
        ax.plot(times, ds.emax_mass.sel(row=row).values, **SIMULATION, color=color, label=f"({row}) tokens")
    ax.set(xlabel=LABELS["time"], ylabel=r"mass in $E_{\max}$, $\mathrm{tr}(P_E\Sigma)$", ylim=(0, 1.02),
           title=r"(a) collapse onto $E_{\max}$")
    ax.legend(fontsize=6.5, loc="lower right")
    ax = axes[1]
    t = times[1:]
    for r, row in enumerate(ds.row.values):
        color = f"C{r}"
        err = ds.alignment_error.sel(row=row).values[1:]
        ax.errorbar(t, err, yerr=2 * ds.alignment_error_se.sel(row=row).values[1:], **SIMULATION, color=color,
                    capsize=2, label=f"({row}) tokens, 2 SE")
        ax.plot(t, ds.alignment_error_frozen.sel(row=row).values[1:], "s", color=color, mfc="none",
                label=f"({row}) frozen at $x_0$")
        vn = float(ds.V_norm.sel(row=row))
        ax.plot(t, t * vn * (d - 1) / (2 * beta), color=color, lw=0.9, ls=":",
                label=rf"({row}) bias bound $t\|V\|(d-1)/2\beta$")
    ax.set(xscale="log", yscale="log", xlabel=LABELS["time"], ylabel="mean angle (rad)",
           title=r"(b) tokens to $\mathrm{normalize}(e^{tV}x_0)$")
    ax.set_xticks(t, [f"${v:g}$" for v in t])
    ax.xaxis.set_minor_locator(plt.NullLocator())
    handles, labels = ax.get_legend_handles_labels()
    order = np.argsort([not lab.endswith("2 SE") for lab in labels], kind="stable")  # the simulation first
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=6, loc="upper center",
              bbox_to_anchor=(0.5, -0.22), ncol=2)
    fig.suptitle(r"Bruno et al., Fig. 1: tokens against the closed form of the alignment phase, "
                 rf"$\beta={beta:g}$")
    return fig


def _density(ax, ds, k, theory_label):
    """The histogram of the angle at snapshot k as a density, on the heat mixture of Eq. (7) (theory style)."""
    width = float(ds.bin.values[1] - ds.bin.values[0])
    ax.bar(ds.bin.values, ds.histogram.values[k] / width, width=width, color="C0", alpha=0.55, label="tokens")
    heat = ds.heat_bins.values[k]
    if np.all(np.isfinite(heat)):
        ax.plot(ds.bin.values, heat / width, **THEORY, label=theory_label)
    ax.set(xlabel=AZIMUTH if ds.sizes["dim"] == 3 else r"angle $\theta$ (rad)", ylabel=LABELS["density"],
           xlim=(0, 2 * np.pi))
    ax.set_xticks([0, np.pi, 2 * np.pi], [r"$0$", r"$\pi$", r"$2\pi$"])


def _forward(ds: xr.Dataset):
    times = ds.time.values
    idx = _pick(times, np.linspace(0, times[-1], 4))
    fig, axes = panels(len(idx), width=2.6, height=2.5)
    width = float(ds.bin.values[1] - ds.bin.values[0])
    for ax, k in zip(axes, idx):
        _density(ax, ds, k, r"forward heat, Eq. (7)")
        ax.plot(ds.bin.values, ds.pde_bins.values[k] / width, color="C3", lw=1, label=r"mean-field PDE, finite $\beta$")
        ax.set_title(f"$t={times[k]:.3g}$")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=3)
    fig.suptitle(_title(ds, r", $Q=K=I$, $V=-I$"))
    return fig


def _clouds_and_histograms(ds: xr.Dataset):
    """Backward heat (Fig. 2) and three phases: the cloud over the azimuth histogram at chosen times."""
    sc_name, times = ds.attrs["scenario"], ds.time.values
    tc = float(ds.attrs["collapse_time"])
    wanted = [0, tc, 2.0, times[-1] / 10, times[-1]] if sc_name == "three-phases" else [0, tc / 2, tc, 1.0, times[-1]]
    idx = _pick(times, wanted)
    keep = _subsample(ds.sizes["token"])
    xs = ds.x.isel(row=0).values[:, keep]
    theta0 = _azimuth(xs[0])
    fig = plt.figure(figsize=(2.6 * len(idx) + 0.6, 5.2))
    scatters, spheres = [], []
    means = np.mod(ds.component_means.values, 2 * np.pi)
    legend = {}
    for c, k in enumerate(idx):
        sc = _sphere(fig, (2, len(idx), c + 1), xs[k], theta0, f"$t={times[k]:.3g}$")
        scatters.append(sc)
        spheres.append(sc.axes)
        ax = fig.add_subplot(2, len(idx), len(idx) + c + 1)
        _density(ax, ds, k, r"backward heat, Eq. (7)")
        if times[k] >= tc:
            for j, m in enumerate(means):  # and its copy at m + 2 pi: a mean at 0 shows at both ends
                for mm in (m, m + 2 * np.pi):
                    ax.axvline(mm, **{**THEORY, "linestyle": ":", "linewidth": 1.1},
                               label=r"collapse points $m_j$" if j == 0 and mm == m else None)
        ax.set_title(f"$t={times[k]:.3g}$" + (r" $\geq t_c$" if times[k] >= tc else ""))
        for h, lab in zip(*ax.get_legend_handles_labels()):
            legend.setdefault(lab, h)
    fig.legend(list(legend.values()), list(legend), loc="outside lower center", ncol=len(legend))
    _shared_colorbar(fig, scatters, spheres)
    fig.suptitle(_title(ds) + "\n" + rf"collapse of the narrowest component at $t_c=\beta v/2={tc:.3g}$")
    return fig


def _energy(ds: xr.Dataset, cfg: BrunoConfig):
    """Fig. 4: the interaction energy against log time with the three time scales; the cluster count; the closest
    pair's angle (tracked modes) on the pairing ODE from the tracked angle."""
    times, beta = ds.time.values, float(ds.attrs["beta"])
    t = times[1:]
    fig, axes = panels(3, width=3.0, height=2.7)
    marks = (("t_alignment", ":", r"alignment, $1/(\lambda_1-\lambda_3)$"),
             ("t_heat", "--", r"heat, $\beta v/2$"),
             ("t_pairing_two_point", "-.", "pairing, two-point ODE"),
             ("t_pairing", (0, (1, 4)), r"$e^{\beta(1-\cos\Delta\theta_{\min})}$"))
    for ax in axes:
        for name, ls, label in marks:
            if float(ds.attrs[name]) <= times[-1]:
                ax.axvline(float(ds.attrs[name]), color="0.45", lw=0.9, ls=ls, label=label)
        ax.set(xscale="log", xlabel=LABELS["time"])
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncol=4, title="time scales")
    ax = axes[0]
    ax.plot(t, ds.log_energy.isel(row=0).values[1:], "-", color="C3", marker="o", ms=3, label=r"tokens")
    ax.set(ylabel=r"$\log E_\beta$", title="(a) interaction energy")
    ax = axes[1]
    ax.step(t, ds.cluster_count.isel(row=0).values[1:], where="post", color="C0", label="tokens")
    ax.set(ylabel=r"clusters at angle $c\beta^{-1/2}$", title="(b) cluster count")
    ax.yaxis.set_major_locator(plt.MaxNLocator(integer=True))
    ax = axes[2]
    thr = cfg.cluster_c / math.sqrt(beta)
    ax.plot(t, ds.closest_pair_angle.values[1:], **SIMULATION, color="C0", label="tracked modes")
    if "closest_pair_angle_ode" in ds:
        ax.plot(ds.theory_time.values, ds.closest_pair_angle_ode.values, **THEORY, label="pairing ODE (Prop. 3.11)")
    ax.axhline(thr, color="C3", lw=0.8, label=r"threshold $c\beta^{-1/2}$")
    ax.set(ylabel="angle of the closest pair (rad)", title="(c) pairing", ylim=(0, None))
    handles, labels = ax.get_legend_handles_labels()
    data = [i for i, lab in enumerate(labels) if lab in ("tracked modes", "pairing ODE (Prop. 3.11)")
            or lab.startswith("threshold")]
    ax.legend([handles[i] for i in data], [labels[i] for i in data], fontsize=6, loc="center left")
    fig.suptitle(_title(ds, r", $Q^\top K=V=S$"))
    return fig


@paper_figure
def plot(ds: xr.Dataset, cfg: BrunoConfig):
    """The preset's figures, the paper's figure first."""
    sc = ds.attrs["scenario"]
    if sc == "alignment":
        return {"clouds": _alignment(ds), "closed-form": _closed_form(ds)}
    if sc == "forward-heat":
        return {"histograms": _forward(ds)}
    if sc == "three-phases":
        return {"energy": _energy(ds, cfg), "clouds": _clouds_and_histograms(ds)}
    return {"clouds": _clouds_and_histograms(ds)}
