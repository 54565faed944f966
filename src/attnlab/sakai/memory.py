"""Memory estimate of a sakai run (see :mod:`attnlab.app.resources`): a cheap upper bound, in bytes, of its
largest arrays, from the config alone. The exact samplers cost nothing in the width (they work on s x s factors, in
chunks of about 2^22 floats); ReLU inputs are drawn explicitly (s x n per network)."""

from __future__ import annotations

F64 = 8.0
CHUNK = float(1 << 22)


def memory_bytes(preset_name: str, config) -> float:
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
