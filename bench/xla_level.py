"""Benchmark: XLA's LLVM optimisation level 1 (what attnlab asks for on CPUs) against the default level 3.

Each preset runs at full size from a fresh process with the compile cache off (``ATTNLAB_JAX_CACHE=off``, so every
program is compiled), no figures, at level 1 and at level 3 alternately, ``--repeats`` times; the best wall time per
level is reported, with the user CPU time. Level 1 shortens the compilation of the many small programs of a preset;
a level that lengthened the run itself would show on the compute-heavy preset (duranthon-sample-complexity).

Last line: one JSON object with ``level3_over_level1`` (the total wall time at level 3 over level 1; above 1: level 1
is faster) and the times per preset and level.

    .venv/bin/python bench/xla_level.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

PRESETS = ("marion-manifold", "duranthon-sample-complexity", "sakai-vary-width")


def one(preset: str, level: int, out: str) -> tuple[float, float]:
    env = {**os.environ, "ATTNLAB_JAX_CACHE": "off", "XLA_FLAGS": f"--xla_backend_optimization_level={level}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnlab", "run", preset, "--no-figures", "--force", "--out", out],
                   env=env, check=True, capture_output=True)
    return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    best: dict[str, dict[str, list[float]]] = {p: {} for p in PRESETS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for level in (1, 3):
                for p in PRESETS:
                    wall, user = one(p, level, f"{tmp}/{p}")
                    prev = best[p].get(f"level{level}")
                    if prev is None or wall < prev[0]:
                        best[p][f"level{level}"] = [wall, user]
                    print(f"level {level} {p:30s} {wall:6.2f} s wall {user:6.2f} s user", flush=True)
    total = {lv: sum(best[p][lv][0] for p in PRESETS) for lv in ("level1", "level3")}
    print(json.dumps({"level3_over_level1": total["level3"] / total["level1"], "total_wall_s": total,
                      "best_wall_user_s": best, "repeats": args.repeats, "cpu_count": os.cpu_count(),
                      "loadavg_1min": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
