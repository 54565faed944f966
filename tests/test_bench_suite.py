"""bench/suite.py's pytest probe charges JAX's compilation events to the running test and to the compiled program,
and its summary sums them over the test workers: per test file and per program."""

import os
import types

from tool_modules import load_tool

COMPILE = "/jax/core/compile/backend_compile_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"


def _worker(suite, out, name: str, events: dict):
    """One test worker's records: per test node id, the events ``(event, seconds, program)`` during that test."""
    probe = types.ModuleType("probe")
    exec(suite.PROBE, probe.__dict__)
    for nodeid, during in events.items():
        probe.pytest_runtest_protocol(types.SimpleNamespace(nodeid=nodeid), None)
        for event, seconds, program in during:
            probe._listen(event, seconds, fun_name=program)
        probe.pytest_runtest_logfinish(nodeid, None)
        probe._listen(COMPILE, 100.0, fun_name="jit(between_tests)")  # no test running: charged to none
    probe.pytest_sessionfinish(types.SimpleNamespace(config=types.SimpleNamespace(workerinput={})))
    for suffix in (".json", ".programs"):  # the files are named by the process id: one per worker here
        (out / f"{os.getpid()}{suffix}").rename(out / f"{name}{suffix}")


def test_compilations_are_summed_per_program_over_workers_and_test_files(tmp_path, monkeypatch):
    suite = load_tool("suite", folder="bench")
    monkeypatch.setenv("ATTNLAB_BENCH_SUITE_OUT", str(tmp_path))
    _worker(suite, tmp_path, "gw0", {"tests/a.py::one": [(COMPILE, 2.0, "jit(f)"), (LOWER, 0.5, "jit(f)"),
                                                          ("/jax/other", 9.0, "jit(f)"), (COMPILE, 1.0, "jit(g)")],
                                     "tests/a.py::two": [(COMPILE, 1.5, "jit(f)")]})
    _worker(suite, tmp_path, "gw1", {"tests/b.py::three": [(COMPILE, 3.0, "jit(f)")]})
    summary = suite._summary(tmp_path)
    assert summary["compile_s"] == 7.5 and summary["lowering_s"] == 0.5 and summary["programs"] == 4
    assert summary["costliest_programs"] == [
        {"program": "jit(f)", "compile_s": 6.5, "compilations": 3, "lowering_s": 0.5, "test_files": 2},
        {"program": "jit(g)", "compile_s": 1.0, "compilations": 1, "lowering_s": 0.0, "test_files": 1}]
    files = {row["file"]: row for row in summary["files"]}
    assert files["tests/a.py"]["programs"] == 3 and files["tests/a.py"]["compile_lowering_tracing_s"] == 5.0
    assert files["tests/b.py"]["programs"] == 1
