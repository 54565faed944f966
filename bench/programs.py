"""Benchmark: saved traced programs (`attnlab.programs`) against tracing every program again, per preset.

For each preset, at quick size, in fresh processes sharing one compilation cache (a temporary ``ATTNLAB_JAX_CACHE``):
a first process runs the preset once (it compiles and saves every program); then, alternately, a process with
``ATTNLAB_PROGRAMS=off`` (the plain reference: ``jax.jit`` traces and lowers every program, then loads it from the
compilation cache) and one with saved programs (deserialised, their compiled forms loaded from the cache),
``--repeat`` times each, the fastest kept. Each process times ``preset.run`` (the experiment, no checks, figures or
writing) and JAX's own tracing and lowering events. One JSON object per preset; the last line holds every row, the
sums and ``ratio_vs_plain`` (the sum of the plain runs over the sum of the saved-program runs).

    .venv/bin/python bench/programs.py [--repeat 2] [--presets marion-manifold,dohmatob-flow,...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PRESETS = ("marion-manifold", "marion-toy-multihead", "marion-transformer-single-head", "dohmatob-flow",
           "dohmatob-rgd", "duranthon-sample-complexity", "duranthon-gd-landscape", "sakai-kernel-regression")

PROBE = """
import json, sys, time
import jax
from attnlab import runtime
from attnlab.registry import get_preset, resolve_config
runtime.configure()
spent = {"trace": 0.0, "lower": 0.0}
def listen(name, secs, **kw):
    if name.endswith("jaxpr_trace_duration"):
        spent["trace"] += secs
    elif name.endswith("jaxpr_to_mlir_module_duration"):
        spent["lower"] += secs
jax.monitoring.register_event_duration_secs_listener(listen)
preset = get_preset(sys.argv[1])
config = resolve_config(preset, quick=True)
t = time.perf_counter()
with runtime.x64():
    jax.block_until_ready(preset.run(config, jax.random.key(0), None))
print("@@" + json.dumps({"run_s": time.perf_counter() - t, "trace_s": spent["trace"], "lower_s": spent["lower"]}))
"""


def measure(name: str, env: dict, probe: str = PROBE) -> dict:
    """Run ``probe`` for the preset ``name`` in a fresh process with ``env``; its ``@@`` line's JSON object."""
    proc = subprocess.run([sys.executable, "-c", probe, name], env=env, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    if not lines:
        raise RuntimeError(f"{name}: no probe output (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1][2:])


def fastest(name: str, envs: dict[str, dict], repeat: int, probe: str = PROBE) -> dict:
    """The row of preset ``name``: for each kind of ``envs`` (kind -> environment), run alternately ``repeat`` times,
    the run with the smallest ``run_s`` (its fields prefixed by the kind), and ``ratio`` (the first kind's ``run_s``
    over the second's)."""
    best: dict[str, dict] = {}
    for _ in range(repeat):
        for kind, env in envs.items():
            r = measure(name, env, probe)
            if kind not in best or r["run_s"] < best[kind]["run_s"]:
                best[kind] = r
    row = {"preset": name, **{f"{k}_{m}": round(v, 3) if isinstance(v, float) else v
                              for k, r in best.items() for m, v in r.items()}}
    first, second = envs
    row["ratio"] = round(row[f"{first}_run_s"] / row[f"{second}_run_s"], 2)
    return row


def switch_rows(doc: str, presets: tuple[str, ...], switch: str, kind: str, prime: tuple[str, ...],
                probe: str = PROBE) -> list[dict]:
    """The rows of a benchmark of an environment switch (``--repeat``, ``--presets`` from the command line): in one
    temporary compilation cache, for each preset, one run per value of ``prime`` (to fill the cache), then
    :func:`fastest` with ``switch=off`` (kind ``plain``) against ``switch=on`` (kind ``kind``); each row printed."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--presets", default=",".join(presets))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        base = {**os.environ, "ATTNLAB_JAX_CACHE": cache}
        envs = {"plain": {**base, switch: "off"}, kind: {**base, switch: "on"}}
        for name in args.presets.split(","):
            for value in prime:
                measure(name, {**base, switch: value}, probe)
            row = fastest(name, envs, args.repeat, probe)
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main() -> None:
    rows = switch_rows(__doc__, PRESETS, "ATTNLAB_PROGRAMS", "saved", ("on", "off"))  # saves, then compiles plain
    plain = sum(r["plain_run_s"] for r in rows)
    saved = sum(r["saved_run_s"] for r in rows)
    print(json.dumps({"rows": rows, "plain_run_s_sum": round(plain, 2), "saved_run_s_sum": round(saved, 2),
                      "plain_trace_lower_s_sum": round(sum(r["plain_trace_s"] + r["plain_lower_s"] for r in rows), 2),
                      "saved_trace_lower_s_sum": round(sum(r["saved_trace_s"] + r["saved_lower_s"] for r in rows), 2),
                      "ratio_vs_plain": round(plain / saved, 2)}))


if __name__ == "__main__":
    main()
