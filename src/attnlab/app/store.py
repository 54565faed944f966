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
import platform
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import jax

from attnlab.api import execute, implementations, json_safe
from attnlab.app import interrupt
from attnlab.config import ExperimentConfig, config_hash
from attnlab.errors import AttnlabError, NonFiniteResultError
from attnlab.plot import save_figure
from attnlab.registry import Preset

__all__ = ["RunResult", "default_run_dir", "run_preset", "read_summary", "read_data", "provenance", "devices", "preflight",
           "is_finished_run", "check_output_dir", "machine", "read_config", "MAX_SEED"]

MAX_SEED = 2**63 - 1
"""The largest root seed: ``jax.random.key`` takes a signed 64-bit integer."""

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
    import os

    cores = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = cores
    return {"platform": platform.platform(), "cpu": _cpu_model(), "cores": cores,
            **({"usable_cores": usable} if usable != cores else {})}


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
    """The dataset of a finished run, loaded into memory (``data.zarr``)."""
    import xarray as xr

    with xr.open_zarr(Path(run_dir) / "data.zarr") as ds:
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
    """Whether ``run_dir`` is a finished run of attnlab: ``config.json`` with a ``config_hash``, and ``summary.json``."""
    run_dir = Path(run_dir)
    cfg = read_config(run_dir) if run_dir.is_dir() else None
    return cfg is not None and isinstance(cfg.get("config_hash"), str) and (run_dir / "summary.json").is_file()


def _finished_with_hash(run_dir: Path, digest: str) -> bool:
    cfg = read_config(run_dir)
    return cfg is not None and cfg.get("config_hash") == digest and (run_dir / "summary.json").is_file()


def _is_empty_dir(path: Path) -> bool:
    try:
        return path.is_dir() and not any(path.iterdir())
    except OSError:
        return False


def check_output_dir(run_dir: Path, force: bool = False, digest: str | None = None) -> None:
    """Raise :class:`AttnlabError` (one line) unless a run may be written at ``run_dir``: a path that names a new
    directory (not the current directory nor one of its parents), where nothing but an empty directory or a finished
    run of attnlab stands (a finished run of another config only with ``force``). Writes nothing."""
    run_dir = Path(run_dir)
    try:
        resolved = run_dir.resolve()
        cwd = Path.cwd().resolve()
    except (OSError, RuntimeError) as e:
        raise AttnlabError(f"cannot use output directory {str(run_dir)!r}: {e}") from None
    if str(run_dir) in ("", ".", "..") or resolved == cwd or resolved in cwd.parents or not resolved.name:
        raise AttnlabError(f"output directory {str(run_dir)!r} is the current directory or one of its parents: "
                           "name a new directory for the run")
    if run_dir.exists() and not run_dir.is_dir():
        raise AttnlabError(f"output path exists and is not a directory: {run_dir}")
    for parent in run_dir.parents:
        if parent.exists() and not parent.is_dir():
            raise AttnlabError(f"cannot write to output directory {run_dir}: {parent} is not a directory")
    if not run_dir.is_dir() or _is_empty_dir(run_dir):
        return
    if not is_finished_run(run_dir):
        raise AttnlabError(f"output directory {run_dir} is not empty and is not a finished attnlab run: "
                           "it is left untouched; choose another --out")
    if digest is not None and not force and not _finished_with_hash(run_dir, digest):
        raise AttnlabError(f"{run_dir} holds a finished run of a different config (use --force to replace it)")


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
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise AttnlabError(f"invalid seed {seed!r}: must be an integer in 0..{MAX_SEED}")
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
    """Check the target and create the temporary sibling directory; raise AttnlabError if not writable. Returns the
    temporary directory and the parent directories created for it (removed again if the run fails)."""
    check_output_dir(run_dir, force)
    parent = run_dir.parent
    created = [p for p in [parent, *parent.parents] if not p.exists()]
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = parent / f".{run_dir.name}.tmp-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
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


def run_preset(preset: Preset, config: ExperimentConfig, seed: int, *, quick: bool, out_dir: Path | None = None,
               results_root: Path = Path("results"), force: bool = False, progress=None, figures: bool = True) -> RunResult:
    """Run ``preset`` with ``config`` and ``seed`` into its run directory, or reuse a finished identical run.
    ``figures=False`` skips the figures (a reused run keeps whatever it has): in a large sweep of small presets,
    drawing and saving each task's figures with matplotlib can take longer than the run itself."""
    impl = implementations(preset, config)
    digest = config_hash(preset.name, config, seed, impl)
    run_dir = Path(out_dir) if out_dir is not None else default_run_dir(results_root, preset.name, digest)
    if not force and _finished_with_hash(run_dir, digest):
        return RunResult(run_dir, read_summary(run_dir) or {}, reused=True)
    preflight(preset, config, seed, run_dir, force, digest)
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
        # Zarr format 2 with consolidated metadata: readable by every zarr and xarray release, opens without warnings.
        ds.to_zarr(tmp / "data.zarr", mode="w", consolidated=True, zarr_format=2)
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
        interrupt.check()  # a Ctrl-C swallowed by a __del__ somewhere still stops the commit
        if run_dir.exists():
            check_output_dir(run_dir, force=True)  # still empty or a finished run: never the user's files
            trash = run_dir.parent / f".{run_dir.name}.old-{uuid.uuid4().hex[:8]}"
            run_dir.rename(trash)
            tmp.rename(run_dir)
            shutil.rmtree(trash, ignore_errors=True)
        else:
            tmp.rename(run_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_empty(created)
        raise
    return RunResult(run_dir, summary, reused=False)
