"""Each preset's quick run, computed once per test session and shared by every test and test worker that reads it.

The conformance test, the papers' preset tests and the example notebooks all need the same quick runs; computing
each once (and compiling its programs once) is most of the suite's time. :func:`quick_run` stores a run with
:func:`attnlab.app.store.run_preset` (no figures) under a directory shared by the pytest-xdist workers of the session,
behind an exclusive file lock per preset: the first test to ask runs it, the others wait for it and read the
finished run directory. Only the plain quick config (seed 0, no overrides but a preset's required local input) is
shared; a test that needs other settings runs them itself.
"""

from __future__ import annotations

import fcntl
from pathlib import Path

from attnlab import runtime
from attnlab.api import Run
from attnlab.app import store
from attnlab.registry import Check, all_presets, resolve_config


def shared_root(tmp_path_factory) -> Path:
    """The session's directory shared by all xdist workers (the parent of each worker's base temp directory)."""
    base = Path(tmp_path_factory.getbasetemp())
    root = (base.parent if base.name.startswith("popen-gw") else base) / "quick-runs"
    root.mkdir(parents=True, exist_ok=True)
    return root


def quick_run(name: str, root: Path, overrides: dict | None = None) -> Run:
    """The quick run of preset ``name`` at seed 0 (computed by the first caller of the session, then read); with
    ``overrides`` (a preset that needs a local input, such as a model directory) every caller must pass the same."""
    preset = all_presets()[name]
    config = resolve_config(preset, quick=True, overrides=overrides or {})
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            res = store.run_preset(preset, config, 0, quick=True, out_dir=root / name, figures=False)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    s = res.summary
    with runtime.x64():
        data = store.read_data(res.run_dir)
    return Run(preset, config, 0, True, data, s["metrics"], [Check.from_dict(c) for c in s["checks"]],
               s["implementations"], s["elapsed_s"], s["finding"], res.run_dir)
