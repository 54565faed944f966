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

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import switch_rows  # noqa: E402  (bench/programs.py: the same fresh-process probes, alternated)

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


def main() -> None:
    rows = switch_rows(__doc__, PRESETS, "ATTNLAB_PRELOAD", "ahead", ("on",), PROBE)  # compiles, records the manifest
    plain = sum(r["plain_run_s"] for r in rows)
    ahead = sum(r["ahead_run_s"] for r in rows)
    print(json.dumps({"rows": rows, "plain_run_s_sum": round(plain, 2), "ahead_run_s_sum": round(ahead, 2),
                      "plain_lookup_s_sum": round(sum(r["plain_lookup_s"] for r in rows), 2),
                      "ahead_lookup_s_sum": round(sum(r["ahead_lookup_s"] for r in rows), 2),
                      "ratio_vs_plain": round(plain / ahead, 2)}))


if __name__ == "__main__":
    main()
