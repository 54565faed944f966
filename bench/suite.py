"""Benchmark: where ``make test``'s time goes, from a clean clone with an empty home, then with every program compiled.

This repository's HEAD (its committed files, as CI checks them out) is cloned into a temporary directory and, with
``HOME`` set to a new empty directory (no compilation cache, no saved programs; pip installs from its usual sources),
measured twice:

* ``cold``: ``make .venv/.installed-test`` (``setup_s``: the virtual environment and the installs), then
  ``make test`` (``suite_wall_s``); ``make_test_wall_s`` is their sum, what CI's ``.ci/run`` takes;
* ``warm``: ``make test`` again in the same clone and home, where the first run left every program in the
  compilation cache and every traced program saved: the suite with (almost) no compilation, the plain reference of
  ``ratio_cold_over_warm``.

In each run a pytest plugin (loaded through ``PYTEST_ADDOPTS``, in the test workers only) records per test its wall
time and JAX's own monitoring events: XLA compilation or a cache load (``backend_compile_duration``, and their count
``programs``), lowering to MLIR and tracing. The result sums them over the test workers (``test_worker_s``,
``compile_s``, ``lowering_s``, ``tracing_s``) and lists the test files that take longest (``files``: worker-seconds
and compilation) and the programs whose compilations cost most (``costliest_programs``: a program is the name
JAX compiles it under, ``jit(f)``, summed over its shapes and static arguments, with the number of compilations and
of test files that caused them). The clone and home are removed afterwards (``--keep`` keeps them under a folder of yours).

    .venv/bin/python bench/suite.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r'''
import json, os, time
from pathlib import Path

_EVENTS = {"/jax/core/compile/backend_compile_duration": "compile_s",
           "/jax/core/compile/jaxpr_to_mlir_module_duration": "lowering_s",
           "/jax/core/compile/jaxpr_trace_duration": "tracing_s"}
_tests = {}
_current = [None, None]
_programs = {}


def _listen(event, seconds, **kwargs):
    key = _EVENTS.get(event)
    if key is not None and _current[0] is not None:
        row = _current[0]
        row[key] += seconds
        if key == "compile_s":
            row["programs"] += 1
        name = str(kwargs.get("fun_name", "?"))
        program = _programs.setdefault(name, {"compilations": 0, "compile_s": 0.0, "lowering_s": 0.0,
                                              "tracing_s": 0.0, "files": []})
        program[key] += seconds
        if key == "compile_s":
            program["compilations"] += 1
            test_file = _current[1].split("::")[0]
            if test_file not in program["files"]:
                program["files"].append(test_file)


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # a pytest-xdist test worker (not the controller, not a nested pytest)
        import jax.monitoring
        jax.monitoring.register_event_duration_secs_listener(_listen)


def pytest_runtest_protocol(item, nextitem):
    _current[1] = item.nodeid
    _current[0] = _tests[item.nodeid] = {"wall_s": 0.0, "compile_s": 0.0, "lowering_s": 0.0, "tracing_s": 0.0,
                                         "programs": 0}
    _current[0]["start"] = time.perf_counter()


def pytest_runtest_logfinish(nodeid, location):
    row = _tests.get(nodeid)
    if row is not None and "start" in row:
        row["wall_s"] = time.perf_counter() - row.pop("start")
    _current[0] = None


def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        out = Path(os.environ["ATTNLAB_BENCH_SUITE_OUT"]) / f"{os.getpid()}.json"
        out.write_text(json.dumps(_tests))
        out.with_suffix(".programs").write_text(json.dumps(_programs))
'''


@contextlib.contextmanager
def scratch(keep: Path | None, prefix: str):
    """A new temporary folder for a benchmark's work, removed at the end, or moved to ``keep`` (a folder that must
    not exist yet: the caller refuses one that does, :func:`refused_keep`)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        if keep is not None:
            shutil.move(str(work), str(keep))
        else:
            shutil.rmtree(work, ignore_errors=True)


def refused_keep(keep: Path | None, script: str) -> bool:
    """Whether ``--keep DIR`` names a folder that exists (said in one line): nothing of the user's is replaced."""
    if keep is not None and keep.exists():
        print(f"{script}: {keep} exists; --keep needs a new folder", file=sys.stderr)
        return True
    return False


def _make(target: str, clone: Path, env: dict) -> tuple[float, int, str]:
    t = time.perf_counter()
    proc = subprocess.run(["make", target], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    return time.perf_counter() - t, proc.returncode, proc.stdout


def _summary(folder: Path) -> dict:
    """The probe's records of one run, summed over its test workers, and the test files that took longest."""
    totals = collections.Counter()
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    tests = 0
    for path in folder.glob("*.json"):
        for nodeid, row in json.loads(path.read_text()).items():
            tests += 1
            name = nodeid.split("::")[0]
            for key, value in row.items():
                totals[key] += value
                files[name][key] += value
    top = sorted(files.items(), key=lambda kv: -kv[1]["wall_s"])[:15]
    programs: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    program_files: dict[str, set] = collections.defaultdict(set)
    for path in folder.glob("*.programs"):
        for name, row in json.loads(path.read_text()).items():
            programs[name].update({k: v for k, v in row.items() if k != "files"})
            program_files[name].update(row["files"])
    costly = sorted(programs.items(), key=lambda kv: -kv[1]["compile_s"])[:20]
    return {"test_worker_s": round(totals["wall_s"], 1), "compile_s": round(totals["compile_s"], 1),
            "lowering_s": round(totals["lowering_s"], 1), "tracing_s": round(totals["tracing_s"], 1),
            "programs": int(totals["programs"]), "tests": tests,
            "files": [{"file": name, "worker_s": round(c["wall_s"], 1),
                       "compile_lowering_tracing_s": round(c["compile_s"] + c["lowering_s"] + c["tracing_s"], 1),
                       "programs": int(c["programs"])} for name, c in top],
            "costliest_programs": [{"program": name, "compile_s": round(c["compile_s"], 1),
                                    "compilations": int(c["compilations"]), "lowering_s": round(c["lowering_s"], 1),
                                    "test_files": len(program_files[name])} for name, c in costly]}


def _passed(output: str) -> str:
    lines = [line for line in output.splitlines() if " passed" in line or " failed" in line]
    return lines[-1].strip("= ") if lines else "no pytest summary"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, default=None, help="keep the clone and its home in this (new) folder")
    args = ap.parse_args(argv)
    if refused_keep(args.keep, "suite.py"):
        return 2
    with scratch(args.keep, "attnlab-bench-suite-") as work:
        clone, home, probe = work / "clone", work / "home", work / "probe"
        home.mkdir()
        probe.mkdir()
        (probe / "attnlab_bench_suite_probe.py").write_text(PROBE)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, stdout=subprocess.PIPE, text=True,
                              check=True).stdout.strip()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST_", "ATTNLAB_"))}
        env.update(HOME=str(home), PYTEST_ADDOPTS="-p attnlab_bench_suite_probe",
                   PYTHONPATH=str(probe) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""))
        result: dict = {"commit": head}
        for state in ("cold", "warm"):
            out = work / state
            out.mkdir()
            env["ATTNLAB_BENCH_SUITE_OUT"] = str(out)
            setup_s = 0.0
            if state == "cold":
                setup_s, rc, text = _make(".venv/.installed-test", clone, env)
                if rc != 0:
                    print(text[-3000:], file=sys.stderr)
                    print(f"suite.py: the set-up failed (exit status {rc})", file=sys.stderr)
                    return 1
            suite_s, rc, text = _make("test", clone, env)
            failures = [line for line in text.splitlines() if line.startswith(("FAILED", "ERROR"))]
            row = {"state": state, "setup_s": round(setup_s, 1), "suite_wall_s": round(suite_s, 1),
                   "make_test_wall_s": round(setup_s + suite_s, 1), "exit_status": rc, "pytest": _passed(text),
                   "failures": failures[:20],
                   **_summary(out)}
            print(json.dumps(row), flush=True)
            result[state] = row
        cold, warm = result["cold"], result["warm"]
        result.update(
            passed=cold["exit_status"] == 0 and warm["exit_status"] == 0,
            cold_make_test_wall_s=cold["make_test_wall_s"], cold_setup_s=cold["setup_s"],
            cold_suite_wall_s=cold["suite_wall_s"], warm_suite_wall_s=warm["suite_wall_s"],
            ratio_cold_over_warm=round(cold["suite_wall_s"] / warm["suite_wall_s"], 2),
            cold_compile_s=cold["compile_s"], cold_lowering_s=cold["lowering_s"], cold_tracing_s=cold["tracing_s"],
            cold_programs=cold["programs"], cold_test_worker_s=cold["test_worker_s"],
            warm_test_worker_s=warm["test_worker_s"],
            cold_compile_share=round((cold["compile_s"] + cold["lowering_s"] + cold["tracing_s"])
                                     / cold["test_worker_s"], 3))
        print(json.dumps(result))
        return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
