"""Shared plotting helpers (matplotlib). Figures are saved as PNG and PDF. The backend is left to the user (the
command line and the sweep workers choose the file-only ``Agg``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plt", "band", "save_figure"]


def band(ax, x, Y, label=None, color=None, q=(2.5, 97.5), center="median"):
    """Plot the median (or mean) over axis 1 of ``Y`` (steps x repeats) with a percentile band (default 95%)."""
    Y = np.asarray(Y)
    mid = np.median(Y, axis=1) if center == "median" else np.mean(Y, axis=1)
    lo, hi = np.percentile(Y, q, axis=1)
    (line,) = ax.plot(x, mid, label=label, color=color)
    ax.fill_between(x, lo, hi, alpha=0.25, color=line.get_color(), linewidth=0)
    return line


def save_figure(fig, directory, name: str) -> list[str]:
    """Write ``name.png`` and ``name.pdf`` into ``directory``; return the file names."""
    files = []
    for ext in ("png", "pdf"):
        fig.savefig(f"{directory}/{name}.{ext}", dpi=120 if ext == "png" else None, bbox_inches="tight")
        files.append(f"{name}.{ext}")
    plt.close(fig)
    return files
