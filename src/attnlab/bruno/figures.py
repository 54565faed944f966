"""Figures of the Bruno et al. presets: token clouds on the sphere, angle histograms against the heat-kernel
prediction, alignment errors against the closed form and the interaction energy across the three phases."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from attnlab.plot import plt

if TYPE_CHECKING:
    from attnlab.bruno.presets import BrunoConfig

__all__ = ["plot"]


def _sphere_ax(fig, pos, x, title, max_tokens=3000):
    ax = fig.add_subplot(*pos, projection="3d")
    x = np.asarray(x)[:: max(1, -(-len(x) // max_tokens))]
    ax.scatter(x[:, 0], x[:, 1], x[:, 2], s=1, c=x[:, 2], cmap="coolwarm", vmin=-1, vmax=1)
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), title=title, xticks=[], yticks=[], zticks=[])
    ax.set_box_aspect((1, 1, 1))
    return ax


def _pick(times, wanted):
    return sorted({int(np.argmin(np.abs(times - w))) for w in wanted})


def plot(ds: xr.Dataset, cfg: BrunoConfig):
    """Token clouds at chosen times and the scenario's comparison with its reduced model."""
    sc, times = ds.attrs["scenario"], ds.time.values
    beta, n = ds.attrs["beta"], ds.attrs["n_tokens"]
    figs = {}
    head = f"{ds.attrs['paper']}: {sc}, N={n}, beta={beta:g} ([U, chosen] values: see preset docstring)"
    if sc == "alignment":
        idx = _pick(times, [0, 1, 3, 6, times[-1]])[:4]
        fig = plt.figure(figsize=(3.2 * len(idx), 3.2 * ds.sizes["row"]), layout="constrained")
        for r, row in enumerate(ds.row.values):
            for c, k in enumerate(idx):
                _sphere_ax(fig, (ds.sizes["row"], len(idx), r * len(idx) + c + 1), ds.x.sel(row=row).values[k],
                           f"({row}) t = {times[k]:.3g}")
        fig.suptitle(head + "; row (a): V = diag(1, .5, .25), row (b): rotation in the xy-plane", fontsize=8)
        figs["clouds"] = fig
        fig, ax = plt.subplots(figsize=(5, 3.5), layout="constrained")
        for row in ds.row.values:
            ax.plot(times[1:], ds.alignment_error.sel(row=row).values[1:], "o-", label=f"row ({row})")
        ax.set(xscale="log", yscale="log", xlabel="t", ylabel="mean angle to closed form (rad)",
               title="simulation vs normalize(e^{tV} x0)")
        ax.legend()
        figs["closed-form"] = fig
    elif sc == "forward-heat":
        idx = _pick(times, np.linspace(0, times[-1], 4))
        fig, axes = plt.subplots(1, len(idx), figsize=(4 * len(idx), 3.3), layout="constrained", squeeze=False)
        width = float(ds.bin.values[1] - ds.bin.values[0])
        for ax, k in zip(axes[0], idx):
            ax.bar(ds.bin.values, ds.histogram.values[k] / width, width=width, color="C0", alpha=0.6,
                   label="tokens")
            ax.plot(ds.bin.values, ds.heat_bins.values[k] / width, "r-", label="forward heat (Eq. 7)")
            ax.plot(ds.bin.values, ds.pde_bins.values[k] / width, "k--", lw=1, label="mean-field PDE, beta finite")
            ax.set(title=f"t = {times[k]:.3g}", xlabel="theta")
        axes[0, 0].legend(fontsize=7)
        fig.suptitle(head, fontsize=8)
        figs["histograms"] = fig
    else:
        tc = float(ds.attrs["collapse_time"])
        wanted = [0, tc, 2.0, times[-1] / 10, times[-1]] if sc == "three-phases" else [0, tc / 2, tc, 1.0, times[-1]]
        idx = _pick(times, wanted)
        fig = plt.figure(figsize=(3.2 * len(idx), 6.4), layout="constrained")
        width = float(ds.bin.values[1] - ds.bin.values[0])
        for c, k in enumerate(idx):
            _sphere_ax(fig, (2, len(idx), c + 1), ds.x.isel(row=0).values[k], f"t = {times[k]:.3g}")
            ax = fig.add_subplot(2, len(idx), len(idx) + c + 1)
            ax.bar(ds.bin.values, ds.histogram.values[k] / width, width=width, color="C0", alpha=0.6)
            if np.all(np.isfinite(ds.heat_bins.values[k])):
                ax.plot(ds.bin.values, ds.heat_bins.values[k] / width, "r-", label="backward heat (Eq. 7)")
            for m in np.mod(ds.component_means.values, 2 * np.pi):
                ax.axvline(m, color="k", lw=0.5, ls=":")
            ax.set(xlabel="azimuth", title=f"t = {times[k]:.3g}")
        fig.suptitle(head, fontsize=8)
        figs["clouds"] = fig
        if sc == "three-phases":
            fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
            ax.plot(times[1:], ds.log_energy.isel(row=0).values[1:], "r.-", label="log E_S")
            ax2 = ax.twinx()
            ax2.step(times[1:], ds.cluster_count.isel(row=0).values[1:], "k-", where="post", lw=0.8)
            ax2.set_ylabel("clusters")
            marks = (("t_alignment", ":", "alignment 1/(l1 - l3)"), ("t_heat", "--", "heat beta v/2"),
                     ("t_pairing_two_point", "-.", "pairing, two-point ODE"),
                     ("t_pairing", (0, (1, 4)), "e^{beta(1 - cos gap)}"))
            for name, ls, label in marks:
                if ds.attrs[name] <= times[-1]:
                    ax.axvline(ds.attrs[name], color="gray", ls=ls, label=label)
            ax.set(xscale="log", xlabel="t", ylabel="log interaction energy", title="three timescales")
            ax.legend(fontsize=7)
            figs["energy"] = fig
    return figs
