"""Benchmark: ``attnlab reproduce`` of the five papers, as a user runs it, against its presets one after the other.

``attnlab reproduce marion dohmatob duranthon sakai bruno --out DIR`` (full size; ``--quick``: the quick sizes of
``make demo``) runs in its own process into a new temporary folder, with attnlab's default workers (one per usable
core), the environment as it is and the compilation cache that earlier runs left in the user's home, timed from
outside: ``full_wall_s`` (``quick_wall_s``). From the finished runs: each preset's own time as a worker
(``elapsed_s``, compilation included) and their sum ``presets_worker_s``, the plain reference: the same presets one
after the other on one core, to the precision of that sum; ``presets_over_workers_s``, the wall time a schedule
that loses no time would take; ``packing = presets_worker_s / (workers x wall)``, the share of the workers' time
the schedule kept busy (1 at best); the checks that passed and the negative controls rejected, out of those
evaluated. A preset that needs a local input (``marion-bert-probing``: a BERT model directory) is not run by
reproduce. The folder is removed afterwards (``--keep DIR`` moves it to a new folder of yours).

    .venv/bin/python bench/reproduce.py [--quick] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from attnlab.app.report import check_summary
from attnlab.app.store import RunResult, read_summary
from attnlab.registry import PAPERS
from attnlab.runtime import usable_cores

sys.path.insert(0, str(Path(__file__).resolve().parent))
from suite import refused_keep, scratch  # noqa: E402  (bench/suite.py: the same scratch folder and --keep)

LONGEST = 8
"""The presets listed in the result, longest first."""


def summarize(out: Path) -> dict:
    """The finished runs under ``out``: per preset its time, and the checks passed and controls rejected (counted by
    :func:`attnlab.app.report.check_summary`, as reproduce's own report counts them)."""
    runs: dict[str, RunResult] = {}
    for path in sorted(out.rglob("summary.json")):
        s = read_summary(path.parent)
        if s and "preset" in s and "elapsed_s" in s:
            runs[s["preset"]] = RunResult(path.parent, s, reused=False)
    n = check_summary(runs)
    times = {name: float(run.summary["elapsed_s"]) for name, run in runs.items()}
    longest = sorted(times.items(), key=lambda kv: -kv[1])[:LONGEST]
    return {"presets": len(times), "presets_worker_s": round(sum(times.values()), 1), "checks": n["checks"],
            "checks_passed": n["passed"], "controls": n["controls"], "controls_rejected": n["rejected"],
            "longest": [{"preset": name, "elapsed_s": round(t, 1)} for name, t in longest]}


def passed(exit_status: int, summary: dict) -> bool:
    """The reproduction passed: it exited with 0, ran presets, and every check passed and every control was rejected."""
    return (exit_status == 0 and summary["presets"] > 0 and summary["checks_passed"] == summary["checks"]
            and summary["controls_rejected"] == summary["controls"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the quick sizes")
    ap.add_argument("--keep", type=Path, default=None, help="keep the reproduction's folder in this (new) folder")
    args = ap.parse_args(argv)
    if refused_keep(args.keep, "reproduce.py"):
        return 2
    with scratch(args.keep, "attnlab-bench-reproduce-") as work:
        out = work / "results"
        workers = usable_cores()
        cmd = [sys.executable, "-m", "attnlab", "reproduce", *PAPERS, "--out", str(out)] + (["--quick"] * args.quick)
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.perf_counter() - t
        size = "quick" if args.quick else "full"
        result = {"size": size, "exit_status": proc.returncode, "workers": workers, f"{size}_wall_s": round(wall, 1),
                  **summarize(out)}
        result["packing"] = round(result["presets_worker_s"] / (workers * wall), 3)
        result["presets_over_workers_s"] = round(result["presets_worker_s"] / workers, 1)
        result["passed"] = passed(proc.returncode, result)
        if proc.returncode != 0:
            print(proc.stdout[-3000:], file=sys.stderr)
        print(json.dumps(result))
        return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
