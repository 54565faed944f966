"""Benchmark of one Euler step of the forward-heat preset's particle model (its config: d = 2, SA, beta = 50,
Q = K = I, V = -I, three wrapped normals): the exact Fourier sums of attnlab/bruno/circle.py against the blocked kernels.

The references, in the same process on the same tokens: the default kernel in float32 (``method="auto"``: on a CPU
the C kernel of attnlab/bruno/native.py, which the preset used before) and the float64 JAX kernel (``method="jax"``).
Each is timed as the best of ``--repeats`` calls of ``simulate`` over 10 steps, after compilation, at N = 1e4 and 5e4. The
step of the circle sums is also compared with the float64 kernel's (largest difference of the stepped tokens).

Last line: one JSON object with ``ratio_vs_native_f32_n50000`` and ``ratio_vs_jax_f64_n50000`` (the kernels' step
time over the circle sums'; above 1: the circle sums are faster), the same at N = 1e4, the times per step and the
largest difference.

    .venv/bin/python bench/circle.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import jax

    from attnlab import runtime

    runtime.configure()
    jax.config.update("jax_enable_x64", True)
    from attnlab import resolve_config
    from attnlab.bruno import initial
    from attnlab.bruno.integrate import make_model, simulate

    cfg = resolve_config("bruno-forward-heat")  # the preset's beta, V, mixture and dt
    steps = 10
    V, beta = cfg.matrix("V"), cfg.beta
    models = {"circle": make_model(2, None, None, V, beta, kernel_method="circle"),
              "native_f32": make_model(2, None, None, V, beta, kernel_dtype="float32", kernel_method="auto"),
              "jax_f64": make_model(2, None, None, V, beta, kernel_method="jax")}
    out: dict = {"load_average_before": os.getloadavg()[0], "steps_per_call": steps}
    for n in (10_000, 50_000):
        x = initial.wrapped_normal_mixture(jax.random.key(0), n, cfg.means, cfg.weights, cfg.variance)
        ends = {}
        for name, m in models.items():
            ends[name] = simulate(x, m, [steps * cfg.dt], cfg.dt)[0][-1]  # compiled here
            best = np.inf
            for _ in range(args.repeats):
                t = time.perf_counter()
                simulate(x, m, [steps * cfg.dt], cfg.dt)
                best = min(best, time.perf_counter() - t)
            out[f"{name}_step_s_n{n}"] = best / steps
            print(f"N = {n}: {name} {best / steps * 1e3:.2f} ms per step", flush=True)
        out[f"ratio_vs_native_f32_n{n}"] = out[f"native_f32_step_s_n{n}"] / out[f"circle_step_s_n{n}"]
        out[f"ratio_vs_jax_f64_n{n}"] = out[f"jax_f64_step_s_n{n}"] / out[f"circle_step_s_n{n}"]
        out[f"max_difference_vs_jax_f64_n{n}"] = float(np.max(np.abs(ends["circle"] - ends["jax_f64"])))
    out["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
