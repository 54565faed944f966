"""The ``attnlab`` command line: ``list``, ``run`` and ``reproduce``.

Bad input (unknown preset, paper or key, out-of-range value, malformed ``--set``, unwritable output) prints one
line on stderr and exits with status 2; nothing is written. Ctrl-C exits with 130 and leaves no finished-looking
directory.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from attnlab.app import interrupt
from attnlab.errors import AttnlabError

try:  # recent Typer vendors click as typer._click; older releases depend on click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover
    from click.exceptions import ClickException

MAX_SEED = 2**63 - 1  # jax.random.key takes a signed 64-bit integer (attnlab.app.store.MAX_SEED)
MAX_SEEDS = 100_000
MAX_WORKERS = 1024

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Simulate attention models exactly as theory defines them, and check theory against simulation.")
# Wide tables when the output is a file or a pipe (Rich assumes 80 columns there).
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


@contextmanager
def _progress(label: str):
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err, transient=False) as bar:
        task = bar.add_task(label, total=1.0)

        def update(done, total):
            bar.update(task, completed=done / max(total, 1))

        yield update
        bar.update(task, completed=1.0)


def _resolve(name: str, quick: bool, sets: list[str] | None):
    from attnlab.config import parse_set
    from attnlab.registry import get_preset, resolve_config

    preset = get_preset(name)
    return preset, resolve_config(preset, quick=quick, overrides=parse_set(sets))


def _checks_table(results) -> Table:
    from attnlab.app.report import check_rows

    table = Table(title="theory vs simulation")
    for col in ("preset", "check", "theory", "simulation", "abs error", "tolerance", "pass"):
        table.add_column(col, overflow="fold")
    for row in check_rows(results):
        *vals, passed = row
        table.add_row(vals[0], vals[1], *(f"{v:.6g}" for v in vals[2:]),
                      "[green]yes[/green]" if passed else "[red]NO[/red]")
    return table


def _run_one(preset, config, seed: int, quick: bool, out_dir: Path | None, root: Path, force: bool,
             figures: bool = True):
    from attnlab.app.report import implementation_text
    from attnlab.app.store import run_preset

    global _computed_here
    _computed_here = True
    with _progress(f"{preset.name}") as update:
        res = run_preset(preset, config, seed, quick=quick, out_dir=out_dir, results_root=root, force=force,
                         progress=update, figures=figures)
    if res.reused:
        err.print(f"{preset.name}: reusing finished run in {res.run_dir} (use --force to rerun)")
    else:
        impl = implementation_text(res.summary)
        err.print(f"{preset.name}: done in {res.summary['elapsed_s']:.1f} s -> {res.run_dir}"
                  + (f" ({impl})" if impl else ""), markup=False)
    return res


@app.command("list")
def list_presets():
    """List every preset: name, paper, figure, description."""
    from attnlab.registry import all_presets

    table = Table(title="attnlab presets")
    for col in ("preset", "paper", "figure", "description"):
        table.add_column(col, overflow="fold")
    for p in all_presets().values():
        table.add_row(p.name, p.citation, p.figure, p.description)
    out.print(table)


@app.command()
def run(
    preset: Annotated[str, typer.Argument(help="preset name (see 'attnlab list')")],
    quick: Annotated[bool, typer.Option("--quick", help="quick size (seconds)")] = False,
    out_dir: Annotated[Path | None, typer.Option("--out", help="run directory (default results/PRESET/HASH)")] = None,
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="root PRNG seed")] = 0,
    sets: Annotated[list[str] | None, typer.Option("--set", help="override a config field: key=value")] = None,
    force: Annotated[bool, typer.Option("--force", help="rerun even if a finished identical run exists")] = False,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="write the figures")] = True,
):
    """Run one preset and write config.json, data.zarr, summary.json and figures."""
    from attnlab.app.store import preflight

    p, config = _resolve(preset, quick, sets)
    # everything that can be checked before the run (output directory, memory) is, so that a bad --out or an
    # oversized config fails in a second with one line instead of after the simulation
    preflight(p, config, seed, out_dir, force)
    res = _run_one(p, config, seed, quick, out_dir, Path("results"), force, figures)
    out.print(_checks_table({p.name: res}))
    if not all(c["passed"] for c in res.summary.get("checks", [])):
        raise typer.Exit(1)


@contextmanager
def _sweep_display(total: int, label: str):
    """Live display of a sweep: done, running (the tasks on a worker now), failed, elapsed and ETA. When stderr is
    not a terminal (a log file, a pipe, a batch job), one plain line per finished task instead."""
    if not err.is_terminal:
        import time

        t0 = time.monotonic()

        def line(counts, outcome=None):
            if outcome is None:
                return
            what = outcome.status if outcome.status != "failed" else f"FAILED ({outcome.error})"
            err.print(f"{label}: [{counts['done']}/{counts['total']}] {outcome.task.label} {what}; "
                      f"running {counts['running']}, failed {counts['failed']}, "
                      f"{time.monotonic() - t0:.0f} s elapsed", markup=False, highlight=False, soft_wrap=True)

        yield line
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("running {task.fields[running]}  failed {task.fields[failed]}  reused {task.fields[reused]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=err) as bar:
        task = bar.add_task(label, total=total, running=0, failed=0, reused=0)

        def update(counts, outcome=None):
            bar.update(task, completed=counts["done"], running=counts["running"], failed=counts["failed"],
                       reused=counts["reused"])

        yield update


def _check_folder(folder: Path) -> None:
    """An output folder of ``reproduce`` or ``sweep`` must be a directory or not exist yet (checked before anything
    runs); nothing is written."""
    if str(folder) == "":
        raise AttnlabError("empty --out: name a directory")
    for path in (folder, *folder.parents):
        if path.exists() and not path.is_dir():
            raise AttnlabError(f"cannot write to output directory {folder}: {path} exists and is not a directory")


def _engine(tasks, root: Path, scheduler: str | None, workers: int | None, label: str, check_first=None):
    from attnlab.app import sweep as engine

    engine.clean_stale_temporaries(root)
    with engine.quiet_workers():
        client = engine.make_client(scheduler, workers)
    try:
        with _sweep_display(len(tasks), label) as update:
            return engine.run_tasks(client, tasks, root, update, check_first=check_first)
    finally:
        engine.close_client(client, own_cluster=not scheduler)


@app.command()
def reproduce(
    papers: Annotated[list[str] | None, typer.Argument(help="papers to reproduce (default: all)")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="quick size")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="output folder")] = Path("results"),
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="root PRNG seed")] = 0,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address tcp://host:port")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=MAX_WORKERS, help="local worker processes")] = None,
):
    """Run every preset (of the named papers) on Dask, then write report.md and report.html."""
    from attnlab.app.report import write_report
    from attnlab.app.resources import check_memory
    from attnlab.app.store import RunResult
    from attnlab.app.sweep import Task
    from attnlab.registry import all_presets

    presets = all_presets()
    known = sorted({p.paper for p in presets.values()})
    for paper in papers or []:
        if paper not in known:
            raise AttnlabError(f"unknown paper {paper!r} (known: {', '.join(known)})")
    chosen = [p for p in presets.values() if not papers or p.paper in papers]
    _check_folder(out_dir)
    for p in chosen:  # validate every config before anything runs
        _, config = _resolve(p.name, quick, None)
        check_memory(p, config)
    tasks = [Task(p.name, (), seed, quick) for p in chosen]
    outcomes = _engine(tasks, out_dir, scheduler, workers, "reproduce")
    results, failed = {}, []
    for o in outcomes:
        if o.status == "failed":
            failed.append(o)
            err.print(f"{o.task.preset}: FAILED ({o.error})", markup=False)
        else:
            results[o.task.preset] = RunResult(Path(o.run_dir), o.summary, o.status == "reused")
            if o.status == "reused":
                err.print(f"{o.task.preset}: reusing finished run in {o.run_dir}", markup=False)
    report = write_report(out_dir, results, presets, failed={o.task.preset: o.error for o in failed})
    out.print(_checks_table(results))
    n = sum(len(r.summary.get("checks", [])) for r in results.values())
    n_pass = sum(c["passed"] for r in results.values() for c in r.summary.get("checks", []))
    html = report.with_suffix(".html")
    out.print(f"{n_pass}/{n} checks passed, {len(failed)} presets failed; report: {report} and {html}")
    if n_pass < n or failed:
        raise typer.Exit(1)


@app.command()
def sweep(
    preset: Annotated[str, typer.Argument(help="preset name")],
    grids: Annotated[list[str] | None, typer.Option("--grid", help="key=v1,v2,... (repeatable)")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=MAX_SEEDS, help="seeds 0..K-1 per grid point")] = 1,
    quick: Annotated[bool, typer.Option("--quick", help="start from the quick size")] = False,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address tcp://host:port")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=MAX_WORKERS, help="local worker processes")] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="sweep folder (default results/sweeps/PRESET-HASH)")] = None,
    plot_metrics: Annotated[list[str] | None, typer.Option("--plot", help="draw METRIC against the swept fields")] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="write each run's figures")] = True,
):
    """Run the Cartesian product of a grid (times K seeds) as independent tasks; resumable; writes sweep.zarr."""
    from attnlab.app import sweep as engine
    from attnlab.registry import get_preset

    p = get_preset(preset)
    grid = engine.parse_grid(grids)
    for metric in plot_metrics or []:
        engine.check_metric_name(metric)
    seed_list = list(range(seeds))
    tasks = engine.expand_grid(p, grid, seed_list, quick, figures)
    out_dir = out_dir or Path("results") / "sweeps" / engine.sweep_dir_name(p.name, grid, seed_list, quick)
    _check_folder(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AttnlabError(f"cannot write to output directory {out_dir}: {e.strerror or e}") from None
    # an unknown --plot metric is rejected as soon as the first task finishes (the metric names come from the
    # preset's summary), and the tasks not yet started are cancelled
    outcomes = _engine(tasks, out_dir, scheduler, workers, f"sweep {p.name}",
                       check_first=(lambda o: engine.check_metrics(o, plot_metrics)) if plot_metrics else None)
    ds = engine.collect(outcomes, grid, seed_list)
    path = engine.write_sweep(ds, out_dir, {"preset": p.name, "grid": grid, "seeds": seed_list, "quick": quick})
    for metric in plot_metrics or []:
        engine.plot_metric(ds, metric, out_dir)
    n_failed = sum(o.status == "failed" for o in outcomes)
    for o in outcomes:
        if o.status == "failed":
            err.print(f"failed: {o.task.label}: {o.error}", markup=False)
    out.print(f"{len(outcomes) - n_failed}/{len(outcomes)} tasks finished "
              f"({sum(o.status == 'reused' for o in outcomes)} reused); {path}")
    if n_failed:
        raise typer.Exit(1)


_computed_here = False
"""Whether this process ran a simulation itself (``run``), as opposed to driving Dask workers (``reproduce``,
``sweep``): only then may compiled programs still be running on XLA's threads at exit (see :func:`_exit`)."""


def _one_line(message) -> str:
    return " ".join(str(message).split())


def main(argv: list[str] | None = None) -> int:
    """Entry point: one-line errors with exit status 2, no tracebacks for bad input."""
    command = typer.main.get_command(app)
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        argv = ["--help"]
    from attnlab import runtime

    runtime.configure()
    import matplotlib

    matplotlib.use("Agg")  # figures are files: no display needed
    try:
        with interrupt.catching_sigint():
            rv = command.main(args=argv, prog_name="attnlab", standalone_mode=False)
            interrupt.check()
    except AttnlabError as e:
        err.print(f"error: {_one_line(e)}", markup=False, highlight=False, soft_wrap=True)
        return getattr(e, "exit_code", 2)
    except typer.Exit as e:
        return e.exit_code
    except ClickException as e:
        err.print(f"error: {_one_line(e.format_message())}", markup=False, highlight=False, soft_wrap=True)
        return 2
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted", markup=False)
        return 130
    return rv if isinstance(rv, int) else 0


def _exit(rc: int) -> None:
    """Exit the process with status ``rc``. After Ctrl-C, skip the interpreter's finalisation: a compiled program
    dispatched asynchronously may still be running on XLA's threads, and tearing down the interpreter under it
    crashed the process with SIGSEGV (exit -11 instead of 130) in about one interrupt in three on a loaded machine.
    By the time :func:`main` returns, its context managers have already removed the temporary directory. A sweep's
    driver computed nothing itself and exits normally, so that multiprocessing cleans up its semaphores (a hard exit
    there made the resource tracker warn about leaked semaphores)."""
    if rc == 130 and _computed_here:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nothing left to say
                pass
        os._exit(130)
    sys.exit(rc)


if __name__ == "__main__":
    _exit(main())


def console_main() -> None:
    _exit(main())
