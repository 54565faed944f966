"""The figure style shared by every paper's figures (matplotlib), and the helpers they draw with.

Every preset's figure function is decorated with :func:`paper_figure`, which draws it under :data:`STYLE`
(Computer Modern mathtext, paper-sized fonts, constrained layout, frameless legends); :func:`save_figure` writes the
PNG and the vector PDF under the same style. Labels are mathtext in the papers' notation (:data:`LABELS`), so the
same symbol reads the same on every figure. A curve of data points (a simulation, a theory at the run's grid) is
styled through :func:`sparse`: under :data:`FEW_POINTS` points, markers and no joining line. The backend is left to
the user (the command line and the sweep workers choose the file-only ``Agg``); nothing here changes matplotlib's
global state. Importing this module does not import matplotlib: ``plt`` (``matplotlib.pyplot``) and each helper
import it when first used, so that a plugin's presets module can import the helpers and load without it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import matplotlib.pyplot as plt

__all__ = ["plt", "STYLE", "LABELS", "THEORY", "SIMULATION", "FEW_POINTS", "sparse", "style", "paper_figure", "panels",
           "band", "colorbar", "render_figure", "save_figure"]

STYLE = {
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 7.5,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "figure.titlesize": 9.5,
    "mathtext.fontset": "cm",
    "font.family": "serif",
    "font.serif": ["DejaVu Serif"],
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.4,
    "lines.markersize": 4,
    "legend.frameon": False,
    "legend.handlelength": 1.8,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 150,
}
"""The rcParams every attnlab figure is drawn and saved under."""

THEORY = {"color": "black", "linestyle": "--", "linewidth": 1.3}
"""Line style of a theory curve (closed form, fixed point, limit law) drawn over a simulation."""

SIMULATION = {"marker": "o", "markersize": 4, "linestyle": "none"}
"""Marker style of simulation points (with error bars where the simulation has repeats)."""

FEW_POINTS = 5
"""A data curve with fewer points than this is drawn as markers only (:func:`sparse`)."""


def sparse(style: dict, n_points: int) -> dict:
    """The style of a data curve of ``n_points`` points (a simulation, or a theory evaluated at the run's grid).

    With at least :data:`FEW_POINTS` points the curve is drawn as ``style`` says. With fewer, a joining line would
    suggest values between points that were never computed: the curve is drawn with markers and no line, its own
    marker if ``style`` has one, else an open diamond wide enough to ring a simulation marker. Reference lines
    (``axhline``, the diagonal, a closed form on a dense grid of its own) are not data curves and keep their lines.
    """
    if n_points >= FEW_POINTS:
        return style
    few = {k: v for k, v in style.items() if k != "ls"}
    few["linestyle"] = "none"
    if few.get("marker") in (None, "", "none", "None"):
        few["marker"] = "D"
        if "mfc" not in few:
            few["markerfacecolor"] = "none"
        if "ms" not in few:
            few["markersize"] = 7
    return few


LABELS = {
    "step": r"step $t$",
    "time": r"time $t$",
    "excess_risk": r"$\mathbb{E}(T(X)-y)^2-\varepsilon^2$",
    "risk": r"risk $\mathcal{R}$",
    "kappa": r"$\kappa$",
    "nu": r"$\nu$",
    "abs_kappa": r"$|\kappa|$",
    "abs_nu": r"$|\nu|$",
    "distance_to_manifold": r"$\mathrm{dist}(\theta_t, \mathcal{M})$",
    "alpha": r"$\alpha$",
    "lambda": r"$\lambda$",
    "width": r"width $n$",
    "heads": r"heads $H$",
    "density": "density",
}
"""Mathtext labels in the papers' notation, shared by the figures of all papers."""


def __getattr__(name: str):
    if name == "plt":
        import matplotlib.pyplot

        return matplotlib.pyplot
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def style():
    """A context in which matplotlib draws with :data:`STYLE` (``plt.rc_context``); restores the rcParams after."""
    import matplotlib

    return matplotlib.rc_context(STYLE)


def paper_figure(fn):
    """Decorate a figure function ``plot(dataset, config) -> {name: Figure}`` to draw under :data:`STYLE`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with style():
            return fn(*args, **kwargs)

    return wrapper


def panels(ncols: int, nrows: int = 1, *, width: float = 3.0, height: float = 2.6, **kwargs):
    """``plt.subplots`` with each panel ``width`` x ``height`` inches (a paper's column is about 3.3 in); returns
    ``(fig, axes)`` with ``axes`` always a flat array."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
    return fig, axes.ravel()


def band(ax, x, Y, label=None, color=None, q=(2.5, 97.5), center="median"):
    """Plot the median (or mean) over axis 1 of ``Y`` (steps x repeats) with a percentile band (default 95%)."""
    Y = np.asarray(Y)
    mid = np.median(Y, axis=1) if center == "median" else np.mean(Y, axis=1)
    lo, hi = np.percentile(Y, q, axis=1)
    (line,) = ax.plot(x, mid, label=label, color=color)
    ax.fill_between(x, lo, hi, alpha=0.25, color=line.get_color(), linewidth=0)
    return line


def colorbar(fig, mappable, ax, label: str):
    """A colour bar beside ``ax`` for ``mappable``, labelled (every colour-coded panel has one)."""
    cb = fig.colorbar(mappable, ax=ax, pad=0.02, fraction=0.06)
    cb.set_label(label)
    return cb


def render_figure(fig) -> dict[str, bytes]:
    """The PNG (``savefig.dpi`` of :data:`STYLE`) and the vector PDF of ``fig``, each cropped to the figure's tight
    bounding box (``bbox_inches="tight"``), as bytes keyed by extension, drawn under :data:`STYLE`.

    The layout is solved and the figure drawn once, by Agg for the PNG, whose pixels are cropped to the tight box
    that draw gives; the PDF is then drawn once with that layout and box. ``savefig(bbox_inches="tight")`` would
    draw each format twice (a dry run for the layout and the box, then the file): four draws instead of two. Where
    the box reaches beyond the figure (an artist placed outside it) the PNG is written by ``savefig`` with the box.
    The figure's canvas, dpi and layout engine are restored.
    """
    import io

    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    out = {}
    canvas, dpi, engine = fig.canvas, fig.dpi, fig.get_layout_engine()
    with style():
        save_dpi, pad = matplotlib.rcParams["savefig.dpi"], matplotlib.rcParams["savefig.pad_inches"]
        try:
            agg = FigureCanvasAgg(fig)
            fig.dpi = save_dpi
            agg.draw()
            tight = fig.get_tightbbox(agg.get_renderer())
            box = tight.padded(pad)
            # the layout the Agg draw solved holds for both files: no engine, so that savefig draws once (with a
            # place-holder engine, which is what set_layout_engine("none") leaves, it would first draw a dry run)
            fig._layout_engine = None
            buf = io.BytesIO()
            w, h = fig.get_size_inches()
            if tight.x0 >= 0 and tight.y0 >= 0 and tight.x1 <= w and tight.y1 <= h:
                # every artist inside the figure: the file is the drawn pixels within the box, the figure's face
                # colour beyond its edge (as savefig, which widens the figure to the box)
                pixels = np.asarray(agg.buffer_rgba())
                height, width = pixels.shape[:2]
                x0, y0, x1, y1 = (box.extents * save_dpi).tolist()
                left, top = round(x0), height - round(y1)
                right, bottom = left + int(x1 - x0), top + int(y1 - y0)  # savefig's size: the box's, truncated
                face = np.round(np.array(matplotlib.colors.to_rgba(fig.get_facecolor())) * 255).astype(np.uint8)
                image = np.empty((bottom - top, right - left, 4), np.uint8)
                image[...] = face
                image[max(0, -top):min(bottom, height) - top, max(0, -left):min(right, width) - left] = \
                    pixels[max(0, top):min(bottom, height), max(0, left):min(right, width)]
                Image.fromarray(image).save(buf, format="png", dpi=(save_dpi, save_dpi))
            else:
                fig.savefig(buf, format="png", dpi=save_dpi, bbox_inches=box)
            out["png"] = buf.getvalue()
            buf = io.BytesIO()
            fig.savefig(buf, format="pdf", bbox_inches=box)
            out["pdf"] = buf.getvalue()
        finally:
            fig.set_canvas(canvas)
            fig.dpi = dpi
            fig._layout_engine = engine  # as it was (set_layout_engine(None) would choose one from the rcParams)
    return out


def save_figure(fig, directory, name: str) -> list[str]:
    """Write ``name.png`` and ``name.pdf`` (vector) into ``directory`` under :data:`STYLE` (:func:`render_figure`);
    close the figure; return the file names."""
    import matplotlib.pyplot as plt

    files = []
    try:
        for ext, data in render_figure(fig).items():
            with open(f"{directory}/{name}.{ext}", "wb") as f:
                f.write(data)
            files.append(f"{name}.{ext}")
    finally:
        plt.close(fig)
    return files
