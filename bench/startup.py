"""Benchmark: the start-up cost of the reference commands (``--version``, ``-h``, ``list``, ``show PRESET``).

For each command, in a fresh process (``python -c`` calling :func:`attnlab.app.cli.main`, output discarded):

* ``cpu_s``: user + system CPU time of the process (``resource.getrusage(RUSAGE_CHILDREN)``), which a loaded
  machine inflates far less than the wall time;
* ``wall_s``: the wall time of the process;
* ``modules``: ``len(sys.modules)`` when the command has returned, and whether ``jax``, ``scipy``, ``pydantic``,
  ``numpy`` and any paper package (``attnlab.marion`` ...) were imported.

The imports a preset's process pays before any work are measured the same way (``import numpy``, the plain
reference, ``import jax`` and each paper's presets module), with the versions of numpy, ml_dtypes (JAX's dtype
extensions, whose 0.7 release alone took most of a second to import) and JAX; ``jax_over_numpy`` is the ratio of the
two imports' wall times.

``list`` and ``show`` are measured three times: in a new cache directory, where the catalogue attnlab ships is read
(``new``; where plugins are installed the probe reads a copy of it written under this environment's key, as it
would be read with no plugin installed), with an empty cache and no shipped catalogue (``cold``: every paper
imported, the cache written) and with the cache that call wrote (``warm``). The cache lives in a temporary directory
(``ATTNLAB_CACHE_DIR``). Each command is repeated ``--repeat`` times and the minimum is kept. One JSON object per
line; the last one holds every row and the wall times the targets name (``version_wall_s``, ``help_wall_s``,
``list_warm_wall_s``, ``show_warm_wall_s``), ``import_jax_wall_s`` and ``import_paper_wall_s_max`` (the slowest of
the five papers' presets modules).

    .venv/bin/python bench/startup.py [--repeat 3] [--preset marion-manifold]
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
from importlib import metadata
from pathlib import Path

from attnlab.app import catalogue
from attnlab.registry import PAPERS

PROBE = """
import sys
from pathlib import Path
from attnlab.app import catalogue
catalogue.SHIPPED = Path({shipped!r})
from attnlab.app.cli import main
rc = main({argv!r})
mods = set(sys.modules)
papers = sorted(p for p in {papers!r} if "attnlab." + p in mods)
print("@@" + __import__("json").dumps({{"rc": rc, "modules": len(mods), "papers": papers,
      **{{m: m in mods for m in ("jax", "scipy", "pydantic", "numpy", "matplotlib")}}}}), file=sys.__stderr__)
"""


def _probe(code: str, env: dict[str, str] | None, what: str) -> dict:
    """Run ``python -c code`` in a fresh process: its CPU and wall time and the report on its last ``@@`` line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("@@")]
    if not lines:
        raise RuntimeError(f"{what}: no probe output (rc {proc.returncode}): {proc.stderr[-2000:]}")
    return {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3), **json.loads(lines[-1][2:])}


def measure(argv: list[str], env: dict[str, str], shipped: str) -> dict:
    """The command ``attnlab argv`` (:data:`PROBE`), reading the shipped catalogue from ``shipped``."""
    return _probe(PROBE.format(argv=argv, papers=PAPERS, shipped=shipped), env, str(argv))


IMPORT_PROBE = """
import sys
import {module}
print("@@" + __import__("json").dumps({{"rc": 0, "modules": len(sys.modules)}}), file=sys.__stderr__)
"""


def measure_import(module: str) -> dict:
    """``import module`` in a fresh process, timed as :func:`measure` times a command."""
    return _probe(IMPORT_PROBE.format(module=module), None, f"import {module}")


def best_of(repeat: int, fn) -> dict:
    """The row of least CPU time among ``repeat`` calls of ``fn``."""
    return min((fn() for _ in range(repeat)), key=lambda row: row["cpu_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--preset", default="marion-manifold")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as ship:
        env = {**os.environ, "ATTNLAB_CACHE_DIR": cache, "COLUMNS": "120"}
        shipped = catalogue.SHIPPED
        if catalogue.cache_key() != catalogue.cache_key(own_only=True):  # plugins installed: the copy of the key
            shipped = catalogue.write_shipped(Path(ship) / "catalogue.json", key=catalogue.cache_key())
        none = os.path.join(ship, "none.json")
        commands = [("--version", ["--version"], "new"), ("-h", ["-h"], "new"),
                    ("list (new)", ["list"], "new"), ("show (new)", ["show", args.preset], "new"),
                    ("list (cold)", ["list"], "cold"), ("list (warm)", ["list"], "warm"),
                    ("show (cold)", ["show", args.preset], "cold"), ("show (warm)", ["show", args.preset], "warm")]
        def one(argv, state):
            if state != "warm":
                for name in os.listdir(cache):
                    os.remove(os.path.join(cache, name))
            return measure(argv, env, none if state == "cold" else str(shipped))

        for label, argv, state in commands:
            best = {"command": label, **best_of(args.repeat, lambda a=argv, c=state: one(a, c))}
            print(json.dumps(best), flush=True)
            rows.append(best)
    for module in ("numpy", "jax", *(f"attnlab.{p}.presets" for p in PAPERS)):
        row = {"command": f"import {module}", **best_of(args.repeat, lambda m=module: measure_import(m))}
        print(json.dumps(row), flush=True)
        rows.append(row)
    walls = {r["command"]: r["wall_s"] for r in rows}
    print(json.dumps({"rows": rows, "version_wall_s": walls["--version"], "help_wall_s": walls["-h"],
                      "list_warm_wall_s": walls["list (warm)"], "show_warm_wall_s": walls["show (warm)"],
                      "list_new_wall_s": walls["list (new)"], "show_new_wall_s": walls["show (new)"],
                      "list_cold_wall_s": walls["list (cold)"], "import_numpy_wall_s": walls["import numpy"],
                      "import_jax_wall_s": walls["import jax"],
                      "jax_over_numpy": round(walls["import jax"] / walls["import numpy"], 2),
                      "import_paper_wall_s_max": max(walls[f"import attnlab.{p}.presets"] for p in PAPERS),
                      "versions": {d: metadata.version(d) for d in ("numpy", "ml_dtypes", "jax")}}))


if __name__ == "__main__":
    main()
