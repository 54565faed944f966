"""Benchmark: a 200-task sweep of a cheap quick preset on 1 worker against 2 workers.

Reports the speed-up of 2 workers over 1 and the scheduling overhead per task: the 1-worker sweep's wall time minus
the time its worker spent inside the task bodies (each task times itself on the worker), divided by the number of
tasks. That is everything the engine adds around a task: submission, scheduling, (de)serialisation, result transfer
and the driver's bookkeeping. Workers are warmed up with one task first, so compilation is not counted.

With ``--serial`` the same tasks also run in this process without Dask, and ``worker_vs_serial`` reports how much
slower a task body runs inside a worker process than here (on a loaded machine this is dominated by noise).

Last line: one JSON object with ``speedup_2_workers`` and ``overhead_per_task_s``.

    .venv/bin/python bench/sweep.py [--tasks 200] [--serial]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from attnlab.app import sweep as engine
from attnlab.registry import get_preset


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


def timed_task(task, root):
    """``engine.run_task`` plus the time the worker spent inside it."""
    t0 = time.perf_counter()
    result = engine.run_task(task, root)
    result["summary"] = {**(result.get("summary") or {}), "task_body_s": time.perf_counter() - t0}
    return result


def run(n_workers: int, tasks, root: Path):
    client = engine.make_client(workers=n_workers)
    try:
        client.wait_for_workers(n_workers)
        client.run(warm, tasks[0])
        t0 = time.perf_counter()
        outcomes = engine.run_tasks(client, tasks, root, task_fn=timed_task)
        wall = time.perf_counter() - t0
    finally:
        cluster = client.cluster
        client.close()
        cluster.close()
    body = sum(o.summary.get("task_body_s", 0.0) for o in outcomes)
    return wall, body, sum(o.status == "failed" for o in outcomes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--serial", action="store_true", help="also run the tasks serially in this process")
    args = ap.parse_args()
    tasks = cheap_tasks(args.tasks)
    wall, body = {}, {}
    for n_workers in (1, 2):
        with tempfile.TemporaryDirectory() as tmp:
            wall[n_workers], body[n_workers], failed = run(n_workers, tasks, Path(tmp))
        print(f"{n_workers} worker(s): {args.tasks} tasks in {wall[n_workers]:.1f} s, "
              f"{body[n_workers]:.1f} s inside task bodies ({failed} failed)", flush=True)
    out = {"speedup_2_workers": wall[1] / wall[2], "overhead_per_task_s": (wall[1] - body[1]) / args.tasks,
           "wall_1_worker_s": wall[1], "wall_2_workers_s": wall[2], "task_body_1_worker_s": body[1],
           "n_tasks": args.tasks, "load_average_1min": os.getloadavg()[0]}
    if args.serial:
        with tempfile.TemporaryDirectory() as tmp:
            engine.run_task(tasks[0], tmp + "/warm")  # compile once, as each worker does on its first task
            t0 = time.perf_counter()
            for task in tasks:
                engine.run_task(task, tmp)
            serial = time.perf_counter() - t0
        print(f"serial in-process: {serial:.1f} s")
        out.update(serial_s=serial, worker_vs_serial=body[1] / serial)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
