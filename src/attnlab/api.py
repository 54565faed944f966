"""The Python entry points: :func:`run` a preset and get its dataset, metrics, checks and figures back;
:func:`presets` lists the catalogue.

A run computes inside :func:`attnlab.runtime.x64` (float64, scoped: the caller's JAX setting is left as it was),
after :func:`attnlab.runtime.configure` (attnlab's XLA flags, effective if JAX has not started yet, and the
persistent compilation cache), as the command line does. With ``out`` it is written as a run directory by
:mod:`attnlab.app.store`, exactly as ``attnlab run --out`` writes it; without, nothing touches the disk.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnlab import preload, registry, runtime
from attnlab.config import ExperimentConfig
from attnlab.errors import AttnlabError

__all__ = ["Run", "run", "presets", "execute", "implementations", "finding", "json_safe"]


def implementations(preset: registry.Preset, config: ExperimentConfig) -> dict[str, str]:
    """For each job of ``preset`` that has two implementations (a C kernel and a JAX path), the one that runs with
    ``config`` on this machine (``"native"`` or ``"jax"``): ``config.implementation`` with ``auto`` resolved. Empty
    for presets with one implementation per job."""
    choose = getattr(preset, "implementations", None)
    return dict(choose(config)) if choose is not None else {}


@dataclass(frozen=True)
class Outcome:
    """What one preset run computed: the dataset, its metrics and checks, the implementation of each kernel, the
    wall time of run + summary."""

    data: Any
    metrics: dict[str, Any]
    checks: list[registry.Check]
    implementations: dict[str, str]
    elapsed_s: float
    finding: str = ""


def finding(preset: registry.Preset, metrics: dict[str, Any], config: ExperimentConfig) -> str:
    """The preset's one-line finding for ``metrics`` ("" when the preset states none)."""
    return str(preset.finding(metrics, config)) if preset.finding is not None else ""


def execute(preset: registry.Preset, config: ExperimentConfig, seed: int, progress=None) -> Outcome:
    """Run ``preset`` with ``config`` from ``jax.random.key(seed)`` inside :func:`attnlab.runtime.x64`, and
    summarise it. Writes nothing. A preset whose prerequisite is unmet (:func:`attnlab.registry.unmet`) raises a
    one-line :class:`~attnlab.errors.AttnlabError`."""
    from attnlab import _random
    from attnlab.errors import AttnlabError

    reason = registry.unmet(preset, config)
    if reason is not None:
        raise AttnlabError(f"{preset.name}: {reason}")
    runtime.release_compiled_programs()  # a process may run many presets (Dask workers, notebooks)
    impl = implementations(preset, config)
    with runtime.x64(), runtime.xarray_without_dask(), preload.ahead(preset.name, config.model_dump_json()):
        t0 = time.perf_counter()
        ds = preset.run(config, _random.key(seed), progress)
        metrics, checks = preset.summarize(ds, config)
        elapsed = time.perf_counter() - t0
    ds.attrs.update(preset=preset.name, paper=preset.paper, citation=preset.citation, figure=preset.figure,
                    seed=int(seed), config=json_safe(config.model_dump(mode="json")), implementations=impl)
    return Outcome(ds, metrics, list(checks), impl, elapsed, finding(preset, metrics, config))


@dataclass
class Run:
    """One run of a preset: ``data`` (xarray.Dataset), ``metrics``, ``checks`` (:class:`~attnlab.registry.Check`),
    ``implementations`` (kernel -> ``native``/``jax``), ``finding`` (one line of words), ``figures`` (name ->
    matplotlib Figure, drawn on first access) and ``run_dir`` (the run directory, None when nothing was written)."""

    preset: registry.Preset
    config: ExperimentConfig
    seed: int
    quick: bool
    data: Any
    metrics: dict[str, Any]
    checks: list[Any]
    implementations: dict[str, str]
    elapsed_s: float
    finding: str = ""
    run_dir: Path | None = None
    _figures: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def figures(self) -> dict[str, Any]:
        if self._figures is None:
            self._figures = self.preset.plot(self.data, self.config)
        return self._figures

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return all(c.passed for c in self.checks)


def run(preset: str, *, quick: bool = False, seed: int = 0, out: str | Path | None = None, force: bool = False,
        **overrides: Any) -> Run:
    """Run the preset named ``preset`` (see :func:`presets`) and return its :class:`Run`.

    ``quick`` uses the preset's quick sizes, ``seed`` the root key ``jax.random.key(seed)``; any other keyword
    overrides a config field (``attnlab.run("marion-sgd", quick=True, n_repeats=4)``). With ``out``, the run is
    also written to that directory (``config.json``, ``data.zarr``, ``summary.json``, figures), or a finished
    identical run there is reused; ``force`` replaces a finished run of another config there (the files attnlab
    wrote; any other file is kept).

    The arguments are validated as the command line validates them (one-line
    :class:`~attnlab.errors.AttnlabError`: an unknown preset or key, a value out of range, a seed
    outside ``0..2**63-1``). The process is left as it was: the settings the run needs (XLA flags, equinox's error
    mode, JAX's compilation cache) hold only during the call (:func:`attnlab.runtime.configured`).
    """
    from attnlab.config import check_seed

    if not isinstance(preset, str):
        raise AttnlabError(f"invalid preset {preset!r}: a preset name is a string (see attnlab.presets())")
    for name, value in (("quick", quick), ("force", force)):
        if not isinstance(value, bool):
            raise AttnlabError(f"invalid {name} {value!r}: must be True or False")
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise AttnlabError(f"invalid out {out!r}: must be a path (str or os.PathLike) or None")
    seed = check_seed(seed)
    with runtime.configured():  # before the preset's modules import equinox (EQX_ON_ERROR); undone on return
        return _run(preset, quick, seed, out, force, overrides)


def _run(preset: str, quick: bool, seed: int, out, force: bool, overrides: dict[str, Any]) -> Run:
    p = registry.get_preset(preset)
    config = registry.resolve_config(p, quick=quick, overrides=overrides)
    if out is None:
        outcome = execute(p, config, seed)
        return Run(p, config, seed, quick, outcome.data, outcome.metrics, outcome.checks, outcome.implementations,
                   outcome.elapsed_s, outcome.finding)
    from attnlab.app import store

    res = store.run_preset(p, config, seed, quick=quick, out_dir=Path(out), force=force)
    s = res.summary
    checks = [registry.Check.from_dict(c) for c in s.get("checks", [])]
    return Run(p, config, seed, quick, store.read_data(res.run_dir), s.get("metrics", {}), checks,
               s.get("implementations", {}), s.get("elapsed_s", float("nan")), s.get("finding", ""), res.run_dir)


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None and NumPy scalars by Python numbers (strict JSON)."""
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def presets() -> dict[str, registry.Preset]:
    """Every preset of every paper, by name (``attnlab list`` prints the same catalogue)."""
    return registry.all_presets()
