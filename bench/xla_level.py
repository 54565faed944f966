"""Benchmark: the XLA flags attnlab asks for on CPUs (LLVM optimisation level 1, XLA's loop emitters instead of its
fusion emitters) against XLA's defaults (level 3, fusion emitters) and against level 1 alone; and, in a process pinned
to one core (a sweep or test worker's case), one LLVM module per program (``attnlab.runtime.ONE_CORE_FLAGS``, which
``configure`` adds there: ``one_core``) against XLA's split into up to 32 modules (``one_core_split``).

The flags are ``attnlab.runtime.OPTIMISATION_FLAGS``.

Each preset runs at quick size from a fresh process with the compile cache off (``ATTNLAB_JAX_CACHE=off``, so every
program is compiled), no figures, under each configuration in turn, ``--repeats`` times; the best wall time per
configuration is reported, with the user CPU time. The flags shorten the compilation of the many small programs of a
preset; a flag that lengthened the run itself would show on the compute-heavy presets (duranthon-gd-landscape, and
bruno-alignment, whose flow integration asks for the fusion emitters back through
:data:`attnlab.runtime.LONG_RUNNING`).

Last line: one JSON object with ``xla_defaults_over_attnlab``, ``level1_over_attnlab`` (the total wall time under
XLA's defaults, or level 1 alone, over attnlab's flags; above 1: attnlab's flags are faster),
``one_core_split_over_one_module`` (on one core, split modules over one module per program) and the times per preset
and configuration.

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

from attnlab.runtime import OPTIMISATION_FLAGS

PRESETS = ("marion-manifold", "duranthon-sample-complexity", "duranthon-gd-landscape", "sakai-vary-width",
           "bruno-alignment")
CONFIGURATIONS = {
    "attnlab": " ".join(OPTIMISATION_FLAGS),
    "level1": "--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=true",
    "xla_defaults": "--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true",
    # pinned to one core (PINNED): configure() adds ONE_CORE_FLAGS unless a split count is given, here XLA's own
    "one_core": " ".join(OPTIMISATION_FLAGS),
    "one_core_split": " ".join(OPTIMISATION_FLAGS) + " --xla_cpu_parallel_codegen_split_count=32",
}
PINNED = ("one_core", "one_core_split")
"""The configurations run on one core (the first this process may use)."""


def one(preset: str, flags: str, out: str, pinned: bool = False) -> tuple[float, float]:
    env = {**os.environ, "ATTNLAB_JAX_CACHE": "off", "XLA_FLAGS": flags}
    core = min(os.sched_getaffinity(0))
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "attnlab", "run", preset, "--quick", "--no-figures", "--force", "--out", out],
                   env=env, check=True, capture_output=True,
                   preexec_fn=(lambda: os.sched_setaffinity(0, {core})) if pinned else None)
    return time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    best: dict[str, dict[str, list[float]]] = {p: {} for p in PRESETS}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for name, flags in CONFIGURATIONS.items():
                for p in PRESETS:
                    wall, user = one(p, flags, f"{tmp}/{p}", name in PINNED)
                    prev = best[p].get(name)
                    if prev is None or wall < prev[0]:
                        best[p][name] = [wall, user]
                    print(f"{name:12s} {p:30s} {wall:6.2f} s wall {user:6.2f} s user", flush=True)
    total = {name: sum(best[p][name][0] for p in PRESETS) for name in CONFIGURATIONS}
    print(json.dumps({"xla_defaults_over_attnlab": total["xla_defaults"] / total["attnlab"],
                      "level1_over_attnlab": total["level1"] / total["attnlab"],
                      "one_core_split_over_one_module": total["one_core_split"] / total["one_core"],
                      "total_wall_s": total,
                      "flags": CONFIGURATIONS, "best_wall_user_s": best, "repeats": args.repeats,
                      "cpu_count": os.cpu_count(), "loadavg_1min": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
