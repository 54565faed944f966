"""Benchmark: the infinite-head attention kernel by randomised QMC against Monte Carlo covariance estimates of
finite-width networks reaching the same standard error.

On m sequences of s tokens (iid N(0, I_d) tokens, d = 16; default m = 64, s = 8: M = 512 tokens, M(M + 1)/2 =
131,328 distinct kernel entries) the script times :func:`attnlab.sakai.kernel.attention_kernel` (after compilation:
a first call of the same shapes compiles) and records the standard error of its entries (the spread of its QMC
replicates). The references, in the same process, estimate the same covariance by Monte Carlo over networks:

* ``brute_force``: :func:`attnlab.sakai.reference.sample_reference_stack`, every weight explicit (width n, H heads;
  default n = 1024, H = 16: the width at which ``sakai-kernel`` finds the finite-width covariance within its SE of
  the kernel), each network's Gram ``X X^T/n`` of its n output features;
* ``exact_sampler``: :func:`attnlab.sakai.joint.sample_network` (the same finite-width law without the width),
  each network's conditional covariance C.

Each reference's time per network (after compilation) and the per-network variance of every entry (from its
networks) give the networks, hence the time, it needs to reach the kernel's standard error entry by entry:
``N_ij = Var_ij / SE_ij^2``; its time is ``median_ij(N_ij) * time per network``. The ratio is that time over the
kernel's (equal numbers of entries, so it is also the ratio of entries per second). Each output line is one JSON
object; the last one holds ``ratio_vs_brute_force`` and ``ratio_vs_exact_sampler``.

    .venv/bin/python bench/kernel.py            # m = 64, s = 8, 2048 points x 8 replicates (minutes on 2 cores)
    .venv/bin/python bench/kernel.py --tiny     # m = 4, s = 4: checks that the script runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import jax
import numpy as np

from attnlab import runtime
from attnlab.sakai.joint import sample_network
from attnlab.sakai.kernel import attention_kernel, token_kernel
from attnlab.sakai.reference import sample_reference_stack

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache,
jax.config.update("jax_enable_x64", True)  # and float64 throughout, as the presets run


def _timed(fn, repeats: int = 1):
    """``fn()`` once to compile, then ``repeats`` timed calls: (last result, compile-and-first s, best run s)."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn(0))
    first = time.perf_counter() - t0
    best, result = math.inf, out
    for r in range(repeats):
        t0 = time.perf_counter()
        result = jax.block_until_ready(fn(r + 1))
        best = min(best, time.perf_counter() - t0)
    return result, first, best


def _reference(name, draw, n_networks: int, se, iu, env):
    """Time per network and the time to reach the kernel's SE entry by entry (median over the entries)."""
    G, first, t = _timed(lambda r: draw(jax.random.key(100 + r), n_networks))
    G = np.asarray(G)[:, iu[0], iu[1]]
    var = G.var(0, ddof=1)
    need = var / se**2
    per = t / n_networks
    row = {"name": f"{name}_covariance", "networks_timed": n_networks, "s_per_network": per,
           "compile_and_first_s": first, "networks_to_match_se_median": float(np.median(need)),
           "networks_to_match_se_p90": float(np.percentile(need, 90)),
           "time_to_match_se_s": float(np.median(need)) * per, **env}
    print(json.dumps(row), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiny", action="store_true", help="m = 4 sequences of s = 4 tokens, small sizes: a smoke run")
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--points", type=int, default=2048, help="Sobol points per QMC replicate")
    ap.add_argument("--replicates", type=int, default=8)
    ap.add_argument("--width", type=int, default=1024, help="width n of the reference networks")
    ap.add_argument("--heads", type=int, default=16, help="heads H of the reference networks")
    ap.add_argument("--brute-networks", type=int, default=6)
    ap.add_argument("--exact-networks", type=int, default=200)
    args = ap.parse_args()
    if args.tiny:
        args.sequences, args.tokens, args.points, args.replicates = 4, 4, 64, 4
        args.width, args.heads, args.brute_networks, args.exact_networks = 32, 2, 4, 200
    m, s, d = args.sequences, args.tokens, args.dim
    env = {"device": str(jax.devices()[0]), "jax": jax.__version__, "machine": platform.node(),
           "load_avg": os.getloadavg(), "note": "shared machine: timings are indicative"}
    U = np.asarray(jax.random.normal(jax.random.key(0), (m, s, d)))
    K = token_kernel(U)
    M = m * s
    iu = np.triu_indices(M)
    entries = iu[0].size

    kern, k_first, k_time = _timed(lambda r: attention_kernel(K, key=jax.random.key(r), n_tokens=s,
                                                              n_points=args.points,
                                                              n_replicates=args.replicates).replicates)
    reps = np.asarray(kern)
    se = (reps.std(0, ddof=1) / math.sqrt(reps.shape[0]))[iu]
    row = {"name": "attention_kernel", "params": {"m": m, "s": s, "d": d, "points": args.points,
                                                  "replicates": args.replicates},
           "entries": entries, "run_s": k_time, "compile_and_first_s": k_first, "entries_per_s": entries / k_time,
           "se_median": float(np.median(se)), "se_max": float(se.max()), **env}
    print(json.dumps(row), flush=True)

    params = {"n": args.width, "H": args.heads}
    brute = _reference("brute_force", lambda k, N: sample_reference_stack(k, U, n=args.width, n_heads=args.heads,
                                                                         n_samples=N)[1],
                       args.brute_networks, se, iu, {"params": params, **env})
    exact = _reference("exact_sampler", lambda k, N: sample_network(k, U, n=args.width, n_heads=args.heads,
                                                                    n_samples=N)[1],
                       args.exact_networks, se, iu, {"params": params, **env})
    ratio_brute = brute["time_to_match_se_s"] / k_time
    ratio_exact = exact["time_to_match_se_s"] / k_time
    print(json.dumps({"name": "kernel_summary", "ratio_vs_brute_force": ratio_brute,
                      "ratio_vs_exact_sampler": ratio_exact, "kernel_entries_per_s": entries / k_time,
                      "brute_force_entries_per_s": entries / brute["time_to_match_se_s"],
                      "exact_sampler_entries_per_s": entries / exact["time_to_match_se_s"],
                      "params": {"m": m, "s": s, "d": d, "n": args.width, "H": args.heads, "points": args.points,
                                 "replicates": args.replicates},
                      "size": "tiny" if args.tiny else "m64_s8", **env}))


if __name__ == "__main__":
    main()
