"""Benchmark: how large an ERM simulation of Duranthon et al. this machine reaches, and how the gap to the replica
prediction closes with size, for sqrt(N D) up to 10^4 where the machine allows.

Setting: softmax attention on spiked-SLR, nu = 5, L = 2, lambda_k = lambda_v = 1 (high signal, high regularisation:
the proximal problems are convex and the replica-symmetric fixed point is stable), alpha = N/D = 1 by default.
For each size sqrt(N D) the script runs :func:`attnlab.duranthon.sample_complexity.theory_vs_simulation` (the code of the
``duranthon-sample-complexity`` preset): the replica fixed point on frozen sample sets (independent of the size) and
``n_seeds`` L-BFGS fits in float64 from the informed start at ``D = sqrt(N D)/sqrt(alpha)``, ``N = alpha D``, each
with its test error on a fresh set of ``n_test`` sequences.

Prints one row per size (D, N, ERM test error with its SE over seeds, the replica's, the gap in SEs, the wall time,
the process's peak resident memory so far) and, as its last line, a JSON object with the largest size reached and
its gap. Sizes run in increasing order; a size that fails (for example out of memory) ends the run and is reported.

    .venv/bin/python bench/erm_scale.py [--sizes 500 1000 2000 5000 10000] [--alpha 1] [--seeds 3]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time

import jax
import numpy as np

from attnlab.duranthon.sample_complexity import theory_vs_simulation
from attnlab.runtime import x64


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=float, nargs="+", default=[500, 1000, 2000, 5000, 10000])
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--nu", type=float, default=5.0)
    ap.add_argument("--L", type=int, default=2)
    ap.add_argument("--lam", type=float, default=1.0)
    ap.add_argument("--n-test", type=int, default=4000)
    args = ap.parse_args()

    rows, reached = [], None
    print(f"{'sqrt(ND)':>9} {'D':>6} {'N':>6} {'ERM test':>9} {'+- SE':>7} {'replica':>8} {'gap':>8} {'gap/SE':>7} "
          f"{'wall s':>7} {'peak GB':>8}")
    for size in sorted(args.sizes):
        t = time.perf_counter()
        try:
            ds = theory_vs_simulation(jax.random.key(0), "spiked", args.nu, args.L, [args.alpha], args.lam, args.lam,
                                      activations=("softmax",), n_replica=1500, n_sets=2, sqrt_ND=size,
                                      n_seeds=args.seeds, n_test=args.n_test)
        except Exception as e:  # noqa: BLE001  (report where the machine stops)
            print(f"{size:9.0f}  failed: {type(e).__name__}: {e}")
            break
        wall = time.perf_counter() - t
        sim = ds.sim_test_error.values[0, 0]
        erm, se = float(np.mean(sim)), float(np.std(sim, ddof=1) / math.sqrt(sim.size))
        rep = float(ds.replica_test_error.values[0, 0])
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB -> GB
        row = {"sqrt_ND": size, "D": int(ds.D.values[0]), "N": int(ds.N.values[0]), "erm_test": erm, "erm_se": se,
               "replica_test": rep, "gap": erm - rep, "gap_in_se": (erm - rep) / se, "wall_s": wall,
               "peak_rss_gb": peak, "replica_converged": bool(ds.replica_converged.values.all()),
               "erm_unconverged_fits": int((~ds.sim_converged.values).sum())}
        rows.append(row)
        reached = row
        print(f"{size:9.0f} {row['D']:6d} {row['N']:6d} {erm:9.4f} {se:7.4f} {rep:8.4f} {erm - rep:8.4f} "
              f"{row['gap_in_se']:7.2f} {wall:7.1f} {peak:8.2f}", flush=True)
    print(json.dumps({"largest_sqrt_ND": None if reached is None else reached["sqrt_ND"],
                      "gap_at_largest": None if reached is None else reached["gap"],
                      "gap_in_se_at_largest": None if reached is None else reached["gap_in_se"],
                      "rows": rows, "setting": f"softmax, spiked nu={args.nu:g}, L={args.L}, lambda={args.lam:g}, "
                                               f"alpha={args.alpha:g}, {args.seeds} seeds"}))


if __name__ == "__main__":
    with x64():  # L-BFGS and the replica solver in float64
        main()
