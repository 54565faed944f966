"""Benchmark: one full replica theory curve (Duranthon et al. 2025, reconstructed RS equations) with our solver
against plain damped iteration, on the same integrals (the same frozen samples and the same jitted map), in the same
process.

Curve: softmax attention on spiked-SLR, nu = 2, L = 3, lambda_k = lambda_v = 0.3, 30 values of alpha (log-spaced
0.5 to 20), frozen sets of 1000 samples.

* ours: :func:`attnlab.duranthon.replica.continue_in_alpha` with :func:`~attnlab.duranthon.replica.solve_replica`'s defaults
  (safeguarded Anderson acceleration, memory 6, mixing 0.5, the memory carried from point to point; inner problem
  from one start, warm-started at the previous evaluation's proximal points, plus warm starts at the local minima
  that the last multistart evaluation found for samples with several; each point verified with 2L + 1 cold starts,
  whose Newton loops continue from the single-start proximal points once they come within 0.05 sqrt(V_k) of them;
  implicit V_hat, switching to Stein's if the implicit iteration stalls), each point started at a secant prediction
  (linear in log alpha from the last two fixed points, checked against its own residual), converged to a residual
  of 1e-8 on the order parameters;
* reference: plain damped iteration as is usual in this field (damping 0.8, i.e. x <- 0.8 x + 0.2 F(x); tolerance
  1e-4; at most 300 iterations), continued in alpha from the same informed start, on the same integrals and the
  same compiled inner solver (one start from omega^k per evaluation, the usual cold start; implicit V_hat; the
  Newton loops gathered in rounds as in ours): the ratio measures the outer solver and the warm starts, not a
  slower inner solver.

Last line: one JSON object with ``ratio_vs_reference`` (reference time / our time for the whole curve),
``converged_fraction_ours``, ``converged_fraction_reference``, ``total_curve_s`` (our curve, compilation excluded:
both solvers are timed after one warm-up evaluation of each compiled map; each curve is timed ``--trials`` times in
alternating order and the medians are kept), the median CPU times (``cpu_s_*``; XLA runs the inner loops on both
cores) and per-solver map evaluations.

    .venv/bin/python bench/replica.py [--n 1000] [--n-alpha 30]
"""

from __future__ import annotations

import argparse
import json
import time

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import (
    compile_blocks,
    continue_in_alpha,
    evaluate_map,
    frozen_samples,
    solve_replica,
    standard_starts,
)
from attnlab.runtime import x64


def curve(act, alphas, lam, samples, init, **kw):
    """The reference continuation in alpha: each point started at the previous converged fixed point."""
    out, x = [], init
    for a in alphas:
        r = solve_replica(act, a, lam, lam, samples, x, **kw)
        out.append(r)
        if r.converged:
            x = tuple(r.order)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000, help="frozen samples")
    ap.add_argument("--n-alpha", type=int, default=30)
    ap.add_argument("--nu", type=float, default=2.0)
    ap.add_argument("--L", type=int, default=3)
    ap.add_argument("--lam", type=float, default=0.3)
    ap.add_argument("--trials", type=int, default=3, help="timings of each curve (alternating order), medians kept")
    args = ap.parse_args()

    act = activation("softmax")
    alphas = np.geomspace(0.5, 20.0, args.n_alpha)
    s = frozen_samples(jax.random.key(0), "spiked", args.nu, args.L, args.n)
    init = standard_starts("spiked", args.nu)["informed"]
    compile_blocks(act, s)  # compile every map outside the timings
    for ms in (False, True):
        for jac in ("implicit", "stein"):
            v = evaluate_map(act, init, 1.0, args.lam, args.lam, s, multistart=ms, jacobian=jac)
            if not ms:
                evaluate_map(act, init, 1.0, args.lam, args.lam, s, multistart=False, jacobian=jac, chi0=v.chi)
                for m in (16, 64):  # warm-started evaluations with tracked minima (padded to 16 or 64 samples)
                    track = (np.arange(m), jnp.broadcast_to(v.chi[:m, None], (m, 2 * args.L + 1, args.L)))
                    evaluate_map(act, init, 1.0, args.lam, args.lam, s, multistart=False, jacobian=jac,
                                 chi0=v.chi, track=track)

    times_ours, times_ref, cpu_ours, cpu_ref = [], [], [], []
    for trial in range(args.trials):  # alternating order; medians reported
        for who in (("ours", "ref") if trial % 2 == 0 else ("ref", "ours")):
            t0, c0 = time.perf_counter(), time.process_time()
            if who == "ours":
                ours = continue_in_alpha(act, alphas, args.lam, args.lam, s, init, tol=1e-8)
                times_ours.append(time.perf_counter() - t0)
                cpu_ours.append(time.process_time() - c0)
            else:
                ref = curve(act, alphas, args.lam, s, init, method="damped", damping=0.8, tol=1e-4, max_iter=300,
                            multistart=False, jacobian="implicit", warm_start=False)
                times_ref.append(time.perf_counter() - t0)
                cpu_ref.append(time.process_time() - c0)
    t_ours, t_ref = float(np.median(times_ours)), float(np.median(times_ref))

    print(f"{'alpha':>7} {'ours: it':>9} {'residual':>9} {'status':>10} {'V_hat':>9}   {'ref: it':>8} "
          f"{'residual':>9} {'status':>10}  max|ours - ref|")
    for a, o, r in zip(alphas, ours, ref):
        d = float(np.max(np.abs(np.asarray(o.order) - np.asarray(r.order))))
        print(f"{a:7.3f} {o.n_iter:9d} {o.residual:9.1e} {o.status:>10} {o.jacobian:>9}   {r.n_iter:8d} "
              f"{r.residual:9.1e} {r.status:>10}  {d:.1e}")
    conv_o = float(np.mean([r.converged for r in ours]))
    conv_r = float(np.mean([r.converged for r in ref]))
    ev_o, ev_r = sum(r.n_iter for r in ours), sum(r.n_iter for r in ref)
    print(f"timings (s): ours {[round(t, 2) for t in times_ours]}, reference {[round(t, 2) for t in times_ref]}; "
          f"CPU (s): ours {[round(t, 2) for t in cpu_ours]}, reference {[round(t, 2) for t in cpu_ref]}")
    print(f"ours: {t_ours:.1f} s, {ev_o} map evaluations, converged {conv_o:.0%} (residual 1e-8); "
          f"reference: {t_ref:.1f} s, {ev_r} evaluations, converged {conv_r:.0%} (residual 1e-4)")
    print(json.dumps({"ratio_vs_reference": t_ref / t_ours, "converged_fraction_ours": conv_o,
                      "converged_fraction_reference": conv_r, "total_curve_s": t_ours,
                      "reference_curve_s": t_ref, "cpu_s_ours": float(np.median(cpu_ours)),
                      "cpu_s_reference": float(np.median(cpu_ref)), "curve_s_ours_all": times_ours,
                      "curve_s_reference_all": times_ref,
                      "map_evaluations_ours": ev_o,
                      "map_evaluations_reference": ev_r, "n_alpha": len(alphas), "n_samples": args.n,
                      "setting": f"softmax, spiked nu={args.nu:g}, L={args.L}, lambda={args.lam:g}"}))


if __name__ == "__main__":
    with x64():  # the solver compares residuals at 1e-8: float64
        main()
