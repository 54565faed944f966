"""Benchmark: a 200-task sweep of a cheap quick preset on 1 worker against 2 workers.

Reports the speed-up of 2 workers over 1 and the scheduling overhead per task: the 1-worker wall time minus the
wall time of the same tasks run serially in this process, divided by the number of tasks. Workers and the serial
loop are warmed up with one task first, so compilation is not counted as overhead.

Last line: one JSON object with ``speedup_2_workers`` and ``overhead_per_task_s``.

    .venv/bin/python bench/sweep.py [--tasks 200]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import attnlab  # noqa: F401
from attnlab import sweep as engine
from attnlab.presets import get_preset


def cheap_tasks(n_tasks: int):
    """``n_tasks`` distinct configs of the quick manifold preset cut down to 400 steps and 2 repeats."""
    preset = get_preset("marion-manifold")
    lambdas = ",".join(f"{0.05 + 0.2 * i / n_tasks:.6f}" for i in range(n_tasks))
    grid = engine.parse_grid([f"lambda0={lambdas}", "n_steps=400", "log_every=100", "n_repeats=2", "n_mc=200"])
    return engine.expand_grid(preset, grid, [0], True)


def warm(task):
    """Run one task in a private temporary folder: compiles the simulators in this worker, as the serial run does."""
    with tempfile.TemporaryDirectory() as tmp:
        engine.run_task(task, tmp)


def run(n_workers: int, tasks, root: Path):
    client = engine.make_client(workers=n_workers)
    try:
        client.wait_for_workers(n_workers)
        client.run(warm, tasks[0])
        t0 = time.perf_counter()
        outcomes = engine.run_tasks(client, tasks, root)
        wall = time.perf_counter() - t0
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    return wall, sum(o.status == "failed" for o in outcomes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=200)
    args = ap.parse_args()
    tasks = cheap_tasks(args.tasks)
    results = {}
    for n_workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            wall, failed = run(n_workers, tasks, Path(tmp))
        results[n_workers] = wall
        print(f"{n_workers} worker(s): {args.tasks} tasks in {wall:.1f} s ({failed} failed)", flush=True)
    # overhead: the same tasks run serially in this process, without Dask, against the 1-worker sweep
    with tempfile.TemporaryDirectory() as tmp:
        engine.run_task(tasks[0], tmp + "/warm")  # compile once, as each worker does on its first task
        t0 = time.perf_counter()
        for task in tasks:
            engine.run_task(task, tmp)
        serial = time.perf_counter() - t0
    print(f"serial in-process: {serial:.1f} s")
    print(json.dumps({"speedup_2_workers": results[1] / results[2],
                      "overhead_per_task_s": (results[1] - serial) / args.tasks,
                      "wall_1_worker_s": results[1], "wall_2_workers_s": results[2], "serial_s": serial,
                      "n_tasks": args.tasks}))


if __name__ == "__main__":
    main()
