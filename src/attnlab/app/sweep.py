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

import hashlib
import itertools
import json
import math
import os
import shutil
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from attnlab import runtime
from attnlab.config import parse_value
from attnlab.errors import AttnlabError
from attnlab.registry import resolve_config

__all__ = ["Task", "parse_grid", "expand_grid", "run_task", "run_tasks", "make_client", "collect", "write_sweep",
           "sweep_dir_name"]


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


def parse_grid(pairs: list[str] | None) -> dict[str, list[Any]]:
    """Parse ``["key=v1,v2,...", ...]`` into ``{key: [values]}``; each value is read as JSON when it parses."""
    grid: dict[str, list[Any]] = {}
    for pair in pairs or []:
        key, sep, values = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise AttnlabError(f"malformed --grid {pair!r}: expected key=v1,v2,...")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not items:
            raise AttnlabError(f"empty value list in --grid {pair!r}")
        if key in grid:
            raise AttnlabError(f"--grid {key!r} given twice")
        grid[key] = [parse_value(v) for v in items]
    return grid


def expand_grid(preset, grid: dict[str, list[Any]], seeds: list[int], quick: bool, figures: bool = True) -> list[Task]:
    """Every combination of the grid times every seed, each validated now (bad values fail before any run)."""
    keys = list(grid)
    tasks = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        overrides = dict(zip(keys, combo))
        config = resolve_config(preset, quick=quick, overrides=overrides)
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

        runtime.configure()
        import matplotlib

        matplotlib.use("Agg")
        preset = get_preset(task.preset)
        config = resolve_config(preset, quick=task.quick, overrides=dict(task.overrides))
        res = run_preset(preset, config, task.seed, quick=task.quick, results_root=Path(root), figures=task.figures)
        return {"status": "reused" if res.reused else "finished", "run_dir": str(res.run_dir), "summary": res.summary}
    except Exception as e:  # recorded, retried once by the driver
        return {"status": "failed", "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}


def make_client(scheduler: str | None = None, workers: int | None = None, processes: bool = True):
    """A Dask client: on ``scheduler`` (``tcp://host:port``) if given, else an in-process LocalCluster with
    ``workers`` single-threaded worker processes (default: one per core)."""
    from distributed import Client, LocalCluster

    if scheduler:
        try:
            return Client(scheduler, timeout="10s")
        except OSError as e:
            raise AttnlabError(f"cannot reach Dask scheduler {scheduler}: {e}") from None
    n = workers or os.cpu_count() or 1
    # One XLA thread per worker process: workers do not fight over cores, and every task computes with the same
    # threading whatever the number of workers (bit-for-bit determinism).
    runtime.add_xla_flags(*runtime.OPTIMISATION_FLAGS, "--xla_cpu_multi_thread_eigen=false",
                          "intra_op_parallelism_threads=1")
    cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=None,
                           silence_logs=50)
    return Client(cluster)


def run_tasks(client, tasks: list[Task], root: Path, on_update: Callable[[dict[str, int]], None] | None = None,
              task_fn: Callable = run_task) -> list[Outcome]:
    """Submit every task, retry each failure once, and return the outcomes in task order."""
    from distributed import as_completed

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    counts = {"total": len(tasks), "done": 0, "failed": 0, "running": len(tasks), "reused": 0}
    futures = {}
    for i, task in enumerate(tasks):
        fut = client.submit(task_fn, task, str(root), key=f"attnlab-{i}-{uuid.uuid4().hex[:6]}", pure=False)
        futures[fut] = (i, 1)
    outcomes: list[Outcome | None] = [None] * len(tasks)
    pending = as_completed(list(futures))
    for fut in pending:
        i, attempt = futures.pop(fut)
        try:
            result = fut.result()
        except Exception as e:  # the worker died, or the task could not be deserialised
            result = {"status": "failed", "error": f"{type(e).__name__}: {e}"}
        if result["status"] == "failed" and attempt == 1:
            retry = client.submit(task_fn, tasks[i], str(root), key=f"attnlab-{i}-{uuid.uuid4().hex[:6]}", pure=False)
            futures[retry] = (i, 2)
            pending.add(retry)
            continue
        outcomes[i] = Outcome(tasks[i], result["status"], result.get("run_dir"), result.get("summary") or {},
                              result.get("error"), attempt)
        counts["done"] += 1
        counts["running"] -= 1
        counts["failed"] += result["status"] == "failed"
        counts["reused"] += result["status"] == "reused"
        if on_update is not None:
            on_update(dict(counts))
    return [o for o in outcomes if o is not None]


def collect(outcomes: list[Outcome], grid: dict[str, list[Any]], seeds: list[int]) -> xr.Dataset:
    """Arrange the outcomes on the grid: dims = swept fields (in order) + seed; metrics as variables."""
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
    metric_names = sorted({m for o in outcomes for m in o.summary.get("metrics", {})})
    metrics = {m: np.full(shape, np.nan) for m in metric_names}
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
                metrics[m][idx] = v if isinstance(v, (int, float)) and v is not None else np.nan
    dims = tuple(coords)
    data = {m: (dims, v) for m, v in metrics.items()}
    data["checks_passed"] = (dims, n_passed, {"long_name": "number of passed checks"})
    data["elapsed_s"] = (dims, elapsed, {"units": "s"})
    data["status"] = (dims, status.astype(str))
    data["error"] = (dims, error.astype(str))
    data["run_dir"] = (dims, run_dir.astype(str))
    clean = {k: np.asarray(v) if not isinstance(v[0], (bool, tuple)) else np.asarray([str(x) for x in v])
             for k, v in coords.items()}
    return xr.Dataset(data, coords=clean)


def write_sweep(ds: xr.Dataset, out_dir: Path, meta: dict[str, Any]) -> Path:
    """Write ``sweep.zarr`` atomically (temporary sibling, then rename over any previous one)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ds = ds.assign_attrs({k: json.dumps(v, default=str) for k, v in meta.items()})
    tmp = out_dir / f".sweep.zarr.tmp-{uuid.uuid4().hex[:8]}"
    ds.to_zarr(tmp, mode="w", consolidated=True, zarr_format=2)
    final = out_dir / "sweep.zarr"
    if final.exists():
        old = out_dir / f".sweep.zarr.old-{uuid.uuid4().hex[:8]}"
        final.rename(old)
        tmp.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(final)
    return final


def plot_metric(ds: xr.Dataset, metric: str, out_dir: Path) -> list[str]:
    """``METRIC`` against the first swept field, one line per combination of the others, mean +- SE over seeds."""
    from attnlab.plot import plt, save_figure

    if metric not in ds:
        numeric = [v for v in ds.data_vars if ds[v].dtype.kind == "f"]
        raise AttnlabError(f"unknown metric {metric!r} (available: {', '.join(numeric)})")
    da = ds[metric]
    fields = [d for d in da.dims if d != "seed"]
    x = fields[0]
    mean = da.mean("seed")
    se = da.std("seed", ddof=1) / math.sqrt(da.sizes["seed"]) if da.sizes["seed"] > 1 else xr.zeros_like(mean)
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    rest = fields[1:]
    combos = itertools.product(*(range(ds.sizes[f]) for f in rest)) if rest else [()]
    xs = ds[x].values
    numeric_x = np.issubdtype(xs.dtype, np.number)
    pos = xs if numeric_x else np.arange(len(xs))
    for combo in combos:
        sel = dict(zip(rest, combo))
        label = ", ".join(f"{f}={ds[f].values[i]}" for f, i in sel.items()) or None
        ax.errorbar(pos, mean.isel(sel).values, yerr=se.isel(sel).values, marker="o", capsize=3, label=label)
    if not numeric_x:
        ax.set_xticks(pos, [str(v) for v in xs])
    ax.set(xlabel=x, ylabel=metric, title=f"{metric} (mean +- SE over {ds.sizes['seed']} seeds)")
    if rest:
        ax.legend(fontsize=7)
    return save_figure(fig, out_dir, f"sweep-{metric}")


def clean_stale_temporaries(root: Path) -> int:
    """Remove hidden temporary run directories left by killed runs (never a finished run). Called before a sweep
    starts, so two sweeps must not write into the same folder at the same time."""
    n = 0
    for tmp in Path(root).glob("*/.*.tmp-*"):
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
            n += 1
    return n
