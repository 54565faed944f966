"""Memory estimate of a duranthon run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone."""

from __future__ import annotations

import math

F64 = 8.0


def memory_bytes(preset_name: str, config) -> float:
    c = config
    if preset_name == "duranthon-population":
        L = float(max(c.Ls))
        mc = float(c.n_mc) * L * 8.0 * float(len(c.activations)) * float(len(c.models))
        return 2.0 * F64 * (mc + float(c.n_check) * L * float(c.D_check))
    if preset_name == "duranthon-activations":
        return 2.0 * F64 * float(c.n_mc) * 16.0 * float(len(c.activations))
    if preset_name in ("duranthon-sample-complexity", "duranthon-low-snr"):
        alphas = [float(a) for a in c.alphas]
        L, s = float(c.L), float(c.sqrt_ND)
        # per alpha: D = sqrt_ND / sqrt(alpha) dimensions, N = sqrt_ND sqrt(alpha) training sequences, plus the
        # test sequences, for every frozen set; the replica samples and the Monte Carlo of the test-error formula
        data = max((s * math.sqrt(a) + float(c.n_test)) * L * (s / math.sqrt(a)) for a in alphas) * float(c.n_sets)
        replica = float(c.n_replica) * float(c.n_replica) + float(c.n_risk) * L * 16.0
        return 4.0 * F64 * (data + replica)
    if preset_name == "duranthon-gd-landscape":
        # per training set: its tokens, the test and fresh sequences (L x D each), the runs' trajectories; the
        # replica samples and the Monte Carlo of the test-error formula
        L, D = float(c.L), float(c.D)
        N = max(float(p[0]) for p in c.points) * D
        runs = 2.0 * float(c.n_starts) + 2.0
        data = (N + float(c.n_test) + float(c.n_fresh)) * L * D + runs * (2.0 * D + (float(c.n_logs) + 1) * 8.0)
        data += runs * float(c.n_test)  # squared errors of every run on the test set
        replica = float(c.n_replica) * float(c.n_replica) + float(c.n_risk) * L * 16.0
        return 4.0 * F64 * (data + replica)
    return None
