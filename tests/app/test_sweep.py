"""Sweeps on Dask: grids, LocalCluster and external scheduler, resume after kill -9, failures, determinism."""

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnlab import runtime
from attnlab.app import scheduling
from attnlab.app import sweep as engine
from attnlab.app.cli import main
from attnlab.registry import get_preset

from .common import TINY_GRID, TINY_ITEMS

# a cheap task: the command-line tests' tiny manifold config, without its figures (about 1.5 s of matplotlib per
# task; the figures of runs through the task engine are tested by `attnlab reproduce` in test_cli)
CHEAP = [*TINY_GRID, "--no-figures"]


def _sweep(out, *extra, workers=2):
    return main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.05,0.1", *CHEAP, "--seeds", "2",
                 "--workers", str(workers), "--out", str(out), *extra])


def _open(out):
    return xr.open_zarr(Path(out) / "sweep.zarr").load()


@pytest.mark.parametrize(
    "grid, fragment",
    [
        (["--grid", "nope=1,2"], "unknown config key 'nope'"),
        (["--grid", "lambda0="], "empty value list"),
        (["--grid", "lambda0"], "malformed --grid"),
        (["--grid", "d=ten,twenty"], "'d'"),
        (["--grid", "lambda0=0.1,-1"], "'lambda0'"),
        (["--grid", "step_size=1e-3,,2e-3"], "empty item"),
        (["--grid", "step_size=1e-3,"], "empty item"),
        (["--grid", "n_steps=400,true"], "'n_steps'"),
        (["--grid", "step_size=1e-3,inf"], "'step_size'"),
        (["--plot", "not a metric"], "unknown metric"),
    ],
)
def test_bad_grids_exit_2_and_write_nothing(tmp_path, monkeypatch, capsys, grid, fragment):
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "marion-manifold", *grid]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and fragment in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_grid_expansion_is_validated_and_typed():
    preset = get_preset("marion-manifold")
    tasks = engine.expand_grid(preset, engine.parse_grid(["lambda0=0.1,1e-1,0.2", "init=sphere"]), [0, 1], True)
    assert len(tasks) == 6
    assert tasks[0].overrides == (("lambda0", 0.1), ("init", "sphere"))


@pytest.fixture(scope="module")
def two_worker_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep2")
    rc = _sweep(out, "--plot", "final_excess_risk_median", workers=2)
    return rc, out


def test_local_cluster_sweep_writes_sweep_zarr_and_runs(two_worker_sweep):
    rc, out = two_worker_sweep
    assert rc == 0
    ds = _open(out)
    assert ds.final_excess_risk_median.sizes["lambda0"] == 2 and ds.sizes["seed"] == 2
    # CF: each swept field and the seed are dimension coordinates with units and long_name; JSON-native attributes
    assert ds.lambda0.attrs == {"long_name": "attention scale (initial value under the schedule)", "units": "1"}
    assert ds.seed.attrs["units"] == "1" and ds.seed.attrs["long_name"]
    assert ds.attrs["preset"] == "marion-manifold" and ds.attrs["seeds"] == [0, 1] and ds.attrs["quick"] is True
    assert ds.attrs["grid"]["lambda0"] == [0.05, 0.1] and ds.attrs["citation"].startswith("Marion")
    assert set(np.unique(ds.status.values)) == {"finished"}
    assert np.all(np.isfinite(ds.final_excess_risk_median.values))
    runs = [p for p in (out / "marion-manifold").iterdir() if not p.name.startswith(".")]
    assert len(runs) == 4 and all((r / "summary.json").is_file() for r in runs)
    # --no-figures: data, summary and config, no figure
    assert all(json.loads((r / "summary.json").read_text())["figures"] == [] for r in runs)
    assert not any(f.suffix in (".png", ".pdf") for r in runs for f in r.iterdir())
    assert (out / "sweep-final_excess_risk_median.png").is_file()
    # larger lambda, larger oracle risk floor: the metric really varies along the swept field
    assert float(ds.oracle_risk.sel(lambda0=0.1).mean()) > float(ds.oracle_risk.sel(lambda0=0.05).mean())


def test_one_worker_and_two_workers_give_identical_results(two_worker_sweep, tmp_path):
    _, out2 = two_worker_sweep
    assert _sweep(tmp_path / "one", workers=1) == 0
    a, b = _open(out2), _open(tmp_path / "one")
    for name in a.data_vars:
        if a[name].dtype.kind == "f" and name != "elapsed_s":
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
    for d in (out2 / "marion-manifold").iterdir():
        other = tmp_path / "one" / "marion-manifold" / d.name
        assert json.loads((d / "summary.json").read_text())["metrics"] == \
            json.loads((other / "summary.json").read_text())["metrics"]


def test_rerun_resumes_by_reusing_finished_tasks(two_worker_sweep, capsys):
    rc, out = two_worker_sweep
    run_dir = next((out / "marion-manifold").iterdir())
    mine = {out / "notes.md": "beside the sweep", out / "analysis" / ".cache.tmp-keep" / "f": "a hidden cache",
            run_dir / "notes.md": "inside a task's run"}
    for path, text in mine.items():  # the user's files, where older clean-up patterns reached
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    t0 = time.perf_counter()
    assert _sweep(out) == 0
    assert "4 reused" in capsys.readouterr().out
    assert set(np.unique(_open(out).status.values)) == {"reused"}
    assert time.perf_counter() - t0 < 60
    assert all(path.read_text() == text for path, text in mine.items())


def _flaky_task(task, root):
    """Fails for lambda0 = 0.05 (every attempt) and runs the others normally."""
    if dict(task.overrides)["lambda0"] == 0.05:
        raise RuntimeError("boom")
    return engine.run_task(task, root)


def _count_attempts(task, root, _seen={}):  # noqa: B006
    _seen[task] = _seen.get(task, 0) + 1
    if _seen[task] == 1:
        return {"status": "failed", "error": "transient"}
    return engine.run_task(task, root)


def _xla_flags():
    return os.environ.get("XLA_FLAGS")


def test_a_local_cluster_gives_its_workers_their_xla_flags_and_leaves_this_process_as_it_was(monkeypatch):
    """The workers start with WORKER_XLA_FLAGS in XLA_FLAGS; this process's XLA_FLAGS, which JAX hashes into every
    compilation-cache key, is left as it was (changing it made the process that started a sweep, a test worker
    or a notebook, miss every program it had cached). (Dask's nannies set their documented pre-spawn variables,
    OMP_NUM_THREADS and the like, in this process.) This process has the flags of one that may use two cores (a
    test worker, on one core, already has the workers' flags); control: the workers' flags are not this
    process's."""
    monkeypatch.setenv("XLA_FLAGS", " ".join(runtime.OPTIMISATION_FLAGS))  # read by JAX at start only
    before = os.environ.get("XLA_FLAGS")
    client = engine.make_client(workers=1)
    try:
        (worker_flags,) = client.run(_xla_flags).values()
    finally:
        engine.close_client(client, own_cluster=True)
    assert os.environ.get("XLA_FLAGS") == before
    for flag in engine.WORKER_XLA_FLAGS:
        assert flag.split("=")[0] in worker_flags, (flag, worker_flags)
    assert "--xla_cpu_multi_thread_eigen=false" not in (before or ""), "the control is void"
    assert worker_flags.startswith(before or ""), "the user's flags come first and win"


def _pinning(_):
    """(pin_worker's core, the worker's name, every thread's cores) in a task on a worker."""
    from distributed import get_worker

    core = scheduling.pin_worker()
    threads = {c for t in os.listdir("/proc/self/task") for c in os.sched_getaffinity(int(t))}
    return core, get_worker().name, sorted(threads)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_a_local_clusters_workers_each_compute_on_a_core_of_their_own():
    """Worker i of a local cluster runs, all its threads (XLA's thread pool included), on core i of the cores this
    process may use (modulo their number): two workers' XLA pools no longer share every core. Control: an
    in-process worker (no worker environment) is left as it was, on every core of this process."""
    cores = sorted(os.sched_getaffinity(0))
    client = engine.make_client(workers=2)
    try:
        workers = list(client.scheduler_info()["workers"])
        got = [client.submit(_pinning, i, workers=[w], pure=False).result() for i, w in enumerate(workers)]
    finally:
        engine.close_client(client, own_cluster=True)
    assert sorted(name for _, name, _ in got) == [0, 1]
    for core, name, threads in got:
        assert core == cores[name % len(cores)] and threads == [core], (core, name, threads, cores)
    assert len({core for core, _, _ in got}) == min(2, len(cores))
    assert sorted(os.sched_getaffinity(0)) == cores, "this process is left as it was"
    client = engine.make_client(workers=1, processes=False)
    try:
        (core, _, threads), = [client.submit(_pinning, 0, pure=False).result()]
    finally:
        engine.close_client(client, own_cluster=True)
    assert core is None and threads == cores


def _malloc_trim(_):
    return os.environ.get("MALLOC_TRIM_THRESHOLD_")


def test_a_local_clusters_workers_keep_glibcs_dynamic_malloc_thresholds(monkeypatch):
    """make_client's workers start without Dask's MALLOC_TRIM_THRESHOLD_=65536 (which fixes glibc's thresholds:
    every large buffer XLA frees is unmapped and faulted in again), and this process's environment does not get it
    either. Control: a LocalCluster with Dask's defaults gives it to its worker and to this process."""
    # restored afterwards, unset or the user's value (delenv of an unset variable alone would leave Dask's value set)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "")
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_")
    client = engine.make_client(workers=1)
    try:
        got = client.submit(_malloc_trim, 0, pure=False).result()
    finally:
        engine.close_client(client, own_cluster=True)
    assert got is None and "MALLOC_TRIM_THRESHOLD_" not in os.environ
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster) as plain:
        assert plain.submit(_malloc_trim, 0, pure=False).result() == "65536"
    assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == "65536", "the control is void"


def test_failing_task_is_retried_once_recorded_and_does_not_stop_the_others(tmp_path):
    preset = get_preset("marion-manifold")
    grid = engine.parse_grid(["lambda0=0.05,0.1", *TINY_ITEMS])
    tasks = engine.expand_grid(preset, grid, [0], True, figures=False)
    client = engine.make_client(workers=1, processes=False)
    try:
        outcomes = engine.run_tasks(client, tasks, tmp_path, task_fn=_flaky_task)
        retried = engine.run_tasks(client, tasks[1:], tmp_path / "retry", task_fn=_count_attempts)
    finally:
        client.close()
    by_lambda = {dict(o.task.overrides)["lambda0"]: o for o in outcomes}
    assert by_lambda[0.05].status == "failed" and "boom" in by_lambda[0.05].error and by_lambda[0.05].attempts == 2
    assert by_lambda[0.1].status == "finished"
    assert retried[0].status == "finished" and retried[0].attempts == 2
    ds = engine.collect(outcomes, grid, [0])
    assert str(ds.status.sel(lambda0=0.05).values.ravel()[0]) == "failed"
    assert np.isnan(float(ds.final_excess_risk_median.sel(lambda0=0.05).values.ravel()[0]))


def test_an_unexpected_exception_keeps_its_traceback_for_the_final_report(tmp_path, monkeypatch):
    """A task that raises (a bug, not bad input) fails with its one-line error on the progress line and its
    traceback kept for the final report of sweep and reproduce, indented under the failed task's line; a
    deterministic non-finite result has none (its message says it all)."""
    from attnlab.app import store
    from attnlab.errors import NonFiniteResultError

    preset = get_preset("marion-manifold")
    grid = engine.parse_grid(["lambda0=0.05,0.1", *TINY_ITEMS])
    tasks = engine.expand_grid(preset, grid, [0], True, figures=False)

    def broken(preset, config, seed, **kw):
        if config.lambda0 == 0.05:
            raise KeyError("replica_test_error_lam0.01")
        raise NonFiniteResultError("marion-manifold: the results are not finite; nothing was written")

    monkeypatch.setattr(store, "run_preset", broken)
    client = engine.make_client(workers=1, processes=False)
    try:
        outcomes = engine.run_tasks(client, tasks, tmp_path)
    finally:
        client.close()
    bug, nonfinite = sorted(outcomes, key=lambda o: dict(o.task.overrides)["lambda0"])
    assert bug.status == "failed" and bug.error == "KeyError: 'replica_test_error_lam0.01'" and bug.attempts == 2
    lines = bug.traceback_lines().splitlines()
    assert lines[0] == "" and lines[1] == "    Traceback (most recent call last):"
    assert lines[-1] == "    KeyError: 'replica_test_error_lam0.01'" and all(ln.startswith("    ") for ln in lines[1:])
    assert any("in broken" in ln for ln in lines)
    assert nonfinite.status == "failed" and nonfinite.attempts == 1 and nonfinite.traceback_lines() == ""


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_sweep_on_a_separately_started_scheduler_and_worker(tmp_path):
    port = _free_port()
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    env = {**os.environ, **engine.worker_env()}
    sched = subprocess.Popen([*dask, "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", f"tcp://127.0.0.1:{port}",
                               "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
    try:
        rc = main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.1", *CHEAP,
                   "--scheduler", f"tcp://127.0.0.1:{port}", "--out", str(tmp_path / "ext")])
        assert rc == 0
        assert set(np.unique(_open(tmp_path / "ext").status.values)) == {"finished"}
    finally:
        for proc in (worker, sched):
            proc.terminate()
            proc.wait(timeout=30)


def test_kill_9_then_resume_completes_every_task_exactly_once(tmp_path):
    out = tmp_path / "killed"
    argv = [sys.executable, "-m", "attnlab.app.cli", "sweep", "marion-manifold", "--quick",
            "--grid", "lambda0=0.05,0.2", *CHEAP, "--seeds", "4", "--workers", "2", "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while time.time() < deadline:  # kill once at least one task has finished, while others are in flight
        done = list(out.glob("marion-manifold/[!.]*/summary.json"))
        if done:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished_before = {p.parent.name for p in out.glob("marion-manifold/[!.]*/summary.json")}
    assert 1 <= len(finished_before) < 8
    # every directory that looks like a run is complete
    for d in (out / "marion-manifold").iterdir():
        if not d.name.startswith("."):
            assert (d / "summary.json").is_file() and (d / "config.json").is_file()
    rc = main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.05,0.2", *CHEAP, "--seeds", "4",
               "--workers", "1", "--out", str(out)])
    assert rc == 0
    ds = _open(out)
    runs = [d for d in (out / "marion-manifold").iterdir()]
    assert len(runs) == 8 and not any(d.name.startswith(".") for d in runs)  # no leftovers, no duplicates
    status = ds.status.values.ravel().tolist()
    assert status.count("reused") == len(finished_before) and status.count("finished") == 8 - len(finished_before)


def _outcome(overrides, seed, value, checks):
    task = engine.Task("marion-manifold", tuple(overrides), seed, True)
    return engine.Outcome(task, "finished", summary={"metrics": {"risk": value}, "checks": checks})


def test_a_metric_compared_with_theory_carries_the_checks_theory_and_is_drawn_with_it(tmp_path):
    """collect pairs a metric with the theory of the check whose simulation value it is (and no other); the sweep
    figure labels the field in the papers' notation, draws integer ticks for an integer field and markers only for
    fewer than five points."""
    check = {"name": "c", "theory": 1.0, "simulation": 1.1, "tolerance": 0.5, "passed": True}
    other = {"name": "o", "theory": 7.0, "simulation": 3.0, "tolerance": 0.5, "passed": True}
    outcomes = [_outcome([("L", L)], s, 1.1 * L, [other, {**check, "theory": 1.0 * L, "simulation": 1.1 * L}])
                for L in (2, 3, 5) for s in (0, 1)]
    ds = engine.collect(outcomes, {"L": [2, 3, 5]}, [0, 1], get_preset("marion-manifold"))
    np.testing.assert_allclose(ds["risk__theory"].values, [[2.0, 2.0], [3.0, 3.0], [5.0, 5.0]])
    assert "risk__theory" not in engine.collect([_outcome([("L", 2)], 0, 1.1, [other])], {"L": [2]}, [0])
    assert math.isnan(engine.check_theory([other], float("nan")))
    written = engine.plot_metric(ds, "risk", tmp_path)
    assert {Path(w).suffix for w in written} == {".png", ".pdf"}
    with pytest.raises(engine.AttnlabError):
        engine.plot_metric(ds, "risk__theory", tmp_path)
    assert engine.field_label("lambda0", "attention scale") == r"attention scale ($\lambda_{0}$)"
    assert engine.field_symbol("n_steps") is None and engine.field_symbol("eps") == r"$\varepsilon$"


def test_the_sweep_figure_has_markers_only_under_five_points_and_integer_ticks(tmp_path, monkeypatch):
    from attnlab import plot

    drawn = {}
    monkeypatch.setattr(plot, "save_figure", lambda fig, out, name: drawn.setdefault("fig", fig) and [])
    outcomes = [_outcome([("L", L)], s, 0.5 * L + 0.1 * s, []) for L in (2, 3, 4) for s in (0, 1)]
    engine.plot_metric(engine.collect(outcomes, {"L": [2, 3, 4]}, [0, 1], get_preset("marion-manifold")), "risk",
                       tmp_path)
    ax = drawn["fig"].axes[0]
    assert all(line.get_linestyle() == "None" for line in ax.lines)
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert "$L$" in ax.get_xlabel() and "_" not in ax.get_ylabel()
