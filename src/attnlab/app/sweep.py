"""Sweeps: the Cartesian product of a grid of config values (times K seeds) as independent tasks on Dask.

Every task is one preset run through the store (:func:`attnlab.app.store.run_preset`), so it writes its own run
directory atomically, keyed by the hash of its resolved config and seed. Hence:

* **resume**: a rerun finds finished tasks' directories and reuses them; a sweep killed at any moment (kill -9
  included) loses at most the tasks in flight, whose hidden temporary directories never look finished;
* **determinism**: a task's result depends only on its config and seed, not on the worker or the order;
* **failures**: a task that raises is retried once, then recorded as failed with its error; the others go on.

The sweep's results are collected into ``sweep.zarr``: one dimension per swept field (in the order given) and
``seed``, the config values as coordinates, each summary metric as a variable (NaN where a task failed), plus
``status``, ``error`` and ``run_dir``.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import os
import re
import shutil
import signal
import threading
import traceback
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from attnlab import runtime
from attnlab.api import json_safe
from attnlab.app.forkserver import worker_start_method
from attnlab.app.scheduling import NANNY_CONFIG, WORKER_CORES_ENV, pin_worker, usable_cores
from attnlab.config import parse_value
from attnlab.errors import AttnlabError, NonFiniteResultError
from attnlab.registry import resolve_config

__all__ = ["Task", "parse_grid", "expand_grid", "run_task", "run_tasks", "reused_outcomes", "make_client",
           "SCHEDULER_TIMEOUT_S", "worker_env", "WORKER_XLA_FLAGS", "close_client", "collect", "write_sweep",
           "sweep_dir_name", "check_metric_name", "check_metrics", "quiet_workers"]


@dataclass(frozen=True)
class Task:
    """One run: a preset, config overrides (on top of its defaults and, if ``quick``, its quick overrides), a seed;
    ``figures=False`` skips the run's figures (its data, summary and config are written all the same)."""

    preset: str
    overrides: tuple[tuple[str, Any], ...]
    seed: int
    quick: bool
    figures: bool = True

    @property
    def label(self) -> str:
        fields = ", ".join(f"{k}={v}" for k, v in self.overrides)
        return f"{self.preset}[{fields}{', ' if fields else ''}seed={self.seed}]"


@dataclass
class Outcome:
    task: Task
    status: str  # "finished", "reused" or "failed"
    run_dir: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    attempts: int = 1
    traceback: str | None = None  # of an unexpected exception raised by the task (a bug to report), else None

    def traceback_lines(self) -> str:
        """The traceback, if any, as lines indented below a failed task's line in the final report (the progress
        line gives the error alone); "" otherwise."""
        if not self.traceback:
            return ""
        return "\n" + "\n".join("    " + line for line in self.traceback.rstrip().splitlines())


def parse_grid(pairs: list[str] | None) -> dict[str, list[Any]]:
    """Parse ``["key=v1,v2,...", ...]`` into ``{key: [values]}``; each value is read as JSON when it parses."""
    grid: dict[str, list[Any]] = {}
    for pair in pairs or []:
        key, sep, values = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AttnlabError(f"malformed --grid {pair!r}: expected key=v1,v2,...")
        if not values.strip():
            raise AttnlabError(f"empty value list in --grid {pair!r}")
        items = [v.strip() for v in values.split(",")]
        if not all(items):
            raise AttnlabError(f"empty item in --grid {pair!r}: expected key=v1,v2,... with no empty value")
        if key in grid:
            raise AttnlabError(f"--grid {key!r} given twice")
        grid[key] = [parse_value(v) for v in items]
    return grid


def expand_grid(preset, grid: dict[str, list[Any]], seeds: list[int], quick: bool, figures: bool = True) -> list[Task]:
    """Every combination of the grid times every seed, each validated now (bad values, unmet prerequisites and
    configs that cannot fit in this machine's memory fail before any run)."""
    from attnlab.app.resources import check_memory
    from attnlab.registry import unmet

    keys = list(grid)
    tasks = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        overrides = dict(zip(keys, combo))
        config = resolve_config(preset, quick=quick, overrides=overrides)
        reason = unmet(preset, config)
        if reason is not None:
            raise AttnlabError(f"{preset.name}: {reason}")
        check_memory(preset, config)
        # store the validated (typed) values, so "0.1" and "1e-1" are the same task
        typed = tuple((k, getattr(config, k)) for k in keys)
        tasks.extend(Task(preset.name, typed, seed, quick, figures) for seed in seeds)
    return tasks


def sweep_dir_name(preset: str, grid: dict[str, list[Any]], seeds: list[int], quick: bool) -> str:
    blob = json.dumps({"grid": grid, "seeds": seeds, "quick": quick}, sort_keys=True, default=str)
    return f"{preset}-{hashlib.sha256(blob.encode()).hexdigest()[:8]}"


def run_task(task: Task, root: str) -> dict[str, Any]:
    """Run one task into ``root/PRESET/HASH`` (reusing a finished run). Runs on a worker; never raises."""
    try:
        from attnlab.app.store import run_preset
        from attnlab.registry import get_preset

        pin_worker()  # before this process's first computation sizes XLA's thread pool
        runtime.configure()
        import matplotlib

        matplotlib.use("Agg")
        preset = get_preset(task.preset)
        config = resolve_config(preset, quick=task.quick, overrides=dict(task.overrides))
        sharing = _compiles_alone()
        if sharing:
            runtime.share_compile_cache()  # the programs the other workers compiled in their finished tasks
        res = run_preset(preset, config, task.seed, quick=task.quick, results_root=Path(root), figures=task.figures,
                         wait=True)
        if sharing:
            runtime.share_compile_cache()  # this task's programs, for the other workers' next tasks
        return {"status": "reused" if res.reused else "finished", "run_dir": str(res.run_dir), "summary": res.summary}
    except NonFiniteResultError as e:  # deterministic: a retry would compute the same non-finite results
        return {"status": "failed", "error": str(e), "retry": False}
    except Exception as e:  # recorded, retried once by the driver
        return {"status": "failed", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


def _compiles_alone() -> bool:
    """Whether this task runs in a Dask worker process of its own with one thread (the command line's LocalCluster,
    ``dask worker`` with its nanny, dask-jobqueue): then nothing else compiles in the process between its tasks, the
    condition of :func:`attnlab.runtime.share_compile_cache`. An in-process cluster's workers share one process."""
    import multiprocessing

    try:
        from distributed import get_worker

        return multiprocessing.parent_process() is not None and get_worker().state.nthreads == 1
    except (ImportError, ValueError, AttributeError):  # not on a worker
        return False


WORKER_XLA_FLAGS: tuple[str, ...] = (*runtime.OPTIMISATION_FLAGS, *runtime.ONE_CORE_FLAGS)
"""The XLA flags of a local cluster's worker processes besides the user's own: :data:`attnlab.runtime.ONE_CORE_FLAGS`,
each worker computing and compiling on its one core: one XLA thread per worker (``--xla_cpu_multi_thread_eigen=false``),
so that workers do not fight over cores and every task computes with the same threading whatever the number of
workers (bit-for-bit determinism), and one LLVM module per program. A process on one core has the same flags, so its
compiled programs and the workers' are the same cache entries."""


def worker_env() -> dict[str, str]:
    """The environment a local cluster's worker processes start with besides this process's: ``XLA_FLAGS`` with
    :data:`WORKER_XLA_FLAGS` (:func:`attnlab.runtime.xla_flags_with`). This process's own environment is left as
    it was: JAX hashes ``XLA_FLAGS`` into its compilation-cache keys, so changing it here would make this process
    miss every program it has cached."""
    return {"XLA_FLAGS": runtime.xla_flags_with(*WORKER_XLA_FLAGS)}


SCHEDULER_TIMEOUT_S = 10.0
"""How long :func:`make_client` tries to reach a scheduler given by address (Dask retries a refused connection, for a
scheduler still starting) before the command says it cannot reach it."""


def make_client(scheduler: str | None = None, workers: int | None = None, processes: bool = True, layout=None,
                papers=None):
    """A Dask client: on ``scheduler`` (``tcp://host:port``) if given, else an in-process LocalCluster with
    ``workers`` single-threaded worker processes (default: one per core, each pinned to a core of its own:
    :func:`attnlab.app.scheduling.pin_worker`), or, for a GPU ``layout``
    (:class:`attnlab.app.scheduling.Layout`), its GPU and CPU workers (:func:`attnlab.app.scheduling.
    make_gpu_cluster`); the worker processes start with :func:`worker_env` (in-process workers, ``processes=False``,
    compute with this process's XLA as it is), forked from a server that imported attnlab and the presets of
    ``papers`` (default: every paper) once (:mod:`attnlab.app.forkserver`) where the platform has one."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout=SCHEDULER_TIMEOUT_S)
        except OSError as e:
            raise AttnlabError(f"cannot reach Dask scheduler {scheduler}: {e}") from None
    import dask

    n = workers or usable_cores()
    env = worker_env()
    # No dashboard: the scheduler's HTTP server (health and metrics routes, started even with
    # dashboard_address=None) listens on a free port, so Dask's "Port 8787 is already in use" warning never shows.
    with warnings.catch_warnings(), dask.config.set(NANNY_CONFIG):
        warnings.filterwarnings("ignore", message=".*already in use.*")
        if layout is not None and layout.on_gpu:
            from attnlab.app.scheduling import make_gpu_cluster

            return Client(make_gpu_cluster(layout, env))
        if processes and hasattr(os, "sched_getaffinity"):  # one core per worker (pin_worker)
            env[WORKER_CORES_ENV] = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
        with worker_start_method(env, papers) if processes else contextlib.nullcontext():  # forked from a preloaded server
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=None,
                                   scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"},
                                   silence_logs=50, **({"env": env} if processes else {}))
        return Client(cluster)


@contextlib.contextmanager
def quiet_workers():
    """Start worker processes with SIGINT ignored (they inherit the disposition): a Ctrl-C at the terminal reaches
    the whole process group, and the driver alone should handle it (close the cluster, print one line) instead of
    every worker printing its KeyboardInterrupt traceback. A no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _kill_local_workers(cluster) -> None:
    """SIGKILL the worker processes of a LocalCluster of this process (its nannies' children; in-process workers
    have none). Closing busy workers waits for each to finish or time out (seconds); a killed worker's run leaves
    only its temporary folder, which the sweep's driver removes once its lock is free
    (:func:`attnlab.app.ownership.remove_stale_temporaries`)."""
    for nanny in list(getattr(cluster, "workers", {}).values()):
        process = getattr(getattr(nanny, "process", None), "process", None)  # Nanny -> WorkerProcess -> process
        if getattr(process, "pid", None):
            with contextlib.suppress(OSError):
                os.kill(process.pid, signal.SIGKILL)


def close_client(client, own_cluster: bool = True, *, interrupted: bool = False) -> None:
    """Close ``client`` (and its LocalCluster when ``own_cluster``) quietly: after a Ctrl-C, the closing workers'
    and the comms' complaints are not the user's business. ``interrupted`` (the command line after a Ctrl-C): the
    LocalCluster's worker processes are killed first, so that closing does not wait for their running tasks."""
    import logging

    cluster = getattr(client, "cluster", None) if own_cluster else None
    if interrupted and cluster is not None:
        _kill_local_workers(cluster)
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = None
        if threading.current_thread() is threading.main_thread():
            previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not abort the cleanup
        try:
            for close in (client.close, getattr(cluster, "close", None)):
                if close is None:
                    continue
                try:
                    close()
                except Exception:  # already closing, or the workers are gone
                    pass
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)


def reused_outcomes(tasks: list[Task], root: Path) -> list[Outcome] | None:
    """Every task's outcome if each has a finished run under ``root`` (status ``reused``, found in this process as a
    worker would find it), else None: then no worker needs to start."""
    from attnlab.app.store import finished_run
    from attnlab.registry import get_preset

    outcomes = []
    for task in tasks:
        preset = get_preset(task.preset)
        config = resolve_config(preset, quick=task.quick, overrides=dict(task.overrides))
        res = finished_run(preset, config, task.seed, results_root=Path(root))
        if res is None:
            return None
        outcomes.append(Outcome(task, "reused", str(res.run_dir), res.summary))
    return outcomes


def run_tasks(client, tasks: list[Task], root: Path, on_update: Callable[..., None] | None = None,
              task_fn: Callable = run_task, check_first: Callable[[Outcome], None] | None = None,
              resources: list[dict[str, float] | None] | None = None, order: list[int] | None = None
              ) -> list[Outcome]:
    """Submit every task, retry each failure once, and return the outcomes in task order.

    ``resources[i]`` restricts task ``i`` (and its retry) to the workers that have them (Dask resources, e.g.
    ``{"GPU": 1}``: :func:`attnlab.app.scheduling.plan`); ``order`` is the order of submission (the first ones run
    first: given decreasing priorities); default: no restriction, the tasks' order.

    ``on_update(counts, outcome)`` is called once before the first task finishes (``outcome`` None) and after each
    one; ``counts`` has ``total``, ``done``, ``failed``, ``reused`` and ``running``: the tasks on a worker now (at
    most the workers' threads, not the tasks still queued). ``check_first(outcome)`` is called with the first task
    that finishes (not failed): if it raises, the tasks not yet finished are cancelled and the error propagates
    (e.g. an unknown ``--plot`` metric, known from the first summary). The same happens on Ctrl-C."""
    from distributed import as_completed

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    try:
        slots = sum(client.nthreads().values()) or 1
    except Exception:  # a client that cannot say: assume one
        slots = 1
    counts = {"total": len(tasks), "done": 0, "failed": 0, "running": min(slots, len(tasks)), "reused": 0}
    futures = {}
    resources = list(resources) if resources is not None else [None] * len(tasks)
    priority = [0] * len(tasks)
    if order is not None:
        for rank, i in enumerate(order):
            priority[i] = len(order) - rank

    def submit(i: int):
        extra = {"resources": resources[i]} if resources[i] else {}
        if priority[i]:
            extra["priority"] = priority[i]
        return client.submit(task_fn, tasks[i], str(root), key=f"attnlab-{i}-{uuid.uuid4().hex[:6]}", pure=False,
                             **extra)

    for i in (order if order is not None else range(len(tasks))):
        futures[submit(i)] = (i, 1)
    outcomes: list[Outcome | None] = [None] * len(tasks)
    if on_update is not None:
        on_update(dict(counts), None)
    checked = check_first is None
    try:
        pending = as_completed(list(futures))
        for fut in pending:
            i, attempt = futures.pop(fut)
            try:
                result = fut.result()
            except Exception as e:  # the worker died, or the task could not be deserialised
                result = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
            if result["status"] == "failed" and attempt == 1 and result.get("retry", True):
                retry = submit(i)  # the same resources and priority
                futures[retry] = (i, 2)
                pending.add(retry)
                continue
            outcome = Outcome(tasks[i], result["status"], result.get("run_dir"), result.get("summary") or {},
                              result.get("error"), attempt, result.get("traceback"))
            outcomes[i] = outcome
            if not checked and outcome.status != "failed":
                checked = True
                check_first(outcome)
            counts["done"] += 1
            counts["failed"] += result["status"] == "failed"
            counts["reused"] += result["status"] == "reused"
            counts["running"] = min(slots, len(tasks) - counts["done"])
            if on_update is not None:
                on_update(dict(counts), outcome)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(list(futures))
        raise
    return [o for o in outcomes if o is not None]


def check_metric_name(metric: str) -> None:
    """Reject, before anything runs, a ``--plot`` name that cannot be a metric (metrics are identifiers)."""
    if not metric.isidentifier():
        raise AttnlabError(f"unknown metric {metric!r} for --plot: metric names are identifiers like "
                           "final_abs_kappa_median")


def check_metrics(outcome: Outcome, metrics: list[str] | None) -> None:
    """Raise if a ``--plot`` metric is not among those of a finished task's summary (every task of a sweep runs the
    same preset, so the first one to finish tells the names)."""
    known = [m for m, v in outcome.summary.get("metrics", {}).items() if isinstance(v, (int, float)) or v is None]
    known += ["checks_passed", "elapsed_s"]
    for metric in metrics or []:
        if metric not in known:
            raise AttnlabError(f"unknown metric {metric!r} for --plot (available: {', '.join(known)})")


THEORY_SUFFIX = "__theory"
"""``METRIC__theory`` in ``sweep.zarr``: the theory value of the check whose simulation value is ``METRIC``'s."""


def check_theory(checks: list[dict[str, Any]], value: float) -> float:
    """The theory value of the first check (a summary's ``checks`` entry) whose simulation value is ``value``
    (the same number: the check compares that metric with its theory), else NaN."""
    if not math.isfinite(value):
        return math.nan
    for c in checks:
        sim, th = c.get("simulation"), c.get("theory")
        if isinstance(sim, (int, float)) and isinstance(th, (int, float)) and sim == value and math.isfinite(th):
            return float(th)
    return math.nan


def collect(outcomes: list[Outcome], grid: dict[str, list[Any]], seeds: list[int], preset=None) -> xr.Dataset:
    """Arrange the outcomes on the grid: dims = swept fields (in order) + seed; metrics as variables, and beside a
    metric that a check compares with theory, that check's theory value (``METRIC__theory``). Each dimension is a
    coordinate with ``long_name`` (the config field's title, else its description, from ``preset``) and ``units``
    ("1": config fields are dimensionless numbers; none on a text coordinate)."""
    keys = list(grid)
    coords: dict[str, list[Any]] = {}
    for j, k in enumerate(keys):
        values = []
        for o in outcomes:
            v = o.task.overrides[j][1]
            if v not in values:
                values.append(v)
        coords[k] = values
    coords["seed"] = list(seeds)
    shape = tuple(len(v) for v in coords.values())
    # a metric named like a swept field (e.g. n_repeats) is that field's value: the coordinate holds it
    metric_names = sorted({m for o in outcomes for m in o.summary.get("metrics", {})} - set(coords))
    metrics = {m: np.full(shape, np.nan) for m in metric_names}
    theory = {m: np.full(shape, np.nan) for m in metric_names}
    n_passed = np.full(shape, np.nan)
    status = np.full(shape, "missing", dtype=object)
    error = np.full(shape, "", dtype=object)
    run_dir = np.full(shape, "", dtype=object)
    elapsed = np.full(shape, np.nan)
    for o in outcomes:
        idx = tuple(coords[k].index(v) for k, v in o.task.overrides) + (coords["seed"].index(o.task.seed),)
        status[idx] = o.status
        error[idx] = o.error or ""
        run_dir[idx] = o.run_dir or ""
        if o.summary:
            elapsed[idx] = o.summary.get("elapsed_s", np.nan)
            checks = o.summary.get("checks", [])
            n_passed[idx] = sum(c["passed"] for c in checks) if checks else np.nan
            for m, v in o.summary.get("metrics", {}).items():
                if m not in metrics:
                    continue
                metrics[m][idx] = v if isinstance(v, (int, float)) and v is not None else np.nan
                theory[m][idx] = check_theory(checks, metrics[m][idx])
    dims = tuple(coords)
    data = {m: (dims, v) for m, v in metrics.items()}
    for m, v in theory.items():
        if np.isfinite(v).any():
            data[f"{m}{THEORY_SUFFIX}"] = (dims, v, {"long_name": f"theory of the check whose simulation is {m}"})
    data["checks_passed"] = (dims, n_passed, {"long_name": "number of passed checks"})
    data["elapsed_s"] = (dims, elapsed, {"units": "s"})
    data["status"] = (dims, status.astype(str))
    data["error"] = (dims, error.astype(str))
    data["run_dir"] = (dims, run_dir.astype(str))
    clean = {k: np.asarray(v) if not isinstance(v[0], (bool, tuple)) else np.asarray([str(x) for x in v])
             for k, v in coords.items()}
    fields = preset.config_cls.model_fields if preset is not None else {}
    described = {}
    for k, v in clean.items():
        info = fields.get(k)
        attrs = {"long_name": " ".join((info.title or info.description or k).split()) if info is not None else
                 ("root seed of the run" if k == "seed" else k)}
        if v.dtype.kind in "iuf":
            attrs["units"] = "1"
        described[k] = (k, v, attrs)
    return xr.Dataset(data, coords=described)


def write_sweep(ds: xr.Dataset, out_dir: Path, meta: dict[str, Any]) -> Path:
    """Write ``sweep.zarr`` atomically (temporary sibling, then rename over any previous one)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ds = ds.assign_attrs(json_safe(meta))  # JSON-native attributes (lists, numbers, strings), not JSON text
    tmp = out_dir / f".sweep.zarr.attnlab-tmp-{uuid.uuid4().hex[:8]}"
    ds.to_zarr(tmp, mode="w", consolidated=True, zarr_format=2)
    final = out_dir / "sweep.zarr"
    if final.exists():
        old = out_dir / f".sweep.zarr.attnlab-old-{uuid.uuid4().hex[:8]}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    return final


def plot_metric(ds: xr.Dataset, metric: str, out_dir: Path) -> list[str]:
    """``METRIC`` against the first swept field, one curve per combination of the others, mean +- SE over seeds
    (markers); the theory of the check that compares ``METRIC`` (``METRIC__theory``) in broken lines where there is
    one; under five values of the field, markers only (:func:`attnlab.plot.sparse`). The axis is labelled with the
    field's ``long_name`` and its symbol; an integer field gets integer ticks."""
    from matplotlib.ticker import MaxNLocator

    from attnlab.plot import SIMULATION, THEORY, paper_figure, plt, save_figure, sparse

    if metric not in ds or metric.endswith(THEORY_SUFFIX):
        numeric = [v for v in ds.data_vars if ds[v].dtype.kind == "f" and not v.endswith(THEORY_SUFFIX)]
        raise AttnlabError(f"unknown metric {metric!r} (available: {', '.join(numeric)})")

    @paper_figure
    def draw(ds, _config):
        da = ds[metric]
        fields = [d for d in da.dims if d != "seed"]
        x = fields[0]
        n_seeds = da.sizes["seed"]
        mean = da.mean("seed")
        se = da.std("seed", ddof=1) / math.sqrt(n_seeds) if n_seeds > 1 else xr.zeros_like(mean)
        theory = ds.get(metric + THEORY_SUFFIX)
        fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
        rest = fields[1:]
        combos = list(itertools.product(*(range(ds.sizes[f]) for f in rest))) if rest else [()]
        xs = ds[x].values
        numeric_x = np.issubdtype(xs.dtype, np.number)
        pos = xs if numeric_x else np.arange(len(xs))
        simulation_style = sparse({**SIMULATION, "linestyle": "-"}, len(pos))
        theory_style = sparse(THEORY, len(pos))
        for i, combo in enumerate(combos):
            sel = dict(zip(rest, combo))
            label = ", ".join(f"{field_symbol(f) or f} = {ds[f].values[j]}" for f, j in sel.items()) or None
            ax.errorbar(pos, mean.isel(sel).values, yerr=se.isel(sel).values, color=f"C{i % 10}", capsize=3,
                        label=label, **simulation_style)
            if theory is not None:
                th = theory.mean("seed", skipna=True).isel(sel).values
                ax.plot(pos, th, **{**theory_style, "color": f"C{i % 10}"})
        if not numeric_x:
            ax.set_xticks(pos, [str(v) for v in xs])
        elif np.issubdtype(xs.dtype, np.integer):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        seeds = f"mean $\\pm$ SE over {n_seeds} seeds" if n_seeds > 1 else "one seed"
        ax.set(xlabel=field_label(x, ds[x].attrs.get("long_name", x)), ylabel=metric.replace("_", " "),
               title=f"{metric.replace('_', ' ')} ({seeds})")
        handles, labels = ax.get_legend_handles_labels()
        if theory is not None:
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], **{**theory_style, "color": "0.3"}))
            labels.append("theory (the preset's check)")
        if len(handles) > 1 or rest:
            ax.legend(handles, labels, fontsize=7)
        return {"plot": fig}

    return save_figure(draw(ds, None)["plot"], out_dir, f"sweep-{metric}")


_GREEK = frozenset("alpha beta gamma delta epsilon varepsilon eta theta kappa lambda mu nu xi rho sigma tau phi chi psi "
                   "omega Gamma Delta Theta Lambda Sigma Phi Psi Omega".split())


def field_symbol(name: str) -> str | None:
    """A config field's name as the papers write it, in mathtext, where the name is a symbol: a Greek letter with an
    optional index (``lambda0`` -> ``$\\lambda_0$``, ``lam_k`` -> ``$\\lambda_k$``) or one Latin letter (``d``,
    ``L``); None for a word (``n_steps``)."""
    match = re.fullmatch(r"([A-Za-z]+)_?([0-9]+|[a-z])?", name)
    if match is None:
        return None
    head, index = match.group(1), match.group(2)
    head = {"lam": "lambda", "eps": "varepsilon"}.get(head, head)
    if head in _GREEK:
        head = "\\" + head
    elif len(head) != 1:
        return None
    return f"${head}_{{{index}}}$" if index else f"${head}$"


def field_label(name: str, long_name: str) -> str:
    """The axis label of a swept field: its ``long_name`` and, where the name is a symbol, the symbol."""
    symbol = field_symbol(name)
    if long_name == name:
        return symbol or name
    return f"{long_name} ({symbol})" if symbol else long_name


def clean_stale_temporaries(root: Path) -> int:
    """Remove the temporaries of killed runs under ``root`` (:func:`attnlab.app.ownership.remove_stale_temporaries`:
    attnlab's own, marked temporaries only, never one whose run is being written)."""
    from attnlab.app.ownership import remove_stale_temporaries

    return remove_stale_temporaries(root)
