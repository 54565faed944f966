"""Run directories: atomic writes, reuse of finished runs, provenance.

A run directory holds ``config.json`` (resolved config, seed, versions, git commit, machine), ``data.zarr`` (the xarray
dataset), ``summary.json`` (metrics and checks) and the figures (PNG and PDF). It is assembled in a hidden sibling
``.NAME.tmp-XXXX`` and renamed into place only when complete, so an interrupted run never leaves a directory that
looks finished; a directory at the final path is, by construction, a finished run.

What the user owns is never deleted nor overwritten: a run may replace (``force=True``, or a different config at
the same ``--out``) only an empty directory or a finished run of attnlab, which the store recognises by its
``config.json`` with a ``config_hash`` and its ``summary.json``; any other directory is refused, with or without
``force``. :func:`preflight` checks the target, the seed and the memory a config needs before anything runs, and a
run whose evaluated checks come out non-finite (NaN or infinite theory or simulation) is not committed
(:class:`~attnlab.errors.NonFiniteResultError`): its temporary directory, and any parent directory the run created,
are removed.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import jax

from attnlab import runtime
from attnlab.api import execute, implementations, json_safe
from attnlab.app import interrupt, ownership
from attnlab.config import MAX_SEED, ExperimentConfig, check_seed, config_hash
from attnlab.errors import AttnlabError, NonFiniteResultError
from attnlab.plot import save_figure
from attnlab.registry import Preset
from attnlab.runtime import usable_cores

__all__ = ["RunResult", "default_run_dir", "run_preset", "read_summary", "read_data", "write_data", "provenance", "devices",
           "preflight",
           "is_finished_run", "check_output_dir", "machine", "read_config", "MAX_SEED"]

_VERSIONED = ("attnlab", "jax", "jaxlib", "numpy", "scipy", "xarray", "zarr", "pydantic", "matplotlib")


@dataclass(frozen=True)
class RunResult:
    run_dir: Path
    summary: dict[str, Any]
    reused: bool


def default_run_dir(root: Path, preset: str, digest: str) -> Path:
    return Path(root) / preset / digest


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, ``sysctl`` on macOS, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor", "cpu model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 timeout=5)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """The machine a run ran on: ``platform`` (OS and architecture), ``cpu`` (model name) and ``cores`` (logical
    cores, and those this process may use where that differs)."""
    cores, usable = os.cpu_count(), usable_cores()
    return {"platform": platform.platform(), "cpu": _cpu_model(), "cores": cores,
            **({"usable_cores": usable} if cores and usable != cores else {})}


def provenance() -> dict[str, Any]:
    versions = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return {"versions": versions, "git_commit": _git_commit(), "jax_backend": jax.default_backend(),
            "devices": devices(), "machine": machine()}


def devices() -> dict[str, Any]:
    """The devices JAX computes on: their kind (e.g. ``NVIDIA H100 80GB HBM3``, or the CPU) and count."""
    found = jax.devices()
    kinds = sorted({d.device_kind for d in found})
    return {"platform": found[0].platform, "kind": ", ".join(kinds), "count": len(found)}


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(run_dir) / "summary.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def read_data(run_dir: Path):
    """The dataset of a finished run, loaded into memory (``data.zarr``). A store missing a chunk that its run wrote
    (which zarr would read as fill values) raises :class:`AttnlabError` naming the variable."""
    import xarray as xr
    import zarr

    path = Path(run_dir) / "data.zarr"
    for name, array in zarr.open_group(str(path), mode="r").arrays() if ownership.all_chunks_written(run_dir) else ():
        if array.nchunks_initialized < array.nchunks:
            raise AttnlabError(f"{path} is damaged: variable {name!r} misses {array.nchunks - array.nchunks_initialized}"
                               f" of its {array.nchunks} chunks")
    with runtime.xarray_without_dask(), xr.open_zarr(path, chunks=None) as ds:  # NumPy arrays, not Dask's
        return ds.load()


def read_config(run_dir: Path) -> dict | None:
    """The record in a run's ``config.json`` (None when it is missing or not a JSON object)."""
    run_dir = Path(run_dir)
    try:
        cfg = json.loads((run_dir / "config.json").read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return cfg if isinstance(cfg, dict) else None


def is_finished_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a finished run of attnlab: ``config.json`` with a ``config_hash``, and ``summary.json``
    holding a JSON object."""
    run_dir = Path(run_dir)
    cfg = read_config(run_dir) if run_dir.is_dir() else None
    return cfg is not None and isinstance(cfg.get("config_hash"), str) and isinstance(read_summary(run_dir), dict)


def _finished_with_hash(run_dir: Path, digest: str) -> bool:
    cfg = read_config(run_dir)
    return cfg is not None and cfg.get("config_hash") == digest and isinstance(read_summary(run_dir), dict)


def _is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not any(path.iterdir())
    except OSError:
        return False


def check_output_dir(run_dir: Path, force: bool = False, digest: str | None = None) -> None:
    """Raise :class:`AttnlabError` (one line) unless a run may be written at ``run_dir``: a writable path that names
    a directory (not the current directory nor one of its parents) which is new, empty, or a run of attnlab (a
    finished run of another config only with ``force``, which replaces attnlab's own files there and keeps the
    others: :mod:`attnlab.app.ownership`). A symbolic link to a directory and a mount point are directories to write
    into. Writes nothing."""
    run_dir = Path(run_dir)
    try:
        resolved = run_dir.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as e:
        raise AttnlabError(f"cannot use output directory {str(run_dir)!r}: {e}") from None
    if str(run_dir) in ("", ".", "..") or resolved == cwd or resolved in cwd.parents or not resolved.name:
        raise AttnlabError(f"output directory {str(run_dir)!r} is the current directory or one of its parents: "
                           "name a new directory for the run")
    if os.path.lexists(run_dir) and not run_dir.is_dir():
        raise AttnlabError(f"output path exists and is not a directory: {run_dir}")
    ownership.check_writable(run_dir)
    if not run_dir.is_dir() or _is_empty_dir(run_dir):
        return
    if not ownership.is_attnlab_run(run_dir):
        raise AttnlabError(f"output directory {run_dir} is not empty and is not a finished attnlab run: "
                           "it is left untouched; choose another --out")
    if digest is not None and not force and is_finished_run(run_dir) and not _finished_with_hash(run_dir, digest):
        raise AttnlabError(f"{run_dir} holds a finished run of a different config: choose another --out, or use "
                           "--force to replace the files attnlab wrote there (any other file in it is kept)")


def preflight(preset: Preset, config: ExperimentConfig, seed: int, run_dir: Path | None = None,
              force: bool = False, digest: str | None = None) -> None:
    """Every check that can fail before a run starts, writing nothing: the preset's prerequisite
    (:func:`attnlab.registry.unmet`), the seed's range, the output directory (:func:`check_output_dir`), and the
    memory the config needs (:func:`attnlab.app.resources.check_memory`)."""
    from attnlab.app.resources import check_memory
    from attnlab.registry import unmet

    reason = unmet(preset, config)
    if reason is not None:
        raise AttnlabError(f"{preset.name}: {reason}")
    check_seed(seed)
    if run_dir is not None:
        if digest is None:
            digest = config_hash(preset.name, config, seed, implementations(preset, config))
        check_output_dir(run_dir, force, digest)
    check_memory(preset, config)


def _non_finite_check(checks):
    """The first check whose theory or simulation is NaN or infinite, or that a summary left unevaluated because
    its results were not finite (reason starting "non-finite"); None when all are finite."""
    for c in checks:
        if str(getattr(c, "reason", "")).startswith("non-finite"):
            return c
        if getattr(c, "evaluated", True):
            try:
                finite = math.isfinite(float(c.theory)) and math.isfinite(float(c.simulation))
            except (TypeError, ValueError):
                finite = False
            if not finite:
                return c
    return None


def _prepare(run_dir: Path, force: bool) -> tuple[Path, list[Path]]:
    """Check the target and create the temporary directory the run is assembled in: inside ``run_dir`` when it is an
    existing directory (so that the entries move on one file system, also into a link's target or a mount point),
    else beside it. Raise AttnlabError if not writable. Returns the temporary directory and the parent directories
    created for it (removed again if the run fails)."""
    check_output_dir(run_dir, force)
    parent = run_dir.parent
    created = [p for p in [parent, *parent.parents] if not p.exists()]
    try:
        if run_dir.is_dir():
            tmp = ownership.new_temporary(run_dir)
        else:
            parent.mkdir(parents=True, exist_ok=True)
            tmp = ownership.new_temporary(parent, run_dir.name)
    except OSError as err:
        _remove_empty(created)
        raise AttnlabError(f"cannot write to output directory {run_dir}: {err.strerror or err}") from None
    return tmp, created


def _remove_empty(dirs: list[Path]) -> None:
    for d in dirs:  # innermost first
        try:
            d.rmdir()
        except OSError:
            pass


def _keep_unsaved(tmp: Path, run_dir: Path) -> Path | None:
    """After a failed commit, make the finished result in ``tmp`` visible beside ``run_dir`` (or where it is), and
    return where it is; None when it cannot be kept."""
    for where in (run_dir.parent, tmp.parent):
        target = where / f"{run_dir.name}.unsaved-{uuid.uuid4().hex[:8]}"
        try:
            (tmp / ownership.TEMPORARY_MARK).unlink(missing_ok=True)
            os.rename(tmp, target)
            return target
        except OSError:
            continue
    return None


def _non_finite_metric(metrics: dict[str, Any], prefix: str = "") -> tuple[str, Any] | None:
    """The name (nested dicts and lists joined by ".") and value of the first metric that is a NaN or infinite
    number, else None. The value is returned with the name: a metric's own name may hold a "." (``lam0.01``)."""
    for name, value in metrics.items():
        label = f"{prefix}{name}"
        if isinstance(value, dict):
            bad = _non_finite_metric(value, f"{label}.")
        elif isinstance(value, (list, tuple)):
            bad = _non_finite_metric({str(i): v for i, v in enumerate(value)}, f"{label}.")
        else:
            try:
                finite = isinstance(value, (str, bool)) or value is None or math.isfinite(float(value))
            except (TypeError, ValueError):
                finite = True
            bad = None if finite else (label, value)
        if bad is not None:
            return bad
    return None


IN_MEMORY_BYTES = 256 * 2**20
"""A run's dataset up to this size (``Dataset.nbytes``) is encoded in memory and its files then written at once
(:func:`write_data`); a larger one is written by Zarr's file store directly."""


def write_data(ds, path: Path) -> None:
    """Write a run's dataset as Zarr format 2 with consolidated metadata at ``path`` (readable by every zarr and
    xarray release, without warnings), every chunk written, those of fill values too: a missing chunk is then damage
    (:func:`read_data`).

    Up to :data:`IN_MEMORY_BYTES` the dataset is encoded into a ``zarr.storage.MemoryStore`` over a dict of this
    function's and its entries written as files: the same files, byte for byte, as Zarr's file store writes, without
    the file store's hand-over of each of a run's many small files to a thread of its own."""
    options = {"mode": "w", "consolidated": True, "zarr_format": 2, "write_empty_chunks": True}
    if ds.nbytes > IN_MEMORY_BYTES:
        ds.to_zarr(path, **options)
        return
    import zarr

    entries: dict = {}
    ds.to_zarr(zarr.storage.MemoryStore(store_dict=entries), **options)
    path.mkdir(parents=True, exist_ok=True)
    for key, buffer in entries.items():
        target = path / key
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(buffer.to_bytes())


def finished_run(preset: Preset, config: ExperimentConfig, seed: int, *, results_root: Path = Path("results")
                 ) -> RunResult | None:
    """The finished run of ``preset`` with ``config`` and ``seed`` under ``results_root`` (the run
    :func:`run_preset` would reuse), or None: what a sweep or a reproduction finds done before it starts workers."""
    run_dir, digest = _location(preset, config, seed, None, results_root)
    return RunResult(run_dir, read_summary(run_dir) or {}, reused=True) if _finished_with_hash(run_dir, digest) else None


def _location(preset: Preset, config: ExperimentConfig, seed: int, out_dir: Path | None, results_root: Path
              ) -> tuple[Path, str]:
    """A run's directory (``out_dir``, else its default under ``results_root``) and its config hash."""
    digest = config_hash(preset.name, config, seed, implementations(preset, config))
    return (Path(out_dir) if out_dir is not None else default_run_dir(results_root, preset.name, digest)), digest


def run_preset(preset: Preset, config: ExperimentConfig, seed: int, *, quick: bool, out_dir: Path | None = None,
               results_root: Path = Path("results"), force: bool = False, progress=None, figures: bool = True,
               wait: bool = False) -> RunResult:
    """Run ``preset`` with ``config`` and ``seed`` into its run directory, or reuse a finished identical run.
    ``figures=False`` skips the figures (a reused run keeps whatever it has): in a large sweep of small presets,
    drawing and saving each task's figures with matplotlib can take longer than the run itself.

    The run directory's lock (:func:`attnlab.app.ownership.writer_lock`) is held from the check of the target to the
    commit: a second writer is refused in one line, or with ``wait`` waits and then reuses or replaces as if it had
    come second. A run whose checks or metrics are not finite is not written
    (:class:`~attnlab.errors.NonFiniteResultError`); an ``OSError`` while writing (disk full, a file system gone
    read-only) raises one line, and a result that was complete is kept in a directory that line names."""
    run_dir, digest = _location(preset, config, seed, out_dir, results_root)
    if not force and _finished_with_hash(run_dir, digest):
        return RunResult(run_dir, read_summary(run_dir) or {}, reused=True)
    preflight(preset, config, seed, run_dir, force, digest)
    with ownership.writer_lock(run_dir, wait=wait):
        if not force and _finished_with_hash(run_dir, digest):  # finished by the writer we waited for
            return RunResult(run_dir, read_summary(run_dir) or {}, reused=True)
        check_output_dir(run_dir, force, digest)
        with runtime.xarray_without_dask():  # the run and the writing of its dataset: NumPy arrays only
            return _run_locked(preset, config, seed, quick, run_dir, digest, force, progress, figures)


def _run_locked(preset, config, seed, quick, run_dir, digest, force, progress, figures) -> RunResult:
    tmp, created = _prepare(run_dir, force)
    try:
        try:
            outcome = execute(preset, config, seed, progress)
        except ValueError as e:
            # a summary that builds a Check from non-finite results fails in Check.__post_init__ ("check NAME: the
            # tolerance must be finite and positive (got nan)"): the same verdict as a non-finite check below
            text = " ".join(str(e).split())
            if text.startswith("check ") and "must be finite" in text:
                raise NonFiniteResultError(f"{preset.name}: the results are not finite ({text.split(';')[0]}); "
                                           "nothing was written") from None
            raise
        ds, metrics, checks, elapsed = outcome.data, outcome.metrics, outcome.checks, outcome.elapsed_s
        bad = _non_finite_check(checks)
        if bad is not None:
            name = " ".join(str(bad.name).split())
            what = (getattr(bad, "reason", "") or f"theory {float(bad.theory):.6g}, simulation "
                                                  f"{float(bad.simulation):.6g}")
            raise NonFiniteResultError(f"{preset.name}: the results are not finite (check {name!r}: {what}); "
                                       "nothing was written")
        bad_metric = _non_finite_metric(metrics)
        if bad_metric is not None:
            raise NonFiniteResultError(f"{preset.name}: the results are not finite (metric {bad_metric[0]!r} is "
                                       f"{bad_metric[1]!r}); nothing was written")
        try:
            write_data(ds, tmp / "data.zarr")
            written = []
            for name, fig in (preset.plot(ds, config) if figures else {}).items():
                written += save_figure(fig, tmp, f"{preset.name}-{name}")
            if figures and preset.animate is not None:
                gif = f"{preset.name}-evolution.gif"
                preset.animate(ds, tmp / gif)
                if (tmp / gif).is_file():
                    written.append(gif)
            record = {"preset": preset.name, "paper": preset.paper, "figure": preset.figure, "quick": quick,
                      "seed": seed, "config_hash": digest, "config": config.model_dump(mode="json"),
                      "implementations": outcome.implementations, **provenance()}
            (tmp / "config.json").write_text(json.dumps(json_safe(record), indent=2, allow_nan=False))
            summary = {"preset": preset.name, "quick": quick, "seed": seed, "elapsed_s": elapsed,
                       "finding": outcome.finding, "metrics": json_safe(metrics),
                       "checks": [c.as_dict() for c in checks], "figures": written, "config_hash": digest,
                       "implementations": outcome.implementations}
            (tmp / "summary.json").write_text(json.dumps(summary, indent=2, allow_nan=False))
        except OSError as err:
            raise AttnlabError(f"{preset.name}: cannot write the run to {run_dir}: {err.strerror or err}; "
                               "nothing was written") from None
        interrupt.check()  # a Ctrl-C swallowed by a __del__ somewhere still stops the commit
        try:
            ownership.commit_into(tmp, run_dir)
        except OSError as err:
            kept = _keep_unsaved(tmp, run_dir)
            where = f"the finished result is kept in {kept}" if kept is not None else "the result could not be kept"
            raise AttnlabError(f"{preset.name}: cannot write the run to {run_dir}: {err.strerror or err}; {where}") \
                from None
    except BaseException:
        if tmp.exists():  # not kept by _keep_unsaved
            shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)
        raise
    return RunResult(run_dir, summary, reused=False)
