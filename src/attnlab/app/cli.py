"""The ``attnlab`` command line: ``list``, ``show``, ``run``, ``reproduce``, ``sweep``, ``runs``, ``plot`` and ``new``.

Bad input (unknown preset, paper or key, out-of-range value, malformed ``--set``, unwritable output) prints one
line on stderr and exits with status 2; nothing is written. Ctrl-C exits with 130 and leaves no finished-looking
directory.
"""

from __future__ import annotations

import logging
import os
import sys
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table

from attnlab.app import help_format, interrupt
from attnlab.errors import AttnlabError

try:  # recent Typer vendors click as typer._click; older releases depend on click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover
    from click.exceptions import ClickException

MAX_SEED = 2**63 - 1  # jax.random.key takes a signed 64-bit integer (attnlab.app.store.MAX_SEED)
MAX_SEEDS = 100_000
MAX_WORKERS = 1024

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every command
                  help="Simulate attention models exactly as theory defines them, and check theory against simulation.")
PIPE_WIDTH = 100
NARROW = 90
"""Below this width ``attnlab show`` lists the config fields as blocks instead of a table."""
"""The width of the tables when the output is a file or a pipe and ``COLUMNS`` is not set."""
out = Console()
err = Console(stderr=True)


def _width(stream) -> int | None:
    """The console width for ``stream``: ``COLUMNS`` when set to a positive integer, else Rich's own measure of a
    terminal, else :data:`PIPE_WIDTH` (Rich assumes 80 columns for a pipe, and the old fixed 160 overflowed
    every terminal narrower than that)."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    return None if tty else PIPE_WIDTH


def _size_consoles() -> None:
    """Fit both consoles to their streams now (the environment and the streams may change after import)."""
    out.width = _width(sys.stdout)  # None: Rich measures the terminal
    err.width = _width(sys.stderr)


def _version_text() -> str:
    """attnlab's version: ``attnlab.__version__``, from which the package metadata takes it (``pyproject.toml``)."""
    import attnlab

    return attnlab.__version__


def _print_version(value: bool) -> None:
    if value:
        out.print(f"attnlab {_version_text()}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="print the version and exit")] = False,
):
    """Simulate attention models exactly as theory defines them, and check theory against simulation."""


def _prepare() -> None:
    """What the commands that compute or draw (``run``, ``reproduce``, ``sweep``, ``plot``), and ``list`` and ``show``
    when they import the papers, set up first: attnlab's runtime (:func:`attnlab.runtime.configure`: XLA flags and
    the compile cache, before JAX starts; inherited by the Dask workers) and matplotlib's file backend. The other
    commands, ``--version`` and ``-h`` import neither JAX nor matplotlib."""
    from attnlab import runtime

    runtime.configure()
    # figures are files: no display needed. matplotlib reads MPLBACKEND when first imported, in this process or in a
    # worker it starts; importing it here would cost every command that draws nothing (reproduce's and sweep's
    # drivers, --no-figures runs)
    os.environ["MPLBACKEND"] = "Agg"
    if "matplotlib" in sys.modules:
        sys.modules["matplotlib"].use("Agg")


@contextmanager
def _progress(label: str):
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

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


def _print_checks(results) -> None:
    """Every check of ``results`` (preset -> RunResult) as a table that fits the console: the check's name wraps at
    its words, the preset, the numbers and the verdict never fold (the preset column is left out for a single
    preset); a console too narrow for that gets one block of two lines per check. A check that did not pass for want
    of evidence (not evaluated, or inconclusive: its negative control not rejected) says why after its name."""
    from attnlab.app.report import status_text

    verdicts = {"passed": "yes", "failed": "NO", "not evaluated": "n/e", "inconclusive": "inconclusive"}
    rows = []
    for preset, res in results.items():
        for c in res.summary.get("checks", []):
            text = status_text(c)
            status = text.split(":")[0]
            name = c["name"] + (f" ({text})" if status in ("not evaluated", "inconclusive") else "")
            nums = (c.get(k) for k in ("theory", "simulation", "abs_error", "tolerance"))
            rows.append((preset, name, *(f"{v:.6g}" if isinstance(v, (int, float)) else "-" for v in nums),
                         verdicts.get(status, "NO")))
    header = ("preset", "check", "theory", "simulation", "abs error", "tolerance", "pass")
    keep = [i for i in range(len(header)) if i != 0 or len(results) > 1]
    fixed = {i: max(len(header[i]), *(len(r[i]) for r in rows)) if rows else len(header[i]) for i in keep if i != 1}
    room = out.width - sum(fixed.values()) - (3 * len(keep) + 1)
    if room < 20:
        out.print("theory vs simulation:", markup=False, highlight=False)
        for r in rows:
            out.print(f"{r[0]}: {r[1]}", markup=False, highlight=False)
            out.print(Padding(f"theory {r[2]}, simulation {r[3]}, abs error {r[4]}, tolerance {r[5]}: pass {r[6]}",
                              (0, 0, 0, 4), expand=False), markup=False, highlight=False)
        return
    table = Table(title="theory vs simulation")
    for i in keep:
        if i == 1:
            table.add_column(header[i], overflow="fold", width=min(room, max([5, *(len(r[1]) for r in rows)])))
        else:
            table.add_column(header[i], no_wrap=True, width=fixed[i])
    for r in rows:
        cells = [r[i] for i in keep]
        cells[-1] = {"yes": "[green]yes[/green]", "NO": "[red]NO[/red]"}.get(cells[-1], f"[yellow]{cells[-1]}[/yellow]")
        table.add_row(*(c if j == len(cells) - 1 else escape(c) for j, c in enumerate(cells)))
    out.print(table, highlight=False)


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
    from attnlab.app import catalogue

    presets = catalogue.presets(prepare=_prepare)
    if out.width < NARROW:  # four columns would fold every cell: one block per preset instead
        for p in presets:
            out.print(p.name, markup=False, highlight=False)
            for line in (f"{p.citation}, {p.figure}", p.description):
                out.print(Padding(line, (0, 0, 0, 4), expand=False), markup=False, highlight=False)
        return
    table = Table(title="attnlab presets")
    table.add_column("preset", no_wrap=True)  # the name is what a reader looks for: never folded
    table.add_column("paper", overflow="fold", max_width=24)
    table.add_column("figure", overflow="fold", max_width=16)
    table.add_column("description", overflow="fold")
    for p in presets:
        table.add_row(p.name, p.citation, p.figure, p.description)
    out.print(table, markup=False, highlight=False)


@app.command()
def show(preset: Annotated[str, typer.Argument(help="preset name (see 'attnlab list')")]):
    """Show a preset: paper, figure, description, and each config field (type, default, quick value, meaning)."""
    from attnlab.app import catalogue

    p, fields = catalogue.describe(preset, prepare=_prepare)
    head = Table.grid(padding=(0, 1))
    head.add_column(no_wrap=True, style="bold")
    head.add_column(overflow="fold")
    for label, text in (("preset", p.name), ("paper", p.citation), ("figure", p.figure),
                        ("description", p.description)):
        head.add_row(label, text)
    out.print(head, markup=False, highlight=False)
    if out.width < NARROW:  # a table of five columns would fold every cell: one block per field instead
        out.print("config fields (override with --set key=value):", markup=False, highlight=False)
        for f in fields:
            quick = "same" if f.quick == f.default else f.quick
            out.print(f"{f.name} ({f.type}): default {f.default}, quick {quick}", markup=False, highlight=False)
            if f.description:
                out.print(Padding(f.description, (0, 0, 0, 4), expand=False), markup=False, highlight=False)
        return
    table = Table(title="config fields (override with --set key=value; * = quick differs)", title_justify="left")
    table.add_column("field", no_wrap=True)
    table.add_column("type", overflow="fold", max_width=26)
    table.add_column("default", overflow="fold", max_width=18)
    table.add_column("quick", overflow="fold", max_width=18)
    table.add_column("meaning", overflow="fold")
    for f in fields:
        table.add_row(f.name, f.type, f.default, f.quick + (" *" if f.quick != f.default else ""), f.description)
    out.print(table, markup=False, highlight=False)


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
    _prepare()
    from attnlab.app import ownership
    from attnlab.app.store import preflight

    p, config = _resolve(preset, quick, sets)
    # everything that can be checked before the run (output directory, memory) is, so that a bad --out or an
    # oversized config fails in a second with one line instead of after the simulation
    with ownership.writer_lock(out_dir) if out_dir is not None else nullcontext():
        preflight(p, config, seed, out_dir, force)
        res = _run_one(p, config, seed, quick, out_dir, Path("results"), force, figures)
    _print_checks({p.name: res})
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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("running {task.fields[running]}  failed {task.fields[failed]}  reused {task.fields[reused]}"),
               TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
    with Progress(*columns, console=err) as bar:
        task = bar.add_task(label, total=total, running=0, failed=0, reused=0)

        def update(counts, outcome=None):
            bar.update(task, completed=counts["done"], running=counts["running"], failed=counts["failed"],
                       reused=counts["reused"])

        yield update


def _engine(tasks, root: Path, scheduler: str | None, workers: int | None, label: str, check_first=None):
    from attnlab.app import ownership, scheduling
    from attnlab.app import sweep as engine
    from attnlab.registry import get_preset

    ownership.remove_stale_temporaries(root)
    reused = engine.reused_outcomes(tasks, root)
    if reused is not None:  # every run is finished: no cluster to start
        if check_first is not None:
            check_first(reused[0])
        return reused
    # on a GPU (a CUDA plugin and a visible GPU): one worker owning it, the C-kernel presets on CPU-only workers
    layout = None if scheduler else scheduling.choose_layout(workers)
    on_gpu = {"layout": layout} if layout is not None and layout.on_gpu else {}
    if on_gpu:
        err.print(layout.describe(), markup=False, highlight=False)
    with engine.quiet_workers():
        client = engine.make_client(scheduler, workers, papers={get_preset(t.preset).paper for t in tasks}, **on_gpu)
    interrupted = False
    try:
        resources, order = scheduling.plan(client, tasks, layout)
        with _sweep_display(len(tasks), label) as update:
            return engine.run_tasks(client, tasks, root, update, check_first=check_first, resources=resources,
                                    order=order)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        engine.close_client(client, own_cluster=not scheduler, interrupted=interrupted)
        # a killed sweep's orphaned worker may have held its run's lock at the start: its temporary is stale now
        ownership.remove_stale_temporaries(root)


WORKERS_HELP = "local worker processes (default: one per core this process may use)"


@app.command()
def reproduce(
    papers: Annotated[list[str] | None, typer.Argument(help="papers to reproduce (default: all)")] = None,
    quick: Annotated[bool, typer.Option("--quick", help="quick size")] = False,
    out_dir: Annotated[Path, typer.Option("--out", help="output folder")] = Path("results"),
    seed: Annotated[int, typer.Option("--seed", min=0, max=MAX_SEED, help="root PRNG seed")] = 0,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address tcp://host:port")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=MAX_WORKERS, help=WORKERS_HELP)] = None,
):
    """Run every preset (of the named papers) on Dask, then write report.md and report.html. A preset that cannot run
    here (a local input it needs was not given) is skipped, not run, with the reason. The output folder must be new,
    empty or attnlab's (files of yours beside attnlab's are kept; a report attnlab did not write is never replaced)."""
    _prepare()
    from attnlab.app import ownership
    from attnlab.app.resources import check_memory
    from attnlab.app.sweep import Task
    from attnlab.registry import all_presets, unmet

    presets = all_presets()
    known = sorted({p.paper for p in presets.values()})
    for paper in papers or []:
        if paper not in known:
            raise AttnlabError(f"unknown paper {paper!r} (known: {', '.join(known)})")
    chosen = [p for p in presets.values() if not papers or p.paper in papers]
    ownership.check_output_folder(out_dir)
    skipped: dict[str, str] = {}
    for p in chosen:  # validate every config before anything runs
        _, config = _resolve(p.name, quick, None)
        reason = unmet(p, config)
        if reason is not None:  # reported as skipped: neither run nor counted
            skipped[p.name] = reason
            err.print(f"{p.name}: skipped, not run ({reason})", markup=False, highlight=False, soft_wrap=True)
            continue
        check_memory(p, config)
    tasks = [Task(p.name, (), seed, quick) for p in chosen if p.name not in skipped]
    with ownership.output_folder(out_dir, "reproduce"):
        _reproduce(tasks, out_dir, scheduler, workers, presets, skipped)


def _reproduce(tasks, out_dir: Path, scheduler, workers, presets, skipped) -> None:
    from attnlab.app.report import check_summary, write_report
    from attnlab.app.store import RunResult

    outcomes = _engine(tasks, out_dir, scheduler, workers, "reproduce") if tasks else []
    results, failed = {}, []
    for o in outcomes:
        if o.status == "failed":
            failed.append(o)
            err.print(f"{o.task.preset}: FAILED ({o.error}){o.traceback_lines()}", markup=False, highlight=False,
                      soft_wrap=True)
        else:
            results[o.task.preset] = RunResult(Path(o.run_dir), o.summary, o.status == "reused")
            if o.status == "reused":
                err.print(f"{o.task.preset}: reusing finished run in {o.run_dir}", markup=False)
    report = write_report(out_dir, results, presets, failed={o.task.preset: o.error for o in failed},
                          skipped=skipped)
    _print_checks(results)
    counts = check_summary(results)
    html = report.with_suffix(".html")
    out.print(f"{counts['passed']}/{counts['checks']} checks passed ({counts['not evaluated']} not evaluated), "
              f"negative controls rejected {counts['rejected']}/{counts['controls']}, {len(failed)} presets failed"
              + (f", {len(skipped)} skipped (not run)" if skipped else "")
              + f"; report: {report} and {html}", markup=False, highlight=False)
    if counts["passed"] < counts["checks"] or failed:
        raise typer.Exit(1)


@app.command()
def sweep(
    preset: Annotated[str, typer.Argument(help="preset name")],
    grids: Annotated[list[str] | None, typer.Option("--grid", help="key=v1,v2,... (repeatable)")] = None,
    seeds: Annotated[int, typer.Option("--seeds", min=1, max=MAX_SEEDS, help="seeds 0..K-1 per grid point")] = 1,
    quick: Annotated[bool, typer.Option("--quick", help="start from the quick size")] = False,
    scheduler: Annotated[str | None, typer.Option("--scheduler", help="Dask scheduler address tcp://host:port")] = None,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=MAX_WORKERS, help=WORKERS_HELP)] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="sweep folder (default results/sweeps/PRESET-HASH)")] = None,
    plot_metrics: Annotated[list[str] | None, typer.Option("--plot", help="draw METRIC against the swept fields")] = None,
    figures: Annotated[bool, typer.Option("--figures/--no-figures", help="write each run's figures")] = True,
):
    """Run the Cartesian product of a grid (times K seeds) as independent tasks; resumable; writes sweep.zarr."""
    _prepare()
    from attnlab.app import ownership
    from attnlab.app import sweep as engine
    from attnlab.registry import get_preset

    p = get_preset(preset)
    grid = engine.parse_grid(grids)
    for metric in plot_metrics or []:
        engine.check_metric_name(metric)
    seed_list = list(range(seeds))
    tasks = engine.expand_grid(p, grid, seed_list, quick, figures)
    out_dir = out_dir or Path("results") / "sweeps" / engine.sweep_dir_name(p.name, grid, seed_list, quick)
    ownership.check_output_folder(out_dir)
    with ownership.output_folder(out_dir, "sweep"):
        # an unknown --plot metric is rejected as soon as the first task finishes (the metric names come from the
        # preset's summary), and the tasks not yet started are cancelled
        outcomes = _engine(tasks, out_dir, scheduler, workers, f"sweep {p.name}",
                           check_first=(lambda o: engine.check_metrics(o, plot_metrics)) if plot_metrics else None)
        _finish_sweep(outcomes, grid, seed_list, p, out_dir, quick, plot_metrics)


def _finish_sweep(outcomes, grid, seed_list, p, out_dir: Path, quick: bool, plot_metrics) -> None:
    from attnlab.app import sweep as engine

    ds = engine.collect(outcomes, grid, seed_list, p)
    path = engine.write_sweep(ds, out_dir, {"preset": p.name, "citation": p.citation, "grid": grid,
                                            "seeds": seed_list, "quick": quick})
    for metric in plot_metrics or []:
        engine.plot_metric(ds, metric, out_dir)
    n_failed = sum(o.status == "failed" for o in outcomes)
    for o in outcomes:
        if o.status == "failed":
            err.print(f"failed: {o.task.label}: {o.error}{o.traceback_lines()}", markup=False, highlight=False,
                      soft_wrap=True)
    out.print(f"{len(outcomes) - n_failed}/{len(outcomes)} tasks finished "
              f"({sum(o.status == 'reused' for o in outcomes)} reused); {path}")
    if n_failed:
        raise typer.Exit(1)


@app.command()
def runs(folder: Annotated[Path, typer.Argument(help="results folder, searched recursively")] = Path("results")):
    """List the finished runs under a folder: preset, seed, size, checks passed, time, finding, path."""
    from attnlab.app.describe import find_runs

    damaged: list[tuple[str, str]] = []
    found = find_runs(folder, damaged)
    for path, why in damaged:
        err.print(f"damaged run (not counted): {path}: {why}", markup=False, highlight=False, soft_wrap=True)
    if not found:
        out.print(f"no finished runs under {folder}", markup=False, highlight=False)
        return
    # the columns a row is read by (preset, seed, size, checks, time) never wrap; the path gets the width it needs
    # where there is room (else it folds), the finding what is left (cut with an ellipsis, or left out when fewer
    # than 12 columns remain); a terminal too narrow even for that gets one block of lines per run
    essential = ("preset", "seed", "size", "checks", "time")
    widths = {c: max(len(c), *(len(getattr(r, c)) for r in found)) for c in essential}
    path_w = max(4, *(len(r.path) for r in found))
    finding_w = max(7, *(len(r.finding) for r in found))
    room = out.width - sum(widths.values()) - (3 * (len(essential) + 1) + 1)  # left for the path (6 columns)
    if room < 12:
        out.print(f"finished runs under {folder}:", markup=False, highlight=False)
        for r in found:
            out.print(r.preset, markup=False, highlight=False)
            for line in (f"seed {r.seed}, {r.size}, checks {r.checks}, {r.time}", r.path):
                out.print(Padding(line, (0, 0, 0, 4), expand=False), markup=False, highlight=False)
    else:
        show_finding = room - 3 - min(path_w, room) >= 12
        table = Table(title=f"finished runs under {folder}", title_justify="left")
        for col in essential:
            table.add_column(col, no_wrap=True, width=widths[col])
        if show_finding:
            table.add_column("finding", no_wrap=True, overflow="ellipsis", width=min(finding_w, room - 3 - path_w))
        table.add_column("path", overflow="fold", width=min(path_w, room))
        for r in found:
            table.add_row(*(getattr(r, c) for c in essential), *([r.finding] if show_finding else []), r.path)
        out.print(table, markup=False, highlight=False)
    n_ne = sum(r.not_evaluated for r in found)
    out.print(f"{len(found)} finished run{'s' if len(found) != 1 else ''}; checks: passed/evaluated"
              + (", '+k n/e': k checks not evaluated" if n_ne else ""), markup=False, highlight=False)


@app.command()
def plot(
    run_dir: Annotated[Path, typer.Argument(help="a finished run directory")],
    animation: Annotated[bool, typer.Option("--animation/--no-animation",
                                            help="redraw the animated GIF too, for presets that have one")] = True,
):
    """Redraw a finished run's figures from its data.zarr and config.json, without rerunning.

    The PNG and PDF files (and a GIF, for presets with an animation) are replaced atomically; nothing else changes."""
    _prepare()
    from attnlab.app.describe import redraw

    written = redraw(run_dir, animation=animation)
    out.print(f"{len(written)} figure files written in {run_dir}: {', '.join(written) or 'none'}",
              markup=False, highlight=False, soft_wrap=True)


@app.command()
def new(package: Annotated[str, typer.Argument(help="the plugin's directory, named after its package (e.g. mypaper)")]):
    """Write the skeleton of a plugin package: pyproject.toml with the entry point, one preset with one check and
    its negative control, one figure, and a test calling the conformance kit. Then: pip install -e PACKAGE."""
    from attnlab.app.scaffold import write_plugin

    files = write_plugin(package)
    module = Path(package).name.replace("-", "_")
    out.print(f"wrote {len(files)} files in {package}; next: pip install -e {package}, then "
              f"attnlab run {module}-mean --quick, and pytest {package}", markup=False, highlight=False, soft_wrap=True)


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
    if any(a in ("-h", "--help") for a in argv):
        help_format.load()
    _size_consoles()
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
    """Exit the process with status ``rc``. A process that ran a simulation itself (``run``) skips the
    interpreter's finalisation once its output is flushed: by the time :func:`main` returns, the run is written and
    renamed into place, its files closed and its temporary directory removed, and tearing down the modules and
    compiled programs JAX holds would only lengthen every command. After Ctrl-C skipping it is also
    what keeps the process alive: a compiled program dispatched asynchronously may still be running on XLA's
    threads, and tearing down the interpreter under it crashed the process with SIGSEGV (exit -11 instead of 130) in
    about one interrupt in three on a loaded machine. A sweep's driver computed nothing itself and exits normally,
    so that multiprocessing cleans up its semaphores (a hard exit there made the resource tracker warn about leaked
    semaphores)."""
    if _computed_here:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed pipe: nothing left to say
                pass
        os._exit(rc)
    sys.exit(rc)


if __name__ == "__main__":
    _exit(main())


def console_main() -> None:
    _exit(main())
