"""Benchmark of one step of the particle model (d = 3, SA, beta = 30): the blocked kernels, dense attention, SDPA.

The references: dense JAX attention (the N x N softmax) and, where PyTorch is installed, its SDPA (the paper's method).

Reports pair interactions per second (N^2 / wall time of one Euler step, after compilation; best of 10-15 repeats
at N = 1e4, of 2 at 5e4)
for N in {1e4, 5e4}, float32 and float64, with the default kernel (``method="auto"``: in float32 on CPU the C kernel of
attnlab/bruno/native.py, one exponential per unordered pair; in float64 the a-priori-shift JAX kernel, see
attnlab/bruno/attention.py); the JAX kernels alone (``method="jax"``), the online-softmax kernel
(``method="online"``) and dense JAX attention (N x N softmax materialised) at N = 1e4 only (dense at 5e4 needs 10 GB
in float32); the peak resident memory of a float32 step at N = 1e5 in a fresh process. Because the machine may be
shared, each line also gives pairs per CPU-second
(N^2 / process CPU time of the same step, all threads; on an idle machine with c cores the wall rate can reach up to
c times that), and the JSON records the 1-minute load average before and after. The last line is a JSON object with
``ratio_vs_dense``, ``gpairs_per_s_n10000``, ``peak_rss_gb_n100000``, the C kernel's vector width, the CPU's exponential
throughput bound (a tight loop of the kernel's own vector exp2 on every thread, ``exp2_bound_g_per_s``) and the pair
rate over that bound (``pair_rate_over_exp_bound``).

Where PyTorch is installed (``pip install torch``; not a dependency of attnlab), the paper's own computation runs
beside it in the same process: Bruno et al.'s step with ``torch.nn.functional.scaled_dot_product_attention`` on the
same float32 tokens, PyTorch's dispatch, unpadded and zero-padded to head dimension 8 (the faster one counts),
alternating with attnlab's float32 step, best of the same number of repeats at N = 1e4 and 5e4
(``ratio_vs_sdpa_n10000``, ``ratio_vs_sdpa_n50000``); without PyTorch these read "not measured".

Usage: .venv/bin/python bench/particles.py [--quick]   (numbers are indicative on a shared machine)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

from attnlab import runtime
from attnlab.bruno import native
from attnlab.bruno.attention import attention, attention_dense
from attnlab.bruno.initial import uniform_sphere

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache,
jax.config.update("jax_enable_x64", True)  # and float64 throughout, as the presets run

EYE = jnp.eye(3)
BETA = 30.0


def _step_fn(kind, dtype, block_q=1024, block_k=2048):
    def step(x):
        if kind == "dense":
            xd = x.astype(dtype)
            eye = EYE.astype(dtype)
            a = attention_dense(xd, eye, eye, eye, BETA).astype(x.dtype)
        else:
            method = "auto" if kind == "blocked" else kind  # "blocked": the default (C kernel where it applies)
            a = attention(x, EYE, EYE, EYE, BETA, block_q=block_q, block_k=block_k, dtype=dtype, method=method)
        y = x + 0.01 * a
        return y / jnp.linalg.norm(y, axis=1, keepdims=True)

    return jax.jit(step)


def time_step(n, kind, dtype, repeats=10, **blocks):
    x = uniform_sphere(jax.random.key(0), n, 3)
    f = _step_fn(kind, dtype, **blocks)
    f(x).block_until_ready()
    best = best_cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f(x).block_until_ready()
        best, best_cpu = min(best, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
    return best, n * n / best / 1e9, n * n / best_cpu / 1e9


def sdpa_step(n, pad: int):
    """Bruno et al.'s step in PyTorch on attnlab's float32 tokens: ``x + dt SDPA(x, x, x, scale=beta)``, projected
    back onto the sphere; ``pad`` zero-pads the head dimension (0: unpadded)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    x = torch.from_numpy(np.asarray(uniform_sphere(jax.random.key(0), n, 3), np.float32))

    def step():
        with torch.no_grad():
            q = x[None, None] if not pad else F.pad(x[None, None], (0, pad - 3))
            a = F.scaled_dot_product_attention(q, q, q, scale=BETA)[0, 0, :, :3]
            y = x + 0.01 * a
            return y / torch.linalg.norm(y, dim=1, keepdim=True)

    return step


def alternate_with_sdpa(n, repeats):
    """attnlab's float32 step and the SDPA step (unpadded and padded to 8), one after the other ``repeats`` times
    in this process; the best wall time of each, and the pair rates (10^9 pairs/s)."""
    ours = _step_fn("blocked", jnp.float32)
    x = uniform_sphere(jax.random.key(0), n, 3)
    ours(x).block_until_ready()
    theirs = {f"pad{pad}" if pad else "d3": sdpa_step(n, pad) for pad in (0, 8)}
    for f in theirs.values():
        f()
    best = dict.fromkeys(["attnlab", *theirs], float("inf"))
    for _ in range(repeats):
        t0 = time.perf_counter()
        ours(x).block_until_ready()
        best["attnlab"] = min(best["attnlab"], time.perf_counter() - t0)
        for name, f in theirs.items():
            t0 = time.perf_counter()
            f()
            best[name] = min(best[name], time.perf_counter() - t0)
    rates = {name: n * n / t / 1e9 for name, t in best.items()}
    # the same step: the largest coordinate difference of the two new token sets (float32 round-off, ~1e-7)
    mine = jax.device_get(ours(x))
    rates["max_abs_diff"] = max(float(abs(f().numpy() - mine).max()) for f in theirs.values())
    return rates


def peak_rss_gb(n):
    code = (f"import resource, jax, jax.numpy as jnp, sys; sys.path.insert(0, 'bench'); import particles as b; "
            f"t, r, c = b.time_step({n}, 'blocked', jnp.float32, repeats=1); "
            f"print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, t)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def _report(results, kind, name, n, t, g, c):
    results[f"{kind}_{name}_n{n}"] = g
    results[f"{kind}_{name}_n{n}_per_cpu_s"] = c
    print(f"{kind:7s} {name:8s} N={n:6d}: {t * 1e3:9.1f} ms/step  {g:.3f} Gpairs/s  ({c:.3f} per CPU-second)",
          flush=True)


def main(quick=False):
    load_before = os.getloadavg()[0]
    results = {}
    for n in ([10_000] if quick else [10_000, 50_000]):
        for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
            _report(results, "blocked", name, n, *time_step(n, "blocked", dtype, repeats=15 if n <= 10_000 else 2))
    # the same best-of-15 at N = 1e4 for every kernel
    _report(results, "jax", "float32", 10_000, *time_step(10_000, "jax", jnp.float32, repeats=15))
    _report(results, "online", "float32", 10_000, *time_step(10_000, "online", jnp.float32, repeats=15))
    for name, dtype in (("float32", jnp.float32), ("float64", jnp.float64)):
        _report(results, "dense", name, 10_000, *time_step(10_000, "dense", dtype, repeats=15))
    # the CPU's exponential throughput bound: a tight loop of the kernel's own vector exp2, same width and threads
    exp_bound = max(native.exp2_per_second() for _ in range(3)) / 1e9 if native.available() else None
    if exp_bound is not None:
        print(f"exp2 throughput bound: {exp_bound:.3f} G/s ({native.vector_bits()}-bit vectors); the kernel's pair "
              f"rate is {results['blocked_float32_n10000'] / exp_bound:.2f} of it", flush=True)
    sdpa, sdpa_sizes = {}, ([10_000] if quick else [10_000, 50_000])
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(os.cpu_count())
        for n in sdpa_sizes:
            reps = 10 if n <= 10_000 else 2
            rates = alternate_with_sdpa(n, reps)
            best = max(("d3", "pad8"), key=rates.get)
            sdpa[n] = {"attnlab": rates["attnlab"], "sdpa": rates[best], "sdpa_form": best,
                       "sdpa_d3": rates["d3"], "sdpa_pad8": rates["pad8"], "max_abs_diff": rates["max_abs_diff"]}
            print(f"SDPA (PyTorch {torch.__version__}, {torch.get_num_threads()} threads) N={n}: unpadded "
                  f"{rates['d3']:.3f}, padded to 8 {rates['pad8']:.3f} Gpairs/s; attnlab alternating with it "
                  f"{rates['attnlab']:.3f}: {rates['attnlab'] / rates[best]:.2f}x (new tokens differ by at most "
                  f"{rates['max_abs_diff']:.1e})", flush=True)
    rss, t = peak_rss_gb(20_000 if quick else 100_000)
    print(f"peak RSS of a float32 step at N={20_000 if quick else 100_000}: {rss:.2f} GB ({t:.1f} s/step)")
    summary = {
        "ratio_vs_dense": results["blocked_float32_n10000"] / results["dense_float32_n10000"],
        "gpairs_per_s_n10000": results["blocked_float32_n10000"],
        "peak_rss_gb_n100000": None if quick else rss,
        **{f"ratio_vs_sdpa_n{n}": sdpa[n]["attnlab"] / sdpa[n]["sdpa"] if n in sdpa
           else "not measured: PyTorch is not installed" for n in sdpa_sizes},
        "sdpa": {str(n): v for n, v in sdpa.items()} or None,
        "torch": None if torch is None else torch.__version__,
        **{k: round(v, 4) for k, v in results.items()},
        "native_kernel": native.available() or native.unavailable_reason(),
        "native_vector_bits": native.vector_bits(),
        "exp2_bound_g_per_s": exp_bound,
        # pair interactions per second over exponentials per second: a kernel with one exponential per ordered pair
        # reaches at most 1; the symmetric kernel, one exponential per unordered pair, could reach 2
        "pair_rate_over_exp_bound": None if exp_bound is None else results["blocked_float32_n10000"] / exp_bound,
        "backend": jax.default_backend(),
        "cpu_count": os.cpu_count(),
        "loadavg_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "note": "shared machine: indicative numbers",
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
