"""Benchmark: where a preset's wall time goes, for every preset, in a fresh process, cold and warm.

For each preset and size (``--sizes quick,full``), fresh processes run it from seed 0 as ``attnlab run`` does:
the first with an empty JAX compilation cache (``cold``), then ``--warm-repeats`` (3; ``--full-warm-repeats``, 1,
at full size) with the cache the first one wrote (``warm``), of which the fastest is reported (the tries' wall times
and first-run fixed costs are kept: a shared 2-core machine's speed drifts by a quarter between minutes, more than
the differences measured here); the cache's folder also holds the saved traced programs (:mod:`attnlab.programs`):
cold, each program is traced and saved, warm, loaded.
Each process times its phases:

* ``imports_s``: importing attnlab, JAX and the preset's paper package (``get_preset``);
* ``configuration_s``: resolving and validating the config;
* ``tracing_s``: JAX tracing and lowering to MLIR (``/jax/core/compile/jaxpr_trace_duration`` and
  ``jaxpr_to_mlir_module_duration``, JAX's own monitoring events), over the whole process;
* ``compilation_s``: XLA compilation or, warm, the cache loads (``backend_compile_duration``), with
  ``programs`` (compile requests) and ``cache_hits``;
* ``run_imports_s``: the modules the preset's ``run`` and ``summarize`` import on first use (deferred imports of
  attnlab, SciPy's submodules, xarray's of Dask, JAX's of its MLIR dialects), from Python's own ``-X importtime``
  (the outermost imports between the phases' marks): a fixed cost, as the imports before the run;
* ``computation_s``: the preset's ``run`` (the experiment, and the Monte Carlo samples its checks need) less the
  tracing, compilation and imports inside it;
* ``checks_s``: its ``summarize`` less the tracing, compilation and imports inside it;
* ``figures_s``: drawing the figures (and the animation) and writing them (PNG + PDF);
* ``writing_s``: the dataset to Zarr, config and summary to JSON.

``startup_s`` is the rest of the process's wall time (the interpreter's start and exit; the process ends as
``attnlab run`` does, with ``os._exit`` once its output is flushed). ``fixed_s`` is everything but the computation:
startup + imports + configuration + run imports + tracing + compilation + checks + figures + writing;
``run_fixed_s`` is what a
first ``attnlab.run`` without an output folder pays besides its computation: ``fixed_s`` less the figures and the
writing (the summary counts the presets whose warm ``run_fixed_s`` is within :data:`RUN_FIXED_TARGET_S`). One
JSON object per measurement, then the presets ranked by their warm fixed cost at the first size measured; the last
line holds every row and the ranking (first).

    .venv/bin/python bench/presets.py [--presets NAME,...] [--sizes quick[,full]] [--warm-repeats 3]
                                      [--full-warm-repeats 1] [--timeout 1800]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

PROBE = r"""
import json, os, sys, tempfile, time
from pathlib import Path
t0 = time.perf_counter()
import jax
from attnlab import runtime
from attnlab.registry import get_preset, resolve_config
runtime.configure()
marks = []  # (end time, event, seconds)
jax.monitoring.register_event_duration_secs_listener(
    lambda name, secs, **kw: marks.append((time.perf_counter(), name, secs)))
counts = {}
jax.monitoring.register_event_listener(lambda name, **kw: counts.__setitem__(name, counts.get(name, 0) + 1))
preset = get_preset(NAME)
t1 = time.perf_counter()
config = resolve_config(preset, quick=QUICK)
t2 = time.perf_counter()
def mark(phase):
    print("@@mark " + phase, file=sys.stderr, flush=True)
mark("run")
from attnlab import preload
with runtime.x64(), runtime.xarray_without_dask(), preload.ahead(preset.name, config.model_dump_json()):  # as execute
    ds = preset.run(config, jax.random.key(0), None)
    t3 = time.perf_counter()
    mark("checks")
    metrics, checks = preset.summarize(ds, config)
    t4 = time.perf_counter()
    mark("end")
from attnlab.app.store import write_data
from attnlab.plot import save_figure
with runtime.xarray_without_dask(), tempfile.TemporaryDirectory() as tmp:  # as attnlab.app.store.run_preset
    for name, fig in preset.plot(ds, config).items():
        save_figure(fig, tmp, name)
    if preset.animate is not None:
        preset.animate(ds, Path(tmp) / "evolution.gif")
    t5 = time.perf_counter()
    write_data(ds, Path(tmp) / "data.zarr")
    (Path(tmp) / "summary.json").write_text(json.dumps({"checks": [c.as_dict() for c in checks]}, default=str))
    (Path(tmp) / "config.json").write_text(json.dumps(config.model_dump(mode="json")))
    t6 = time.perf_counter()
TRACE = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration")
COMPILE = ("/jax/core/compile/backend_compile_duration",)
def within(names, lo, hi):
    return sum(s for t, n, s in marks if n in names and lo <= t <= hi)
tracing = within(TRACE, 0.0, float("inf"))
compiling = within(COMPILE, 0.0, float("inf"))
jax_in_run = within(TRACE + COMPILE, t2, t3)
jax_in_checks = within(TRACE + COMPILE, t3, t4)
row = {"total_s": t6 - t0, "imports_s": t1 - t0, "configuration_s": t2 - t1, "tracing_s": tracing,
       "compilation_s": compiling,
       "computation_s": t3 - t2 - jax_in_run, "checks_s": t4 - t3 - jax_in_checks,
       "figures_s": t5 - t4, "writing_s": t6 - t5,
       "programs": counts.get("/jax/compilation_cache/compile_requests_use_cache", 0),
       "cache_hits": counts.get("/jax/compilation_cache/cache_hits", 0),
       "checks_passed": sum(c.passed for c in checks), "checks": len(checks)}
row = {k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}
print("@@" + json.dumps(row), file=sys.__stderr__)
sys.__stderr__.flush()
os._exit(0)  # as attnlab run ends once its output is flushed: without tearing down JAX's modules and programs
"""

PHASES = ("imports_s", "configuration_s", "run_imports_s", "tracing_s", "compilation_s", "checks_s", "figures_s",
          "writing_s")
IMPORT_LINE = re.compile(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$")  # an outermost import: one space


def imports_by_phase(stderr: str) -> dict[str, list[tuple[float, str]]]:
    """The outermost imports (seconds, module) that ``-X importtime`` reports between the probe's ``@@mark`` lines:
    ``{"run": [...], "checks": [...]}`` (the imports the preset's ``run`` and its ``summarize`` made)."""
    phase, found = None, {"run": [], "checks": []}
    for line in stderr.splitlines():
        if line.startswith("@@mark "):
            phase = line[7:].strip()
            continue
        m = IMPORT_LINE.match(line)
        if m and phase in found:
            found[phase].append((int(m.group(1)) / 1e6, m.group(2).strip()))
    return found
RUN_FIXED_TARGET_S = 2.0
"""The fixed cost a preset's first ``attnlab.run`` (quick size, fresh process, warm cache) is to stay within."""


def measure(name: str, quick: bool, cache: str, timeout: float) -> dict:
    """One fresh process running ``name`` with the compile cache under ``cache``; its phase times (or an error)."""
    env = {**os.environ, "ATTNLAB_JAX_CACHE": cache, "MPLBACKEND": "Agg"}
    code = PROBE.replace("NAME", repr(name)).replace("QUICK", repr(quick))
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    wall = time.perf_counter() - t0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("@@")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit status {proc.returncode}: {tail[:200]}"}
    row = json.loads(lines[-1][2:])
    found = imports_by_phase(proc.stderr)
    in_run, in_checks = (sum(t for t, _ in found[p]) for p in ("run", "checks"))
    row["run_imports_s"] = round(in_run + in_checks, 3)
    row["computation_s"] = round(max(row["computation_s"] - in_run, 0.0), 3)
    row["checks_s"] = round(max(row["checks_s"] - in_checks, 0.0), 3)
    row["run_imports"] = [name for _, name in sorted(found["run"] + found["checks"], reverse=True)[:3]]
    row["wall_s"] = round(wall, 3)
    row["startup_s"] = round(max(wall - row.pop("total_s"), 0.0), 3)  # the interpreter's start and exit
    row["fixed_s"] = round(sum(row[k] for k in PHASES) + row["startup_s"], 3)
    row["run_fixed_s"] = round(row["fixed_s"] - row["figures_s"] - row["writing_s"], 3)
    return row


def main() -> None:
    from attnlab.registry import all_presets

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", default="", help="comma-separated preset names (default: every preset)")
    parser.add_argument("--sizes", default="quick", help="quick, full or quick,full")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    parser.add_argument("--warm-repeats", type=int, default=3,
                        help="fresh warm processes per preset at quick size, the fastest (wall time) reported")
    parser.add_argument("--full-warm-repeats", type=int, default=1,
                        help="the same at full size (minutes each: its computation dominates)")
    args = parser.parse_args()
    names = [n for n in args.presets.split(",") if n] or sorted(all_presets())
    sizes = [s for s in args.sizes.split(",") if s]
    bad = ("--warm-repeats and --full-warm-repeats take a count >= 1" if min(args.warm_repeats, args.full_warm_repeats) < 1
           else "--sizes takes quick, full or quick,full" if not sizes or not set(sizes) <= {"quick", "full"} else None)
    if bad:
        print(f"bench/presets.py: {bad}", file=sys.stderr)
        raise SystemExit(2)
    repeats = {"quick": args.warm_repeats, "full": args.full_warm_repeats}
    rows = []
    for size in sizes:
        for name in names:
            with tempfile.TemporaryDirectory(prefix="attnlab-bench-cache-") as cache:
                for state in ("cold", "warm"):
                    tries = [measure(name, size == "quick", cache, args.timeout)
                             for _ in range(1 if state == "cold" else repeats[size])]
                    done = [t for t in tries if "error" not in t]
                    row = {"preset": name, "size": size, "cache": state,
                           **(min(done, key=lambda t: t["wall_s"]) if done else tries[0])}
                    if len(done) > 1:  # the spread of this machine's speed between the tries
                        row["tries_wall_s"] = [t["wall_s"] for t in done]
                        row["tries_run_fixed_s"] = [t["run_fixed_s"] for t in done]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    first = sizes[0]
    warm = [r for r in rows if r["size"] == first and r["cache"] == "warm" and "error" not in r]
    ranking = [{"preset": r["preset"], "fixed_s": r["fixed_s"], "computation_s": r["computation_s"]}
               for r in sorted(warm, key=lambda r: -r["fixed_s"])]
    print(json.dumps({"ranking_by_warm_fixed_cost": ranking, "size": first}), flush=True)
    summary = {"rows": rows, "ranking_by_warm_fixed_cost": ranking}
    for size in sizes:
        for state in ("cold", "warm"):
            done = [r for r in rows if r["size"] == size and r["cache"] == state and "error" not in r]
            if done:
                summary[f"{size}_{state}_fixed_s_max"] = max(r["fixed_s"] for r in done)
                summary[f"{size}_{state}_wall_s_sum"] = round(sum(r["wall_s"] for r in done), 1)
                summary[f"{size}_{state}_computation_s_sum"] = round(sum(r["computation_s"] for r in done), 1)
                summary[f"{size}_{state}_run_fixed_s_max"] = max(r["run_fixed_s"] for r in done)
                summary[f"{size}_{state}_run_fixed_within_target"] = sum(r["run_fixed_s"] <= RUN_FIXED_TARGET_S
                                                                         for r in done)
                summary[f"{size}_{state}_presets"] = len(done)
    summary["failed"] = [f"{r['preset']} {r['size']} {r['cache']}: {r['error']}" for r in rows if "error" in r]
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
