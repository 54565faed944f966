"""Memory estimate of a sakai run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone. The exact samplers cost nothing in the width (they work on s x s factors, in
chunks of about 2^22 floats); ReLU inputs are drawn explicitly (s x n per network)."""

from __future__ import annotations

F64 = 8.0
CHUNK = float(1 << 22)


def memory_bytes(preset_name: str, config) -> float:
    if preset_name.startswith("sakai-kernel"):
        return kernel_memory_bytes(preset_name, config)
    c = config
    s, H = float(c.n_tokens), float(max(c.n_heads))
    configs = float(len(c.width) * len(c.n_heads) + 2)
    samples = float(c.n_seeds) * configs * float(c.n_samples) * 2.0  # (y, v) per network
    chunk = 4.0 * CHUNK + s * s * s * H * 8.0
    if c.input_activation == "relu":
        chunk += 4.0 * s * float(max(c.width))
    reference = float(c.n_reference) * s * s * 4.0 + float(c.reference_width) * s * 4.0
    distances = float(c.n_boot) * float(c.n_samples) + float(c.kde_points) * float(c.n_samples) / 8.0
    return 2.0 * F64 * (samples + chunk + reference + distances)


def kernel_memory_bytes(preset_name: str, config) -> float:
    """``sakai-kernel`` (and ``sakai-kernel-regression``): the M x M conditional covariances of the draws (M = m s
    tokens) held per width or H, the exact sampler's chunk (about 2^22 floats, plus its M x n pre-activations of the
    ReLU layer of the stack), the QMC point sets (R n_points 4 s^2) and their per-pair intermediates, and the
    brute-force networks (4 n^2 weights per head, the heads one at a time)."""
    c = config
    if preset_name == "sakai-kernel-regression":
        from attnlab.sakai.regression import memory_bytes as regression_memory

        return regression_memory(c)
    M = float(c.n_sequences * c.n_tokens)
    n_max = float(max(c.widths))
    draws = float(max(c.n_networks, c.n_limit, c.n_stack)) * M * M * 3.0  # C of the finite and limit draws, products
    chunk = 4.0 * CHUNK + 64.0 * M * (n_max + 8.0 * max(c.heads) * M)
    qmc = float(c.n_points) * c.n_tokens**2 * (12.0 * float(c.n_replicates) + 384.0)
    brute = 4.0 * float(c.reference_width) ** 2 * 2.0 + float(c.n_reference) * M * M
    return 2.0 * F64 * (draws + chunk + qmc + brute)
