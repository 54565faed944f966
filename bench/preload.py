"""Benchmark: programs loaded ahead (`attnlab.preload`) against loading each from the compilation cache when the run
asks for it, per preset.

For each preset, at quick size, in fresh processes sharing one compilation cache (a temporary ``ATTNLAB_JAX_CACHE``):
a first process runs the preset (it compiles every program and records the manifest); then, alternately, a process
with ``ATTNLAB_PRELOAD=off`` (the plain reference: JAX deserialises each program from the cache on the run's thread
when the run first calls it) and one with it on, ``--repeat`` times each, the fastest kept. Each process times
``attnlab.api.execute`` (the preset's run and checks, as ``attnlab run`` and ``attnlab.run`` call it) and, inside
it, the time the run's thread spent in JAX's cache reads (``lookup_s``). One JSON object per preset; the last line
holds every row, the sums and ``ratio_vs_plain`` (the sum of the plain runs over the sum of the preloaded runs).

    .venv/bin/python bench/preload.py [--repeat 2] [--presets marion-manifold,dohmatob-flow,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = ("marion-manifold", "marion-sgd", "marion-sphere-large-lambda", "dohmatob-flow", "dohmatob-rgd",
           "duranthon-sample-complexity", "duranthon-gd-landscape", "duranthon-low-snr", "sakai-kernel",
           "sakai-kernel-regression")

PROBE = """
import json, sys, time
from attnlab import runtime
from attnlab.api import execute
from attnlab.registry import get_preset, resolve_config
runtime.configure()
from jax._src import compiler
read = compiler._cache_read
spent = [0.0]
def timed_read(*args, **kwargs):
    t = time.perf_counter()
    try:
        return read(*args, **kwargs)
    finally:
        spent[0] += time.perf_counter() - t
compiler._cache_read = timed_read
preset = get_preset(sys.argv[1])
config = resolve_config(preset, quick=True)
t = time.perf_counter()
outcome = execute(preset, config, 0)
print("@@" + json.dumps({"run_s": time.perf_counter() - t, "lookup_s": spent[0],
                         "passed": all(c.passed for c in outcome.checks)}))
"""


def measure(name: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE, name], env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    if not lines:
        raise RuntimeError(f"{name}: no probe output (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1][2:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--presets", default=",".join(PRESETS))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        base = {**os.environ, "ATTNLAB_JAX_CACHE": cache}
        plain_env, ahead_env = {**base, "ATTNLAB_PRELOAD": "off"}, {**base, "ATTNLAB_PRELOAD": "on"}
        for name in args.presets.split(","):
            measure(name, ahead_env)  # compiles every program and records the manifest
            best = {"plain": None, "ahead": None}
            for _ in range(args.repeat):
                for kind, env in (("plain", plain_env), ("ahead", ahead_env)):
                    r = measure(name, env)
                    if best[kind] is None or r["run_s"] < best[kind]["run_s"]:
                        best[kind] = r
            row = {"preset": name, **{f"{k}_{m}": round(v, 3) if isinstance(v, float) else v
                                      for k, r in best.items() for m, v in r.items()}}
            row["ratio"] = round(row["plain_run_s"] / row["ahead_run_s"], 2)
            print(json.dumps(row), flush=True)
            rows.append(row)
    plain = sum(r["plain_run_s"] for r in rows)
    ahead = sum(r["ahead_run_s"] for r in rows)
    print(json.dumps({"rows": rows, "plain_run_s_sum": round(plain, 2), "ahead_run_s_sum": round(ahead, 2),
                      "plain_lookup_s_sum": round(sum(r["plain_lookup_s"] for r in rows), 2),
                      "ahead_lookup_s_sum": round(sum(r["ahead_lookup_s"] for r in rows), 2),
                      "ratio_vs_plain": round(plain / ahead, 2)}))


if __name__ == "__main__":
    main()
