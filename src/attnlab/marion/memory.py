"""Memory estimate of a marion run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone."""

from __future__ import annotations

F64 = 8.0


def memory_bytes(preset_name: str, config) -> float:
    c = config
    if preset_name == "marion-toy-multihead":
        return _toy_multihead_bytes(c)
    d, L, R = float(c.d), float(c.L), float(c.n_repeats)
    logs = float(c.n_steps) / float(c.log_every) + 1.0
    trajectories = 12.0 * logs * R  # the logged overlaps and risks, (step, repeat)
    vectors = 4.0 * R * d  # k, v, k*, v* per repeat
    mc = float(c.n_mc) * L * d  # Monte Carlo sequences of the final iterate (and the Bayes risk, a fifth of them)
    full = 0.0
    if c.simulator == "full":  # vectors in R^d per repeat, a batch of sequences per SGD step, a test set
        full = R * (8.0 * d + float(c.batch_size) * L * d + (float(c.n_test) * L * d if c.algorithm == "sgd" else 0))
    elif c.algorithm == "sgd":
        full = R * float(c.n_test) * L  # reduced coordinates of the test set
    return 2.0 * F64 * (trajectories + vectors + mc + full)  # x2: temporaries of the same size


def _toy_multihead_bytes(c) -> float:
    """The two-head toy model: a block of updates' draws per run, the logged Gram matrices, the test sets, one chunk
    of Monte Carlo sequences in R^d and of full-vector updates."""
    n, R, L, d = 8.0, float(c.n_repeats), float(c.L), float(c.d)
    laws = 2.0 if c.paired else 1.0
    block = R * float(c.log_every) * (float(c.batch_size) * L * n + 60.0)
    logs = laws * (float(c.n_steps) / float(c.log_every) + 1.0) * R * (n * n + 40.0)
    tests = R * float(c.n_test) * L * n
    mc = 1000.0 * L * d + 500.0 * (float(c.batch_size) * L * d + 8.0 * d)
    return 2.0 * F64 * (block + logs + tests + mc)
