"""bench/presets.py counts the modules a preset's run imports on first use as a fixed cost (``run_imports_s``), from
Python's own ``-X importtime`` between the probe's marks: here on a real child process's report."""

import subprocess
import sys

from tool_modules import load_tool

CHILD = """
import sys
import json  # before the run: not the run's
print("@@mark run", file=sys.stderr, flush=True)
import fractions
print("@@mark checks", file=sys.stderr, flush=True)
import difflib
print("@@mark end", file=sys.stderr, flush=True)
import statistics  # after the checks: the figures'
"""


def test_the_runs_own_imports_are_found_between_the_marks():
    bench = load_tool("presets", folder="bench")
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", CHILD], capture_output=True, text=True,
                         check=True).stderr
    found = bench.imports_by_phase(err)
    run, checks = ([name for _, name in found[p]] for p in ("run", "checks"))
    # only the outermost imports (each with what it imported: fractions' own re, decimal...), none outside the marks
    assert run == ["fractions"] and checks == ["difflib"], found
    assert all(t > 0 for p in found for t, _ in found[p])
