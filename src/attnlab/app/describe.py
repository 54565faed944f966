"""What the reference commands read: a preset's config fields (``attnlab show``), the finished runs under a folder
(``attnlab runs``) and a finished run's figures, redrawn from its files (``attnlab plot``)."""

from __future__ import annotations

import json
import math
import os
import typing
import uuid
from dataclasses import dataclass
from pathlib import Path

from attnlab.errors import AttnlabError

__all__ = ["FieldInfo", "config_fields", "type_text", "RunRow", "find_runs", "check_counts", "load_run_config",
           "redraw"]


# --- attnlab show ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FieldInfo:
    name: str
    type: str
    default: str
    quick: str
    description: str


_BOUNDS = (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("multiple_of", "multiple of"),
           ("min_length", "min length"), ("max_length", "max length"))


def type_text(annotation, metadata=()) -> str:
    """A field's type in words: ``int >= 2``, ``'pgd' | 'sgd'``, ``tuple[float, ...]``, ``int | None``."""
    text = _type_name(annotation)
    bounds = []
    for m in metadata:
        for attr, sym in _BOUNDS:
            v = getattr(m, attr, None)
            if v is not None:
                bounds.append(f"{sym} {v:g}" if isinstance(v, float) else f"{sym} {v}")
    return " ".join([text, *bounds]) if bounds else text


def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        return " | ".join("None" if a is type(None) else _type_name(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def value_text(value) -> str:
    """A config value as ``--set`` takes it (tuples as JSON lists, booleans lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "inf" if value == math.inf else "-inf" if value == -math.inf else repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(json.dumps(v) if isinstance(v, str) else value_text(v) for v in value) + "]"
    if value is None:
        return "null"
    return str(value)


def config_fields(preset) -> list[FieldInfo]:
    """Every config field of ``preset``: its type, the preset's resolved default and quick value, its meaning."""
    from attnlab.registry import resolve_config

    full = resolve_config(preset)
    quick = resolve_config(preset, quick=True)
    rows = []
    for name, info in type(full).model_fields.items():
        rows.append(FieldInfo(name, type_text(info.annotation, info.metadata), value_text(getattr(full, name)),
                              value_text(getattr(quick, name)), " ".join((info.description or "").split())))
    return rows


# --- attnlab runs ----------------------------------------------------------------------------------------------

def check_counts(checks: list[dict]) -> dict[str, int]:
    """``passed``, ``failed``, ``not evaluated``, ``controls`` (checks with a negative control) and ``rejected``
    (controls the check rejected) of a run's checks as written in ``summary.json``."""
    counts = {"passed": 0, "failed": 0, "not evaluated": 0, "inconclusive": 0, "controls": 0, "rejected": 0}
    for c in checks:
        status = c.get("status") or ("passed" if c.get("passed") else "failed")
        counts[status if status in counts else "failed"] += 1
        if c.get("control_rejected") is not None:
            counts["controls"] += 1
            counts["rejected"] += bool(c["control_rejected"])
    return counts


@dataclass(frozen=True)
class RunRow:
    preset: str
    seed: str
    size: str
    checks: str
    time: str
    finding: str
    path: str
    not_evaluated: int
    all_passed: bool


def _elapsed(x) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return "?"
    if x < 60:
        return f"{x:.1f} s"
    if x < 3600:
        return f"{x / 60:.1f} min"
    return f"{x / 3600:.1f} h"


def _short(text: str, n: int = 60) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _damage(run_dir: Path) -> str | None:
    """Why the run directory ``run_dir`` (it has a ``config.json`` with a ``config_hash``) is damaged, or None."""
    from attnlab.app.store import read_summary

    if not (run_dir / "summary.json").exists():
        return None  # not finished: a run being written, or interrupted (hidden temporaries are skipped)
    s = read_summary(run_dir)
    if not isinstance(s, dict):
        return "summary.json is not a JSON object"
    if not isinstance(s.get("checks", []), list):
        return "summary.json has no list of checks"
    return None


def find_runs(folder: Path, damaged: list[tuple[str, str]] | None = None) -> list[RunRow]:
    """The finished runs under ``folder`` (recursively; the store's test: ``config.json`` with a ``config_hash``,
    and ``summary.json`` holding a JSON object), sorted by path. Hidden directories (temporaries) are skipped, and a
    run directory is not searched further. A run directory whose ``summary.json`` is damaged is not a finished run:
    ``(path, reason)`` is appended to ``damaged`` when given. Raises :class:`AttnlabError` when ``folder`` does not
    exist or is not a directory."""
    from attnlab.app.store import is_finished_run, read_config, read_summary

    folder = Path(folder)
    if not folder.exists():
        raise AttnlabError(f"no such folder: {folder}")
    if not folder.is_dir():
        raise AttnlabError(f"not a folder: {folder}")
    rows = []
    for here, dirs, _files in os.walk(folder, onerror=lambda e: None):
        here_path = Path(here)
        if not is_finished_run(here_path):
            cfg = read_config(here_path)
            why = _damage(here_path) if cfg is not None and isinstance(cfg.get("config_hash"), str) else None
            if why is not None:
                dirs[:] = []
                if damaged is not None:
                    damaged.append((str(here_path), why))
                continue
        else:
            dirs[:] = []
            s = read_summary(here_path)
            checks = [c for c in s.get("checks", []) if isinstance(c, dict)]
            n = check_counts(checks)
            evaluated = n["passed"] + n["failed"] + n["inconclusive"]
            text = f"{n['passed']}/{evaluated}" + (f" +{n['not evaluated']} n/e" if n["not evaluated"] else "")
            quick = s.get("quick")
            rows.append(RunRow(str(s.get("preset", "?")), str(s.get("seed", "?")),
                               "quick" if quick is True else "full" if quick is False else "?", text,
                               _elapsed(s.get("elapsed_s")), _short(s.get("finding", "")), str(here_path),
                               n["not evaluated"], n["passed"] == len(checks)))
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return sorted(rows, key=lambda r: r.path)


# --- attnlab plot ----------------------------------------------------------------------------------------------

def load_run_config(run_dir: Path):
    """``(preset, config, record)`` of a finished run: the config rebuilt with the preset's config class from the
    config recorded in ``config.json`` (a null, written for an infinite number, read back as +inf where the field
    allows infinity). Raises :class:`AttnlabError` (one line) when ``run_dir`` is not a finished run."""
    from attnlab.app.store import is_finished_run
    from attnlab.config import _allows_inf, validate_config
    from attnlab.registry import get_preset

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise AttnlabError(f"no such run directory: {run_dir}")
    if not is_finished_run(run_dir):
        raise AttnlabError(f"{run_dir} is not a finished attnlab run (no config.json with a config_hash and "
                           "summary.json)")
    record = json.loads((run_dir / "config.json").read_text())
    if not isinstance(record.get("preset"), str) or not isinstance(record.get("config"), dict):
        raise AttnlabError(f"{run_dir / 'config.json'} names no preset or config")
    preset = get_preset(record["preset"])
    values = dict(record["config"])
    for name, info in preset.config_cls.model_fields.items():
        if values.get(name, 0) is None and "None" not in type_text(info.annotation) and _allows_inf(info):
            values[name] = math.inf
    try:
        config = validate_config(preset.config_cls, {}, values)
    except AttnlabError as e:
        raise AttnlabError(f"{run_dir}: the recorded config does not fit preset {preset.name} any more: {e}") from None
    return preset, config, record


def _replace_atomically(run_dir: Path, name: str, write) -> bool:
    """Call ``write(tmp_path)`` for a temporary file in ``run_dir`` and rename it to ``name`` (False when ``write``
    wrote nothing). The temporary file is removed whatever happens."""
    suffix = Path(name).suffix
    tmp = run_dir / f".{Path(name).stem}.tmp-{uuid.uuid4().hex[:8]}{suffix}"
    try:
        write(tmp)
        if not tmp.is_file():
            return False
        os.replace(tmp, run_dir / name)
        return True
    except OSError as e:
        raise AttnlabError(f"cannot write {run_dir / name}: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)


def redraw(run_dir: Path, *, animation: bool = True) -> list[str]:
    """Redraw the figures of the finished run in ``run_dir`` from its ``data.zarr`` and ``config.json``, without
    rerunning: each PNG and PDF (and the GIF of a preset with an animation, unless ``animation=False``) is written
    to a temporary file in the run directory and renamed into place; nothing else is touched. Returns the file
    names written."""
    import matplotlib.pyplot as plt

    from attnlab.app.store import read_data
    from attnlab.plot import render_figure

    run_dir = Path(run_dir)
    preset, config, _ = load_run_config(run_dir)
    try:
        ds = read_data(run_dir)
    except Exception as e:  # a missing or damaged data.zarr
        raise AttnlabError(f"cannot read {run_dir / 'data.zarr'}: {' '.join(str(e).split()) or type(e).__name__}") \
            from None
    if not os.access(run_dir, os.W_OK):
        raise AttnlabError(f"cannot write to run directory {run_dir}: permission denied")
    written = []
    try:
        figures = preset.plot(ds, config)
    except Exception as e:  # data that do not fit the preset's figures: a damaged or edited data.zarr
        raise AttnlabError(f"cannot draw the figures of {run_dir}: its data.zarr does not hold what "
                           f"{preset.name} draws ({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    try:
        for key, fig in figures.items():
            for ext, data in render_figure(fig).items():  # the files the run wrote, drawn the same way
                name = f"{preset.name}-{key}.{ext}"
                _replace_atomically(run_dir, name, lambda path, data=data: path.write_bytes(data))
                written.append(name)
    finally:
        for fig in figures.values():
            plt.close(fig)
    if animation and preset.animate is not None:
        gif = f"{preset.name}-evolution.gif"
        if _replace_atomically(run_dir, gif, lambda path: preset.animate(ds, path)):
            written.append(gif)
    return written
