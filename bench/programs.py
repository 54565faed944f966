"""Benchmark: saved traced programs (`attnlab.programs`) against tracing every program again, per preset.

For each preset, at quick size, in fresh processes sharing one compilation cache (a temporary ``ATTNLAB_JAX_CACHE``):
a first process runs the preset once (it compiles and saves every program); then, alternately, a process with
``ATTNLAB_PROGRAMS=off`` (the plain reference: ``jax.jit`` traces and lowers every program, then loads it from the
compilation cache) and one with saved programs (deserialised, their compiled forms loaded from the cache),
``--repeat`` times each, the fastest kept. Each process times ``preset.run`` (the experiment, no checks, figures or
writing) and JAX's own tracing and lowering events. One JSON object per preset; the last line holds every row, the
sums and ``ratio_vs_plain`` (the sum of the plain runs over the sum of the saved-program runs).

It also holds the cost of one call once a program is compiled (``call``): in one fresh process, a small function
called ``CALLS`` times through :func:`attnlab.programs.jit` (the saved program) and through ``jax.jit`` (the plain
reference), by position and by keyword, fastest of 5 rounds, in microseconds per call; ``overhead_us`` is the
difference (the argument binding, the program's key and its look-up), paid by every call of a loop of saved programs
such as the replica solver's blocks; ``call_overhead_us`` is the keyword case's.

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


CALLS = 3000
CALL_PROBE = """
import json, sys, time
from functools import partial
import jax, numpy as np
from attnlab import programs, runtime
runtime.configure()

def scaled(x, c, k):
    return x * c ** k

saved = partial(programs.jit, static_argnames=("k",))(scaled)
plain = jax.jit(scaled, static_argnames=("k",))
x, c = np.linspace(0.0, 1.0, 8), np.float64(3.0)
out = {}
with runtime.x64():
    for name, fn in (("saved", saved), ("plain", plain)):
        for how, call in (("positional", lambda: fn(x, c, 2)), ("keyword", lambda: fn(x, c=c, k=2))):
            jax.block_until_ready(call())
            best = float("inf")
            for _ in range(5):
                t = time.perf_counter()
                for _ in range(CALLS):
                    call()
                best = min(best, (time.perf_counter() - t) / CALLS * 1e6)
            out[f"{name}_{how}_us"] = round(best, 2)
for how in ("positional", "keyword"):
    out[f"overhead_{how}_us"] = round(out[f"saved_{how}_us"] - out[f"plain_{how}_us"], 2)
print("@@" + json.dumps(out))
""".replace("CALLS", str(CALLS))


def call_costs() -> dict:
    """The cost of one call of a compiled program, saved and plain (:data:`CALL_PROBE`), in a fresh process with a
    temporary compilation cache."""
    with tempfile.TemporaryDirectory() as cache:
        return measure("", {**os.environ, "ATTNLAB_JAX_CACHE": cache}, CALL_PROBE)


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
    call = call_costs()
    plain = sum(r["plain_run_s"] for r in rows)
    saved = sum(r["saved_run_s"] for r in rows)
    print(json.dumps({"rows": rows, "plain_run_s_sum": round(plain, 2), "saved_run_s_sum": round(saved, 2),
                      "plain_trace_lower_s_sum": round(sum(r["plain_trace_s"] + r["plain_lower_s"] for r in rows), 2),
                      "saved_trace_lower_s_sum": round(sum(r["saved_trace_s"] + r["saved_lower_s"] for r in rows), 2),
                      "ratio_vs_plain": round(plain / saved, 2), "call_overhead_us": call["overhead_keyword_us"],
                      "call": call}))


if __name__ == "__main__":
    main()
