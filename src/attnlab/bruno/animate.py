"""Animated GIF of a token cloud over the snapshots of a dataset (variable ``x`` with dims ([row,] time, token, dim))."""

from __future__ import annotations

import numpy as np

__all__ = ["animate"]


def animate(ds, path, *, max_tokens: int = 3000, run: int = 0, fps: int = 4, dpi: int = 100) -> str:
    """Write an animated GIF of ``ds.x`` (S^1: the tokens on the circle; S^2: 3-D scatter) to ``path``, tokens
    coloured by their initial angle (azimuth on S^2) with a labelled colour bar, ``dpi`` pixels per inch (a GIF for
    a screen); return the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    from attnlab.plot import colorbar, plt, style

    x = ds["x"]
    for dim in ("run", "row"):
        if dim in x.dims:
            x = x.isel({dim: run})
    xs = np.asarray(x.values)
    times = np.asarray(ds["time"].values)
    stride = max(1, -(-xs.shape[1] // max_tokens))
    xs = xs[:, ::stride]
    d = xs.shape[-1]
    theta0 = np.mod(np.arctan2(xs[0][:, 1], xs[0][:, 0]), 2 * np.pi)
    colours = {"c": theta0, "cmap": "twilight", "vmin": 0, "vmax": 2 * np.pi}
    with style():
        fig = plt.figure(figsize=(4.8, 4.2))
        if d == 3:
            ax = fig.add_subplot(projection="3d")
            sc = ax.scatter(*xs[0].T, s=2, depthshade=False, linewidths=0, **colours)
            ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1), xlabel=r"$x_1$", ylabel=r"$x_2$", zlabel=r"$x_3$",
                   xticks=[-1, 0, 1], yticks=[-1, 0, 1], zticks=[-1, 0, 1])
            ax.set_box_aspect((1, 1, 1), zoom=0.9)  # room for the z label beside the colour bar

            def update(k):
                sc._offsets3d = tuple(xs[k].T)
                ax.set_title(f"$t={times[k]:.3g}$")
                return (sc,)
        else:
            ax = fig.add_subplot()
            sc = ax.scatter(xs[0][:, 0], xs[0][:, 1], s=2, linewidths=0, **colours)
            ax.set(xlim=(-1.15, 1.15), ylim=(-1.15, 1.15), aspect="equal", xlabel=r"$x_1$", ylabel=r"$x_2$")

            def update(k):
                sc.set_offsets(xs[k][:, :2])
                ax.set_title(f"$t={times[k]:.3g}$")
                return (sc,)

        cb = colorbar(fig, sc, ax, r"initial azimuth $\theta_0$ (rad)" if d == 3 else r"initial angle $\theta_0$ (rad)")
        cb.set_ticks([0, np.pi, 2 * np.pi], labels=[r"$0$", r"$\pi$", r"$2\pi$"])
        # the frames differ only in their points and title: the rest (layout solved on the first frame, axes, colour
        # bar) is drawn once and each frame draws the two on a copy of it (blitting; a GIF writer would draw the
        # whole figure, a 3-D axes included, for every frame)
        canvas = FigureCanvasAgg(fig)
        fig.dpi = dpi
        update(0)
        canvas.draw()  # the layout, solved with the points and title in place
        fig.set_layout_engine("none")
        sc.set_animated(True)
        ax.title.set_animated(True)
        canvas.draw()  # the background: everything but the points and title
        background = canvas.copy_from_bbox(fig.bbox)
        frames = []
        for k in range(len(times)):
            canvas.restore_region(background)
            update(k)
            if d == 3:
                sc.do_3d_projection()
            ax.draw_artist(sc)
            ax.draw_artist(ax.title)
            # opaque frames as RGB (as matplotlib's GIF writer): their conversion to a palette keeps the colours
            frames.append(Image.fromarray(np.asarray(canvas.buffer_rgba())[..., :3].copy()))
        frames[0].save(str(path), save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    plt.close(fig)
    return str(path)
