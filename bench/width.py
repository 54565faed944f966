"""Benchmark: the exact width-free Sakai sampler against the brute-force reference, and the paper presets' wall time.

Throughput is networks (samples of Y[0,0]) per second after compilation, H = 2, s = 4, clip inputs, at
n in {64, 256, 1024}, for the exact sampler as the presets call it (``method="auto"``: the C kernel of
:mod:`attnlab.sakai.native` on CPU where it compiled, else the JAX program); the reference draws every weight
matrix as the official code does ((s + 4H) n^2 normals per network). Then each paper preset (sakai-vary-width,
-vary-heads, -scores, -low-rank, -relu) runs at its default
(paper) size, compilation included (``--quick``: the quick sizes), with wall and CPU time
(``time.process_time``, more robust on a shared machine), the load average and the state of JAX's persistent
compilation cache (``off`` when ``ATTNLAB_JAX_CACHE=off``, else ``cold``/``warm`` with its entry count before the
preset ran; a warm cache skips most compilation, so report cold or off timings as the honest ones). Each output line
is one JSON object; the last one holds ``ratio_vs_reference_n1024`` and ``total_paper_presets_s``.

    ATTNLAB_JAX_CACHE=off .venv/bin/python bench/width.py [--skip-presets] [--skip-throughput] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import jax

from attnlab import runtime
from attnlab.registry import all_presets, resolve_config
from attnlab.sakai.reference import sample_reference
from attnlab.sakai.sampler import sample_first_token

runtime.configure()  # this script is its own process: attnlab's XLA flags and compile cache,
jax.config.update("jax_enable_x64", True)  # and float64 throughout, as the presets run

PAPER_PRESETS = ("sakai-vary-width", "sakai-vary-heads", "sakai-scores", "sakai-low-rank", "sakai-relu")


def _throughput(fn, n_samples: int, repeats: int = 3):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(jax.random.key(0)))
    first = time.perf_counter() - t0
    runs = []
    for r in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(jax.random.key(r + 1)))
        runs.append(time.perf_counter() - t0)
    return {"compile_and_first_s": first, "run_s_min": min(runs), "run_s_median": sorted(runs)[len(runs) // 2],
            "samples_per_s": n_samples / min(runs)}


def _cache_state() -> str:
    """``off``, or ``cold``/``warm (N entries)`` for JAX's persistent compilation cache."""
    path = jax.config.jax_compilation_cache_dir
    if not path:
        return "off"
    n = len(os.listdir(path)) if os.path.isdir(path) else 0
    return f"warm ({n} entries)" if n else "cold (empty)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-presets", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--quick", action="store_true", help="time the presets at their quick sizes")
    ap.add_argument("--reference-samples", type=int, default=8)
    ap.add_argument("--exact-samples", type=int, default=200_000)
    args = ap.parse_args()
    env = {"device": str(jax.devices()[0]), "jax": jax.__version__, "machine": platform.node(),
           "note": "shared, loaded machine: timings are indicative"}
    ratios = {}
    for n in () if args.skip_throughput else (64, 256, 1024):
        ref = _throughput(lambda k, n=n: sample_reference(k, n=n, n_heads=2, n_samples=args.reference_samples,
                                                     batch_size=4), args.reference_samples)
        ex = _throughput(lambda k, n=n: sample_first_token(k, n=n, n_heads=2, n_samples=args.exact_samples)[0],
                         args.exact_samples)
        ratios[n] = ex["samples_per_s"] / ref["samples_per_s"]
        print(json.dumps({"name": "sampler_throughput", "params": {"n": n, "H": 2, "s": 4}, "exact": ex,
                          "reference": ref, "ratio": ratios[n], **env}), flush=True)
    total = total_cpu = None
    if not args.skip_presets:
        total = total_cpu = 0.0
        presets = all_presets()
        for name in PAPER_PRESETS:
            p = presets[name]
            cfg = resolve_config(p, quick=args.quick)
            cache = _cache_state()
            t0, c0 = time.perf_counter(), time.process_time()
            ds = p.run(cfg, jax.random.key(0))
            metrics, checks = p.summarize(ds, cfg)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            total += wall
            total_cpu += cpu
            print(json.dumps({"name": "paper_preset", "preset": name, "size": "quick" if args.quick else "paper",
                              "wall_s": wall, "cpu_s": cpu, "load_avg": os.getloadavg(), "compile_cache": cache,
                              "checks_passed": all(c.passed for c in checks), **env}), flush=True)
    print(json.dumps({"name": "width_summary", "ratio_vs_reference_n1024": ratios.get(1024),
                      "ratios": {str(k): v for k, v in ratios.items()}, "size": "quick" if args.quick else "paper",
                      "total_paper_presets_s": total, "total_paper_presets_cpu_s": total_cpu,
                      "compile_cache": _cache_state(), "load_avg": os.getloadavg(), **env}))


if __name__ == "__main__":
    main()
