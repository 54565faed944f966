"""Benchmark of one step of the particle model (d = 3, SA): the blocked online-softmax kernel against dense attention.

Reports pair interactions per second (N^2 / time of one Euler step, best of a few repeats, after compilation),
for N in {1e4, 5e4}, float32 and float64; dense JAX attention (N x N softmax materialised) at N = 1e4 only (at
5e4 it needs 10 GB in float32); the peak resident memory of a float32 step at N = 1e5 in a fresh process.
The last line is a JSON object with ``ratio_vs_dense``, ``gpairs_per_s_n10000`` and ``peak_rss_gb_n100000``.

Usage: .venv/bin/python bench/particles.py [--quick]   (numbers are indicative on a shared machine)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

import attnlab  # noqa: F401  (float64)
from attnlab.particles.attention import attention, attention_dense
from attnlab.particles.init import uniform_sphere

EYE = jnp.eye(3)
BETA = 30.0


def _step_fn(kind, dtype, block_q=1024, block_k=2048):
    def step(x):
        if kind == "dense":
            xd = x.astype(dtype)
            eye = EYE.astype(dtype)
            a = attention_dense(xd, eye, eye, eye, BETA).astype(x.dtype)
        else:
            a = attention(x, EYE, EYE, EYE, BETA, block_q=block_q, block_k=block_k, dtype=dtype)
        y = x + 0.01 * a
        return y / jnp.linalg.norm(y, axis=1, keepdims=True)

    return jax.jit(step)


def time_step(n, kind, dtype, repeats=3, **blocks):
    x = uniform_sphere(jax.random.key(0), n, 3)
    f = _step_fn(kind, dtype, **blocks)
    f(x).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        f(x).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return best, n * n / best / 1e9


def peak_rss_gb(n):
    code = (f"import resource, jax, jax.numpy as jnp, sys; sys.path.insert(0, 'bench'); import particles as b; "
            f"t, r = b.time_step({n}, 'blocked', jnp.float32, repeats=1); "
            f"print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def main(quick=False):
    results = {}
    for n in ([10_000] if quick else [10_000, 50_000]):
        for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
            t, g = time_step(n, "blocked", dtype, repeats=3 if n <= 10_000 else 1)
            results[f"blocked_{name}_n{n}"] = g
            print(f"blocked {name:8s} N={n:6d}: {t * 1e3:9.1f} ms/step  {g:.3f} Gpairs/s", flush=True)
    for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
        t, g = time_step(10_000, "dense", dtype)
        results[f"dense_{name}_n10000"] = g
        print(f"dense   {name:8s} N= 10000: {t * 1e3:9.1f} ms/step  {g:.3f} Gpairs/s", flush=True)
    rss, t = peak_rss_gb(20_000 if quick else 100_000)
    print(f"peak RSS of a float32 step at N={20_000 if quick else 100_000}: {rss:.2f} GB ({t:.1f} s/step)")
    summary = {
        "ratio_vs_dense": results["blocked_float32_n10000"] / results["dense_float32_n10000"],
        "gpairs_per_s_n10000": results["blocked_float32_n10000"],
        "peak_rss_gb_n100000": None if quick else rss,
        **{k: round(v, 4) for k, v in results.items()},
        "backend": jax.default_backend(),
        "note": "shared machine: indicative numbers",
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
