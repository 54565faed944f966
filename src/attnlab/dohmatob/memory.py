"""Memory estimate of a dohmatob run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone."""

from __future__ import annotations

F64 = 8.0


def memory_bytes(preset_name: str, config) -> float:
    c = config
    if preset_name == "dohmatob-rgd":
        R, L, d = float(c.n_repeats), float(c.L), float(c.d)
        links = float(len(c.links))
        points = R * links * 16.0  # final iterates: repeats x links x starts
        # training and R^d test tokens of every repeat (vmapped); the in-frame draws (test set, the Monte Carlo at
        # d_check) hold O(n L) coordinates per point, whatever the dimension; the logged trajectories
        tokens = R * (float(c.n_train) + float(c.n_test_rd)) * L * d
        in_frame = (float(c.n_test) + float(c.n_mc_check)) * L * 4.0 * R * links
        logs = points * 8.0 * (float(c.n_steps) / float(c.log_every) + 1.0)
        return 2.0 * F64 * (tokens + in_frame + logs)
    if preset_name == "dohmatob-flow":
        starts = float(c.n_grid) ** 2 * float(len(c.links))
        # trajectories of the phase portrait; in-frame Monte Carlo (O(n L) coordinates) per stationary point (a few)
        return 2.0 * F64 * (starts * float(c.n_times) * 16.0 + float(c.n_mc) * float(c.L) * 4.0 * 16.0)
    if preset_name == "dohmatob-phase-diagram":
        grid = float(c.n_gamma) * float(c.n_alpha) * float(c.d)
        mc = float(c.n_mc) * float(max(c.L_mc)) * 8.0 * float(len(c.gammas_mc))  # in-frame Monte Carlo
        return 2.0 * F64 * (grid + mc)
    return None
