"""Sweeps on Dask, faults and output: an unknown --plot metric stops the sweep after its first task; without a
terminal, one line per finished task with the tasks actually running; no dashboard-port warning; Ctrl-C prints one
line, and the interrupted driver kills its local workers instead of waiting for their tasks."""

import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

from attnlab.app import sweep as engine
from attnlab.app.cli import main
from attnlab.registry import get_preset

from .common import TINY_GRID, TINY_ITEMS

CHEAP = [*TINY_GRID, "--no-figures"]


def _runs(out: Path):
    return [p for p in (out / "marion-manifold").iterdir() if not p.name.startswith(".")] \
        if (out / "marion-manifold").is_dir() else []


def _in_process(monkeypatch):
    """Dask workers as threads of this process (no worker processes to start, compiled programs shared): the
    behaviour under test is the driver's."""
    make = engine.make_client
    monkeypatch.setattr(engine, "make_client", lambda scheduler=None, workers=None, processes=True, **kwargs:
                        make(scheduler, workers, processes=False, **kwargs))


def test_unknown_plot_metric_is_rejected_after_the_first_task(tmp_path, capsys, monkeypatch):
    _in_process(monkeypatch)
    out = tmp_path / "sw"
    rc = main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.05,0.1,0.15,0.2", *CHEAP, "--seeds", "2",
               "--workers", "1", "--out", str(out), "--plot", "final_abs_kapa_median"])
    assert rc == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "unknown metric 'final_abs_kapa_median'" in errors[0], err
    assert "final_abs_kappa_median" in errors[0]  # the names it knows
    assert len(_runs(out)) < 8  # the other tasks were cancelled
    assert not (out / "sweep.zarr").exists()


def test_without_a_terminal_a_line_per_task_and_no_dashboard_warning(tmp_path, capsys, monkeypatch):
    """capsys is no terminal: one progress line per finished task, whose 'running' never exceeds the workers;
    the scheduler's HTTP server never asks for port 8787 (taken here, by us or by someone else)."""
    _in_process(monkeypatch)
    blocker = socket.socket()
    try:
        blocker.bind(("127.0.0.1", 8787))
        blocker.listen()
    except OSError:
        pass  # already in use
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rc = main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.05,0.1", *CHEAP, "--seeds", "2",
                       "--workers", "2", "--out", str(tmp_path / "sw")])
    finally:
        blocker.close()
    assert rc == 0
    err = capsys.readouterr().err
    assert "already in use" not in err and not [w for w in caught if "already in use" in str(w.message)]
    lines = [ln for ln in err.splitlines() if "] marion-manifold[" in ln]
    assert len(lines) == 4, err
    for k, line in enumerate(lines, 1):
        assert f"[{k}/4]" in line and ("finished" in line or "reused" in line), line
        running = int(line.split("running ")[1].split(",")[0])
        assert running <= min(2, 4 - k), line


def test_running_counts_the_tasks_on_workers_not_the_queue(tmp_path):
    grid = engine.parse_grid([*TINY_ITEMS, "lambda0=0.05,0.1,0.15"])
    tasks = engine.expand_grid(get_preset("marion-manifold"), grid, [0, 1], True, False)
    seen = []
    client = engine.make_client(None, 2, processes=False)
    try:
        engine.run_tasks(client, tasks, tmp_path, lambda counts, outcome=None: seen.append(counts["running"]))
    finally:
        engine.close_client(client)
    assert seen[0] == 2 and max(seen) == 2 and seen[-1] == 0, seen


def test_ctrl_c_on_a_sweep_prints_one_line(tmp_path):
    """Ctrl-C at a terminal reaches the whole process group (driver and Dask workers): exit 130 and one line, no
    worker tracebacks, no leaked-semaphore warning."""
    start = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "sys.argv[0] = 'attnlab'; runpy.run_module('attnlab.app.cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", start, "sweep", "marion-sgd", "--quick", "--grid",
                             "n_steps=200000,400000", "--seeds", "2", "--workers", "2", "--no-figures", "--out", "sw"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list(tmp_path.glob("sw/*/.*.attnlab-tmp-*")):
        time.sleep(0.2)
    assert list(tmp_path.glob("sw/*/.*.attnlab-tmp-*")), "no task started within two minutes"
    time.sleep(1.0)
    os.killpg(proc.pid, signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    text = stderr.decode()
    assert proc.returncode == 130, text
    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert lines == ["interrupted"], text


def _state(pid: int) -> str:
    """The process's state letter from /proc (Z: exited, not yet reaped), or "gone"."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def _exited(pids, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(_state(pid) in ("Z", "gone") for pid in pids):
            return True
        time.sleep(0.05)
    return False


def test_an_interrupted_close_kills_the_local_workers_first(monkeypatch):
    """After a Ctrl-C the command line closes its LocalCluster with ``interrupted=True``, which kills the worker
    processes before closing (closing alone waits for their running tasks, and ends with them gone either way, so
    the kill is checked by itself): busy workers have exited right after the kill, while the control, the same
    busy workers not killed, are still running; and only an interrupted close calls the kill."""
    client = engine.make_client(None, 2)
    try:
        pids = [n.process.process.pid for n in client.cluster.workers.values()]
        futures = [client.submit(time.sleep, 30, pure=False) for _ in pids]
        time.sleep(1.0)
        assert not _exited(pids, within=0.5)  # the control: busy, not killed
        engine._kill_local_workers(client.cluster)
        assert _exited(pids), [_state(p) for p in pids]
        del futures
    finally:
        engine.close_client(client)
    killed = []
    monkeypatch.setattr(engine, "_kill_local_workers", killed.append)
    for interrupted in (False, True):
        client = engine.make_client(None, 1, processes=False)
        engine.close_client(client, interrupted=interrupted)
        assert len(killed) == interrupted
