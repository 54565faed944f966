"""Where the tasks of ``attnlab reproduce`` and ``attnlab sweep`` run on this machine.

* **CPU layout** (no GPU): one single-threaded worker process per core (or ``--workers``), any task on any worker.
* **GPU layout** (a JAX accelerator plugin is installed and a GPU is visible, :func:`visible_gpus`): one worker
  process per GPU owning it (``CUDA_VISIBLE_DEVICES`` set to that GPU, one thread, Dask resource ``GPU``, JAX's
  memory allocated on demand unless the user chose otherwise: :data:`GPU_ENV`), running the JAX presets back to
  back, and the other cores as CPU-only workers (``JAX_PLATFORMS=cpu``, no GPU visible, one XLA thread each,
  resource ``CPU``: :data:`CPU_ENV`) for the tasks whose heavy work is a C kernel on the CPU: those whose preset
  resolves one of its jobs to ``"native"`` on a CPU (:func:`attnlab.api.implementations`, asked on a CPU worker so
  that the driver never starts JAX). ``--workers`` caps the total number of workers (GPU workers first).

The tasks are submitted longest first (:data:`EXPECTED_S`), so the long presets do not start last (on the GPU
worker's queue, or on two CPU workers at the end of a reproduction).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from attnlab import runtime
from attnlab.runtime import usable_cores  # a local cluster's default: one worker per usable core (workers x threads = cores)

__all__ = ["Layout", "EXPECTED_S", "GPU_ENV", "CPU_ENV", "WORKER_CORES_ENV", "NANNY_CONFIG", "pin_threads", "pin_worker",
           "usable_cores", "visible_gpus", "choose_layout", "make_gpu_cluster", "uses_native", "native_flags", "plan"]

GPU_ENV: dict[str, str] = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
"""The environment of a GPU worker (besides ``CUDA_VISIBLE_DEVICES``): JAX allocates the GPU's memory as it needs it
instead of 75% of it at start. Not applied where the user set ``XLA_PYTHON_CLIENT_PREALLOCATE``,
``XLA_PYTHON_CLIENT_MEM_FRACTION`` or ``XLA_PYTHON_CLIENT_ALLOCATOR`` (the user's choice wins)."""

CPU_ENV: dict[str, str] = {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
"""The environment of a CPU worker in the GPU layout: JAX on the CPU only, no CUDA context."""

WORKER_CORES_ENV = "ATTNLAB_WORKER_CORES"
"""The environment variable through which a local cluster gives its worker processes the cores to share out
(comma-separated; those the starting process may run on): :func:`pin_worker`."""

_pinned: list[int | None] = []


def pin_threads(core: int) -> None:
    """Pin every thread of this process to ``core`` (Linux; threads started later inherit it from their creator).
    Before JAX's first computation, XLA's CPU client then sizes its thread pool to one thread.

    The BLAS and OpenMP thread pools already loaded (NumPy's OpenBLAS, loaded with NumPy before the pin) were sized
    for every core the process could run on then: they are limited to one thread (threadpoolctl). Left as they were,
    their threads, now on one core, wait for each other by spinning, and NumPy's linear algebra on small matrices
    runs orders of magnitude slower (the pools of libraries loaded after the pin are sized for the one core
    already)."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that has just ended
            os.sched_setaffinity(int(tid), {core})
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def pin_worker() -> int | None:
    """Pin this worker process, every thread of it, to one core: ``cores[name % len(cores)]`` of
    :data:`WORKER_CORES_ENV`, for the worker named ``name`` (a LocalCluster names its workers 0, 1, ...). Once per
    process; later calls return the same core.

    Why: XLA's CPU client sizes the thread pool on which it splits a program's loops by the cores the process may
    run on, and ``--xla_cpu_multi_thread_eigen=false`` (:data:`attnlab.app.sweep.WORKER_XLA_FLAGS`) leaves that
    pool alone; unpinned, every worker computed on every core, two workers' pools fought over two cores, and a
    task took up to 1.4 times its time on one pinned core (XLA's splitting of small loops costs more than a second
    thread gives). Pinned before its first computation, a worker's pool has one thread: one XLA thread per worker,
    as the determinism of a sweep assumes. Returns the core, or None where the variable is unset (a cluster
    attnlab did not start), the worker's name is not an integer, or the platform cannot pin; the process is then
    left as it was."""
    if _pinned:
        return _pinned[0]
    core = None
    try:
        from distributed import get_worker

        cores = [int(c) for c in os.environ.get(WORKER_CORES_ENV, "").split(",") if c.strip()]
        name = get_worker().name
        if cores and isinstance(name, int) and hasattr(os, "sched_setaffinity"):
            core = cores[name % len(cores)]
            pin_threads(core)
    except (ImportError, ValueError, OSError):  # not on a worker, a malformed variable, no /proc
        core = None
    _pinned.append(core)
    return core


NANNY_CONFIG: dict[str, Any] = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
"""Dask configuration set while a local cluster starts: its nannies do not give the worker processes Dask's
``MALLOC_TRIM_THRESHOLD_=65536`` (which they would also write into this process's environment). Set, the variable
turns off glibc's dynamic thresholds, so that every buffer above 128 KiB that XLA allocates and frees is mapped
and unmapped again: a transformer's training (T2, one core) took 1.22 ms per update with it and 0.95 ms without.
The user's own ``MALLOC_TRIM_THRESHOLD_``, if set, is inherited as before."""


# expected-s
EXPECTED_S: dict[str, tuple[float, float]] = {
    "marion-manifold": (1.1, 0.8),
    "marion-sphere-small-lambda": (0.9, 0.9),
    "marion-sphere-large-lambda": (3.1, 3.0),
    "marion-sphere-schedule": (2.2, 2.8),
    "marion-sgd": (45, 3.4),
    "marion-toy-multihead": (61, 6.6),
    "marion-transformer-single-head": (300, 2.6),
    "marion-transformer-multihead": (231, 2.9),
    "dohmatob-rgd": (45, 2.4),
    "dohmatob-flow": (6.5, 1.6),
    "dohmatob-phase-diagram": (1.6, 1.7),
    "duranthon-population": (13, 1.1),
    "duranthon-activations": (19, 1.9),
    "duranthon-sample-complexity": (22, 2.7),
    "duranthon-low-snr": (71, 6.6),
    "duranthon-gd-landscape": (160, 11),
    "sakai-vary-width": (3.2, 1.6),
    "sakai-vary-heads": (12, 1.3),
    "sakai-scores": (0.2, 0.1),
    "sakai-low-rank": (7.0, 2.2),
    "sakai-relu": (15, 1.9),
    "sakai-wide": (19, 1.6),
    "sakai-kernel": (236, 17),
    "sakai-kernel-regression": (82, 6.3),
    "bruno-alignment": (35, 2.8),
    "bruno-backward-heat": (25, 3.1),
    "bruno-forward-heat": (34, 1.6),
    "bruno-three-phases": (85, 2.2),
}
# /expected-s
"""preset -> (full, quick) wall time in seconds on two CPU cores (the README's table of presets, written with this
block by tools/preset_table.py from the same runs), used only to order the tasks, longest first. A preset missing
here (not measured) counts as long: it goes first, in the given order."""


@dataclass(frozen=True)
class Layout:
    """The workers of a local cluster: one per GPU id in ``gpus`` (none: the CPU layout) and ``cpu_workers``."""

    gpus: tuple[str, ...]
    cpu_workers: int

    @property
    def on_gpu(self) -> bool:
        return bool(self.gpus)

    @property
    def workers(self) -> int:
        return len(self.gpus) + self.cpu_workers

    def describe(self) -> str:
        """One line, e.g. ``on 1 GPU: 1 GPU worker, 15 CPU workers``."""
        def n(k: int, what: str) -> str:
            return f"{k} {what}{'' if k == 1 else 's'}"

        if not self.on_gpu:
            return f"on the CPU: {n(self.cpu_workers, 'worker')}"
        return f"on {n(len(self.gpus), 'GPU')}: {n(len(self.gpus), 'GPU worker')}, {n(self.cpu_workers, 'CPU worker')}"


def visible_gpus() -> tuple[str, ...]:
    """The ids of the GPUs JAX would use, read without starting JAX: none without a CUDA accelerator plugin
    (:func:`attnlab.runtime.accelerator_plugin`) or when ``CUDA_VISIBLE_DEVICES`` hides them all; else the entries of
    ``CUDA_VISIBLE_DEVICES`` when set, else one per GPU that ``nvidia-smi -L`` lists."""
    plugin = runtime.accelerator_plugin()
    if not plugin or "cuda" not in plugin:
        return ()
    if os.environ.get("JAX_PLATFORMS", "").strip() and "cuda" not in os.environ["JAX_PLATFORMS"] \
            and "gpu" not in os.environ["JAX_PLATFORMS"]:
        return ()  # the user asked JAX for other platforms
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = tuple(v.strip() for v in visible.split(",") if v.strip())
        return () if not ids or ids[0] == "-1" else ids  # CUDA ignores the ids after an invalid one such as -1
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ()
    if listing.returncode != 0:
        return ()
    return tuple(str(i) for i, _ in enumerate(line for line in listing.stdout.splitlines() if line.startswith("GPU ")))


def choose_layout(workers: int | None = None, cores: int | None = None, gpus: tuple[str, ...] | None = None) -> Layout:
    """The layout for ``workers`` workers in all (default: one per core; ``cores`` default :func:`usable_cores`) on
    ``gpus`` (default :func:`visible_gpus`): one worker per GPU (as many as ``workers`` allows) and the rest CPU
    workers; without GPUs, ``workers`` CPU workers (today's layout)."""
    total = workers or cores or usable_cores()
    gpus = visible_gpus() if gpus is None else tuple(gpus)
    gpus = gpus[:total]
    return Layout(gpus, total - len(gpus))


def _gpu_env(gpu: str) -> dict[str, str]:
    env = {"CUDA_VISIBLE_DEVICES": gpu}
    chosen = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
    if not any(name in os.environ for name in chosen):
        env.update(GPU_ENV)
    return env


def make_gpu_cluster(layout: Layout, env: dict[str, str] | None = None):
    """A local Dask cluster of ``layout`` (GPU layout): single-threaded worker processes (nannies), each GPU worker
    with resource ``{"GPU": 1}`` and its GPU alone visible, each CPU worker with ``{"CPU": 1}`` and :data:`CPU_ENV`,
    every worker with ``env`` besides (:func:`attnlab.app.sweep.worker_env`); host memory shared equally as in a
    LocalCluster; no dashboard."""
    env = env or {}
    from distributed import Nanny, Scheduler, SpecCluster
    from distributed.system import MEMORY_LIMIT

    memory = int(MEMORY_LIMIT / max(layout.workers, 1))
    common = {"nthreads": 1, "host": "127.0.0.1", "memory_limit": memory, "dashboard": False, "silence_logs": 50}
    specs: dict[str, dict[str, Any]] = {}
    for i, gpu in enumerate(layout.gpus):
        specs[f"gpu-{i}"] = {"cls": Nanny, "options": {**common, "resources": {"GPU": 1},
                                                        "env": {**env, **_gpu_env(gpu)}}}
    for i in range(layout.cpu_workers):
        specs[f"cpu-{i}"] = {"cls": Nanny, "options": {**common, "resources": {"CPU": 1}, "env": {**env, **CPU_ENV}}}
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False,
                                               "dashboard_address": "127.0.0.1:0"}}
    return SpecCluster(workers=specs, scheduler=scheduler, silence_logs=50)


def uses_native(task) -> bool:
    """Whether ``task`` (an :class:`attnlab.app.sweep.Task`) resolves one of its jobs to a C kernel in this process
    (:func:`attnlab.api.implementations`). Starts JAX: call it on a CPU worker."""
    from attnlab.api import implementations
    from attnlab.registry import get_preset, resolve_config

    preset = get_preset(task.preset)
    if getattr(preset, "implementations", None) is None:
        return False
    config = resolve_config(preset, quick=task.quick, overrides=dict(task.overrides))
    return "native" in implementations(preset, config).values()


def native_flags(tasks: list) -> list[bool]:
    """:func:`uses_native` of each task, computed after :func:`attnlab.runtime.configure` (as a task would be); a
    task whose question raises counts as not native (it fails on its own when it runs)."""
    runtime.configure()
    flags = []
    for task in tasks:
        try:
            flags.append(uses_native(task))
        except Exception:
            flags.append(False)
    return flags


def expected_s(task) -> float:
    """The expected wall time of ``task`` on two CPU cores (:data:`EXPECTED_S`); infinity when not known."""
    times = EXPECTED_S.get(task.preset)
    return float("inf") if times is None else times[1 if task.quick else 0]


GPU_PREFERRED: frozenset[str] = frozenset({"bruno"})
"""Papers whose presets run on the GPU worker even where a C kernel would run them on a CPU: their JAX path has a
GPU kernel (Bruno et al.'s particle step: the shift kernel on the GPU, about ten times a CPU's full-size time)."""


def plan(client, tasks: list, layout: Layout | None, native: list[bool] | None = None
         ) -> tuple[list[dict[str, float] | None], list[int]]:
    """The Dask resources of each task and the order of submission, for ``layout``.

    Every layout submits the tasks longest first (:func:`expected_s`, stable: a sweep's tasks keep their order), so
    that the longest preset of a reproduction does not start last and leave the other workers idle at the end.
    CPU layout (or None: an external scheduler): no resources. GPU layout: the tasks that use a C kernel on a CPU
    (``native``, default: asked of a CPU worker through ``client``) get ``{"CPU": 1}``, the others ``{"GPU": 1}``
    (all of them when there is no CPU worker; the papers of :data:`GPU_PREFERRED` always)."""
    order = sorted(range(len(tasks)), key=lambda i: -expected_s(tasks[i]))
    if layout is None or not layout.on_gpu:
        return [None] * len(tasks), order
    if layout.cpu_workers == 0:
        native = [False] * len(tasks)
    elif native is None:
        try:
            native = client.submit(native_flags, list(tasks), resources={"CPU": 1}, pure=False).result()
        except Exception:  # the question could not be answered: everything on the GPU worker
            native = [False] * len(tasks)
    native = [flag and tasks[i].preset.split("-", 1)[0] not in GPU_PREFERRED for i, flag in enumerate(native)]
    resources = [{"CPU": 1} if flag else {"GPU": 1} for flag in native]
    return resources, order
