"""Benchmark: the ``dohmatob-rgd`` preset (all links and starts of a repeat sharing one pass over the tokens per step;
on a CPU with AVX2 and FMA the C kernel of ``attnlab.dohmatob.rgd_native``, else a compiled ``lax.scan``) against a
plain reference (one run at a time, a Python loop over steps of a jitted float64 step).

Throughput is in run-steps per second (one RGD step of one (repeat, link, start) run). The reference is timed on
``--ref-steps`` steps of one run per link and extrapolated. Prints, as its last line, a JSON object with
``ratio_vs_reference`` (preset RGD throughput / reference throughput) and ``total_preset_s`` (the whole preset:
simulation, theory, checks' inputs), and the token products' floating-point rate against the CPU's FMA bound
(``fraction_of_fma_bound``; the bound: the C kernel's own loop of independent vector FMAs on every thread), and the C
kernel against XLA's float32 program on the preset's own inputs, alternating (``native_over_jax``). Numbers are
indicative on a shared machine.

Usage: ``python bench/softmax_rgd.py [--quick] [--ref-steps 200] [--token-dtype float64]``; compile time is counted
in the preset's RGD time (set ``ATTNLAB_JAX_CACHE=off`` to count a first run's compilation in full).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import runtime
from attnlab.dohmatob import rgd as empirical
from attnlab.dohmatob import rgd_native
from attnlab.dohmatob.data import sample_dohmatob
from attnlab.registry import all_presets, resolve_config
from attnlab.slr.data import init_sphere, sample_teacher

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache,
jax.config.update("jax_enable_x64", True)  # and float64 throughout, as the presets run (attnlab.api does it per run)


def reference_throughput(cfg, n_steps: int, trials: int = 3) -> float:
    """Run-steps per second of the plain reference over the links (compile excluded): the median of ``trials``
    timings of ``n_steps`` steps per link (single timings vary by up to 1.5x on this shared machine)."""
    lam = cfg.beta * math.sqrt(cfg.d)
    us, vs = sample_teacher(jax.random.key(0), cfg.d)
    u0, v0 = init_sphere(jax.random.key(1), cfg.d)
    data = [sample_dohmatob(jax.random.key(2), us, vs, cfg.n_train, cfg.L, cfg.gamma, cfg.eps, link)
            for link in cfg.links]
    for link, b in zip(cfg.links, data):
        empirical.run_rgd_reference(u0, v0, b.X, b.y, lam, cfg.step_size, 2, link)  # compile
    totals = []
    for _ in range(trials):
        t = time.perf_counter()
        for link, b in zip(cfg.links, data):
            empirical.run_rgd_reference(u0, v0, b.X, b.y, lam, cfg.step_size, n_steps, link)
        totals.append(time.perf_counter() - t)
    return len(cfg.links) * n_steps / float(np.median(totals))


def implementation_rates(args, kwargs, n_steps: int = 400, rounds: int = 2) -> dict:
    """Run-steps per second of the C kernel and of XLA's program (``implementation="jax"``) with the preset's token
    dtype, on the preset's own RGD inputs (every repeat, link and start), ``n_steps`` steps, compiled beforehand,
    alternating for ``rounds`` rounds, the best of each: whether the kernel still earns its place over XLA."""
    u0, v0, X, Y, lam, step_size = args[:6]
    links = args[8]
    runs = u0.shape[0] * u0.shape[1] * n_steps
    def steps(impl, n, log_every):
        return jax.block_until_ready(empirical.run_rgd(u0, v0, X, Y, lam, step_size, n, log_every, links, n_segments=1,
                                                       token_dtype=kwargs.get("token_dtype"), implementation=impl))

    best = dict.fromkeys(("jax", "native"), 0.0)
    for impl in best:
        steps(impl, 10, 10)  # compile
    for _ in range(rounds):
        for impl in best:
            t = time.perf_counter()
            steps(impl, n_steps, n_steps // 4)
            best[impl] = max(best[impl], runs / (time.perf_counter() - t))
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--ref-steps", type=int, default=200)
    ap.add_argument("--token-dtype", choices=("float64", "float32"), default=None,
                    help="the preset's token_dtype (default: the preset's, float32; the reference always runs in "
                    "float64, as the plain implementation would)")
    args = ap.parse_args()
    p = all_presets()["dohmatob-rgd"]
    overrides = {} if args.token_dtype is None else {"token_dtype": args.token_dtype}
    cfg = resolve_config(p, quick=args.quick, overrides=overrides)

    # time the RGD part of the preset separately by wrapping run_rgd
    rgd_s, inputs = [], {}
    orig = empirical.run_rgd

    def timed(*a, **k):
        jax.block_until_ready(a)  # the data sampling dispatched before RGD is not RGD time
        inputs["args"], inputs["kwargs"] = a, k
        t = time.perf_counter()
        out = jax.block_until_ready(orig(*a, **k))
        rgd_s.append(time.perf_counter() - t)
        return out

    import attnlab.dohmatob.rgd_preset as mod

    mod.run_rgd = timed
    t, cpu = time.perf_counter(), time.process_time()
    ds = p.run(cfg, jax.random.key(0))
    p.summarize(ds, cfg)
    total, total_cpu = time.perf_counter() - t, time.process_time() - cpu
    mod.run_rgd = orig
    runs = len(cfg.links) * len(mod.STARTS)  # per repeat: every link from every start
    run_steps = cfg.n_repeats * runs * cfg.n_steps
    preset_tp = run_steps / rgd_s[0]
    ref_tp = reference_throughput(cfg, args.ref_steps)
    impl_rates = implementation_rates(inputs["args"], inputs["kwargs"]) if rgd_native.available() else {}
    # the token products' rate against the CPU's FMA bound (the kernel's own loop of vector FMAs, every thread)
    flop_rate = cfg.n_repeats * cfg.n_steps * rgd_native.flops(cfg.n_train, cfg.L, cfg.d, runs) / rgd_s[0]
    fma_bound = rgd_native.fma_flops_per_second() if rgd_native.available() else None
    print(f"preset: {run_steps} run-steps in {rgd_s[0]:.1f} s (RGD incl. compile) -> {preset_tp:.0f} run-steps/s; "
          f"whole preset {total:.1f} s")
    print(f"reference: {ref_tp:.0f} run-steps/s (one run, Python loop over jitted steps, {args.ref_steps} steps/link)")
    if impl_rates:
        print(f"on the preset's data, alternating: the C kernel {impl_rates['native']:.0f} run-steps/s, XLA's float32 "
              f"program (implementation=jax) {impl_rates['jax']:.0f}: {impl_rates['native'] / impl_rates['jax']:.1f}x")
    if fma_bound:
        print(f"token products: {flop_rate / 1e9:.1f} GFLOP/s, {flop_rate / fma_bound:.2f} of the FMA bound "
              f"{fma_bound / 1e9:.1f} GFLOP/s (all threads)")
    print(f"devices: {jax.devices()}; x64: {jnp.zeros(1).dtype}")
    print(json.dumps({"ratio_vs_reference": preset_tp / ref_tp, "total_preset_s": total, "rgd_s": rgd_s[0],
                      "preset_run_steps_per_s": preset_tp, "reference_run_steps_per_s": ref_tp,
                      "total_preset_cpu_s": total_cpu, "rgd_flops_per_s": flop_rate,
                      "fma_bound_flops_per_s": fma_bound,
                      "fraction_of_fma_bound": flop_rate / fma_bound if fma_bound else None,
                      "native_run_steps_per_s": impl_rates.get("native"), "jax_run_steps_per_s": impl_rates.get("jax"),
                      "native_over_jax": impl_rates["native"] / impl_rates["jax"] if impl_rates else None,
                      "token_dtype": cfg.token_dtype, "quick": args.quick,
                      "native_kernel": rgd_native.available() or rgd_native.unavailable_reason(),
                      "native_lanes": rgd_native.lanes() if rgd_native.available() else None,
                      "implementations": p.implementations(cfg),
                      "load_average_1min": os.getloadavg()[0],
                      "jax_cache": os.environ.get("ATTNLAB_JAX_CACHE", "default")}))


if __name__ == "__main__":
    main()
