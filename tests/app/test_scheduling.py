"""The GPU layout of reproduce and sweep (attnlab.app.scheduling): detection, the layout, each task's resources and
order, and a real cluster of that layout run on the CPU."""

from __future__ import annotations

import os
import stat

import pytest

from attnlab import runtime
from attnlab.app import scheduling
from attnlab.app import sweep as engine
from attnlab.app.scheduling import Layout
from attnlab.app.sweep import Task

from .common import TINY_KWARGS

TINY = tuple(TINY_KWARGS.items())


def _plugin(monkeypatch, name):
    monkeypatch.setattr(runtime, "accelerator_plugin", lambda: name)


def test_no_plugin_no_gpu(monkeypatch):
    _plugin(monkeypatch, None)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert scheduling.visible_gpus() == ()
    assert scheduling.choose_layout(cores=16) == Layout((), 16)


def test_gpus_from_cuda_visible_devices(monkeypatch):
    _plugin(monkeypatch, "jax-cuda12-plugin")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert scheduling.visible_gpus() == ()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    assert scheduling.visible_gpus() == ()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert scheduling.visible_gpus() == ("2", "3")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")  # the user asked for the CPU
    assert scheduling.visible_gpus() == ()


def test_gpus_from_nvidia_smi(monkeypatch, tmp_path):
    _plugin(monkeypatch, "jax-cuda13-plugin")
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-1)'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert scheduling.visible_gpus() == ("0",)
    smi.write_text("#!/bin/sh\necho 'No devices were found'\nexit 6\n")
    assert scheduling.visible_gpus() == ()
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no nvidia-smi
    assert scheduling.visible_gpus() == ()


def test_layout_one_gpu_and_the_other_cores(monkeypatch):
    layout = scheduling.choose_layout(cores=16, gpus=("0",))
    assert layout == Layout(("0",), 15) and layout.workers == 16
    assert layout.describe() == "on 1 GPU: 1 GPU worker, 15 CPU workers"
    assert scheduling.choose_layout(6, cores=16, gpus=("0",)) == Layout(("0",), 5)  # --workers caps the total
    assert scheduling.choose_layout(1, cores=16, gpus=("0",)) == Layout(("0",), 0)
    assert scheduling.choose_layout(cores=2, gpus=("0", "1")) == Layout(("0", "1"), 0)
    assert scheduling.choose_layout(4, cores=16, gpus=()) == Layout((), 4)  # no GPU: today's layout
    assert scheduling.choose_layout(4, cores=16, gpus=()).describe() == "on the CPU: 4 workers"
    monkeypatch.setattr(scheduling, "visible_gpus", lambda: ("0",))  # detection by default
    assert scheduling.choose_layout(cores=16) == Layout(("0",), 15)


def test_the_default_is_one_worker_per_usable_core(monkeypatch):
    """Without --workers, one CPU worker per core the process may run on (its affinity), not per core of the machine:
    a process under taskset, in a container's CPU set or pinned (a test worker) starts no more workers than cores."""
    monkeypatch.setattr(scheduling, "visible_gpus", lambda: ())
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert scheduling.usable_cores() == 1 and scheduling.choose_layout() == Layout((), 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert scheduling.usable_cores() == 3 and scheduling.choose_layout() == Layout((), 3)
    assert scheduling.choose_layout(5) == Layout((), 5)  # --workers wins
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)  # a platform without affinities: every core
    assert scheduling.usable_cores() == 8


def test_resources_and_order():
    tasks = [Task("marion-manifold", (), 0, False), Task("bruno-backward-heat", (), 0, False),
             Task("marion-transformer-single-head", (), 0, False), Task("not-in-the-table", (), 0, False),
             Task("dohmatob-rgd", (), 0, False)]
    native = [False, True, False, False, True]
    resources, order = scheduling.plan(None, tasks, Layout(("0",), 3), native)
    # bruno-backward-heat has a C kernel on the CPU, but its paper's presets run on the GPU (GPU_PREFERRED)
    assert resources == [{"GPU": 1}, {"GPU": 1}, {"GPU": 1}, {"GPU": 1}, {"CPU": 1}]
    # unknown first, then by the table's full times, longest first
    known = sorted((t for t in tasks if t.preset in scheduling.EXPECTED_S),
                   key=lambda t: -scheduling.EXPECTED_S[t.preset][0])
    assert [tasks[i].preset for i in order] == ["not-in-the-table", *(t.preset for t in known)]
    assert known[0].preset == "marion-transformer-single-head" and known[-1].preset == "marion-manifold"
    # no CPU worker: everything on the GPU worker
    assert scheduling.plan(None, tasks, Layout(("0",), 0))[0] == [{"GPU": 1}] * 5
    # the CPU layout and an external scheduler: no resources, longest first too
    longest_first = [3, *sorted((0, 1, 2, 4), key=lambda i: -scheduling.EXPECTED_S[tasks[i].preset][0])]
    for layout in (Layout((), 4), None):
        assert scheduling.plan(None, tasks, layout, native) == ([None] * 5, longest_first)
    # a sweep's tasks (one preset) keep their order
    same = [Task("marion-sgd", (("seed", s),), s, True) for s in range(3)]
    assert scheduling.plan(None, same, Layout((), 2))[1] == [0, 1, 2]
    # quick sizes: the table's quick times (the second of each pair)
    quick = [Task("marion-sgd", (), 0, True), Task("dohmatob-flow", (), 0, True)]
    t = [scheduling.EXPECTED_S[task.preset][1] for task in quick]
    assert t[0] != t[1]
    assert scheduling.plan(None, quick, Layout(("0",), 1), [False, False])[1] == ([0, 1] if t[0] > t[1] else [1, 0])


def test_native_presets_are_told_on_the_cpu():
    from attnlab.bruno import native as bruno_native

    assert scheduling.native_flags([Task("marion-manifold", TINY, 0, True)]) == [False]
    bruno = Task("bruno-backward-heat", (), 0, False)  # full size: float32, d = 3, in the C kernel's domain
    if runtime.accelerator_plugin() is None and bruno_native.available():
        assert scheduling.uses_native(bruno)
    assert not scheduling.uses_native(Task("bruno-backward-heat", (("implementation", "jax"),), 0, True))
    assert not scheduling.uses_native(Task("bruno-forward-heat", (), 0, False))  # d = 2: the exact circle sums
    assert scheduling.native_flags([Task("no-such-preset", (), 0, True)]) == [False]  # fails later, on its own


def _env(_):
    import jax

    return {k: os.environ.get(k) for k in ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE")} \
        | {"threads": __import__("distributed").get_worker().state.nthreads, "backend": jax.default_backend()}


@pytest.mark.timeout(600)
def test_gpu_layout_runs_tasks_on_both_kinds_of_worker(tmp_path, monkeypatch):
    """The GPU layout's cluster, forced on the CPU: one 'GPU' worker and one CPU worker; a task routed to each
    finishes; the workers have their environments; a task's retry keeps its resources."""
    for name in ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR"):
        monkeypatch.delenv(name, raising=False)
    layout = Layout(("0",), 1)
    client = engine.make_client(layout=layout)
    try:
        info = client.run(lambda dask_worker: dict(dask_worker.state.total_resources))
        assert sorted(map(str, info.values())) == ["{'CPU': 1}", "{'GPU': 1}"]
        gpu = client.submit(_env, 0, resources={"GPU": 1}, pure=False).result()
        cpu = client.submit(_env, 1, resources={"CPU": 1}, pure=False).result()
        assert gpu["CUDA_VISIBLE_DEVICES"] == "0" and gpu["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
        assert cpu["CUDA_VISIBLE_DEVICES"] == "" and cpu["JAX_PLATFORMS"] == "cpu" and cpu["backend"] == "cpu"
        assert gpu["threads"] == cpu["threads"] == 1
        tasks = [Task("marion-manifold", TINY, seed, True, figures=False) for seed in (0, 1)]
        # the question asked of the CPU worker: marion-manifold has no C kernel, so both would go to the GPU
        assert scheduling.plan(client, tasks, layout) == ([{"GPU": 1}] * 2, [0, 1])
        outcomes = engine.run_tasks(client, tasks, tmp_path, resources=[{"GPU": 1}, {"CPU": 1}], order=[1, 0])
        assert [o.status for o in outcomes] == ["finished", "finished"], [o.error for o in outcomes]
        assert [o.task.seed for o in outcomes] == [0, 1]
        where = engine.run_tasks(client, [tasks[0], tasks[1]], tmp_path / "w", task_fn=_where_failing_once,
                                 resources=[{"CPU": 1}, {"GPU": 1}])
        assert [(o.status, o.attempts, o.error) for o in where] == [("failed", 2, "cpu cpu"),
                                                                    ("failed", 2, "gpu gpu")]
    finally:
        engine.close_client(client)


def _where_failing_once(task, root):
    """Fails, saying on which kind of worker it ran (twice: the retry)."""
    from pathlib import Path

    kind = "cpu" if os.environ.get("JAX_PLATFORMS") == "cpu" else "gpu"
    mark = Path(root) / f"seed{task.seed}"
    before = mark.read_text() if mark.exists() else ""
    Path(root).mkdir(parents=True, exist_ok=True)
    mark.write_text(f"{before} {kind}".strip())
    return {"status": "failed", "error": mark.read_text()}


PIN_PROBE = """
import json, os, sys
try:  # every core of the machine, as a process started outside a pinned test worker
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
except OSError:
    pass
import numpy as np
from threadpoolctl import threadpool_info

a = np.random.default_rng(0).standard_normal((40, 40))
np.linalg.eigh(a @ a.T)  # NumPy's BLAS pool, started before the pin as in a worker
if sys.argv[1] == "control":  # pin_threads without its limit: the threads pinned, the pools as they were
    import threadpoolctl

    threadpoolctl.threadpool_limits = lambda limits: None
from attnlab.app.scheduling import pin_threads

pin_threads(min(os.sched_getaffinity(0)))
print(json.dumps([p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_pinning_a_process_to_one_core_leaves_its_blas_one_thread():
    """A process pinned by pin_threads after NumPy started its BLAS pool (a test or Dask worker) computes with one BLAS
    thread. Control: pinned without the limit, the pool keeps the threads it was sized for on every core, which on
    one core wait for each other spinning."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}

    def blas_threads(how):
        res = subprocess.run([sys.executable, "-c", PIN_PROBE, how], capture_output=True, text=True, timeout=120,
                             env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        return json.loads(res.stdout)

    control = blas_threads("control")
    if max(control, default=1) < 2:
        pytest.skip(f"no multi-threaded BLAS pool here to limit (threads {control})")
    assert blas_threads("pin_threads") == [1] * len(control)
