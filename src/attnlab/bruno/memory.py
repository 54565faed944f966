"""Memory estimate of a bruno run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone. The attention kernels are blocked (1024 x 2048 scores at a time), so the
snapshots of the N tokens dominate."""

from __future__ import annotations

F64 = 8.0
BLOCK = 1024.0 * 2048.0


def memory_bytes(preset_name: str, config) -> float:
    c = config
    N, d = float(c.n_tokens), float(c.d)
    runs = 2.0 if c.V_b is not None else 1.0
    snapshots = float(max(len(c.times), c.n_snapshots)) + 2.0
    tokens = runs * N * d * snapshots
    scratch = runs * (4.0 * BLOCK + 16.0 * N * d)  # score blocks, integrator stages
    pde = float(c.pde_grid) ** 2 + float(c.n_sampling) * float(c.bins)
    return 2.0 * F64 * (tokens + scratch + pde + d * d * 8.0)
