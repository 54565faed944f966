"""tools/run_tests.py: a run that lost a worker to a native crash is repeated once; ordinary failures are not."""

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "tools" / "run_tests.py"

CRASH_ONCE = """
import os, pathlib
def test_a():
    pass
def test_crashes_the_first_time():
    flag = pathlib.Path(__file__).with_name("crashed.flag")
    if not flag.exists():
        flag.write_text("1")
        os.abort()  # a native crash of the worker, as XLA's segfaults are
"""

FAILS = """
import pathlib
def test_fails():
    runs = pathlib.Path(__file__).with_name("runs.txt")
    runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
    assert False
"""


UNUSED_PLUGINS = ("zarr", "jaxtyping", "anyio", "hypothesispytest")
"""Installed pytest plugins (entry points of the test extras' dependencies) that the suites below do not use: each
would be imported by every pytest process of them (1 s of the 2 s a process takes to start here)."""


def _run(tmp_path, source):
    (tmp_path / "test_case.py").write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    unused = [arg for name in UNUSED_PLUGINS for arg in ("-p", f"no:{name}")]
    return subprocess.run([sys.executable, str(SCRIPT), "-q", "-n", "2", "-p", "no:cacheprovider", *unused,
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_a_crashed_worker_ends_the_run_at_once_and_the_suite_runs_again(tmp_path):
    out = _run(tmp_path, CRASH_ONCE)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "a test worker crashed" in out.stdout
    assert out.stdout.count("+ -m pytest") == 2
    assert "2 passed" in out.stdout.splitlines()[-1]


@pytest.mark.slow
def test_an_ordinary_failure_is_not_retried(tmp_path):
    out = _run(tmp_path, FAILS)
    assert out.returncode == 1
    assert (tmp_path / "runs.txt").read_text() == "x"
    assert "a test worker crashed" not in out.stdout


def test_an_xdist_worker_computes_on_one_core():
    """Under pytest-xdist (make test), tests/conftest.py pins each worker, every thread of it, to one core before JAX
    starts (gwN on core N modulo the cores), as a sweep pins its workers: XLA's thread pool then has one thread
    instead of two workers' pools each spreading over every core."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or not hasattr(os, "sched_getaffinity"):
        pytest.skip("not a pytest-xdist worker, or no CPU affinity on this platform")
    cores = {c for t in os.listdir("/proc/self/task") for c in os.sched_getaffinity(int(t))}
    assert len(cores) == 1, cores
