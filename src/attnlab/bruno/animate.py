"""Animated GIF of a token cloud over the snapshots of a dataset (variable ``x`` with dims ([row,] time, token, dim))."""

from __future__ import annotations

import numpy as np

__all__ = ["animate"]


def animate(ds, path, *, max_tokens: int = 3000, run: int = 0, fps: int = 4) -> str:
    """Write an animated GIF of ``ds.x`` (S^1: angles on the circle; S^2: 3-D scatter) to ``path``; return the path."""
    from matplotlib.animation import FuncAnimation, PillowWriter

    from attnlab.plot import plt

    x = ds["x"]
    for dim in ("run", "row"):
        if dim in x.dims:
            x = x.isel({dim: run})
    xs = np.asarray(x.values)
    times = np.asarray(ds["time"].values)
    stride = max(1, -(-xs.shape[1] // max_tokens))
    xs = xs[:, ::stride]
    d = xs.shape[-1]
    fig = plt.figure(figsize=(4.5, 4.5))
    if d == 3:
        ax = fig.add_subplot(projection="3d")
        sc = ax.scatter(*xs[0].T, s=2, c=xs[0][:, 2], cmap="coolwarm", vmin=-1, vmax=1)
        ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1))
        ax.set_box_aspect((1, 1, 1))

        def update(k):
            sc._offsets3d = tuple(xs[k].T)
            ax.set_title(f"t = {times[k]:.3g}")
            return (sc,)
    else:
        ax = fig.add_subplot()
        sc = ax.scatter(xs[0][:, 0], xs[0][:, 1], s=2)
        ax.set(xlim=(-1.15, 1.15), ylim=(-1.15, 1.15), aspect="equal")

        def update(k):
            sc.set_offsets(xs[k][:, :2])
            ax.set_title(f"t = {times[k]:.3g}")
            return (sc,)

    anim = FuncAnimation(fig, update, frames=len(times), blit=False)
    anim.save(str(path), writer=PillowWriter(fps=fps))
    plt.close(fig)
    return str(path)
