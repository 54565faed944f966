"""The preset registry: every experiment of every paper, as data (a validated config) plus pure functions.

A :class:`Preset` holds a config class with per-preset defaults and quick-size overrides, and three functions:

* ``run(config, key, progress) -> xarray.Dataset`` (the simulation and the theory, with named dims and units);
* ``summarize(dataset, config) -> (metrics, checks)`` (reads only the dataset);
* ``plot(dataset, config) -> {name: matplotlib Figure}`` (reads only the dataset);
* optionally ``animate(dataset, path)``, which writes an animated GIF of the run to ``path``.

Paper modules (one file per paper in this package) register their presets by calling :func:`register` at import
time; :func:`all_presets` discovers and imports every module of the package, so a new paper needs no edit here.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnlab.errors import AttnlabError

__all__ = ["Check", "Preset", "register", "get_preset", "all_presets", "paper_modules"]


def paper_modules() -> list[str]:
    """Names of the paper modules of this package, in a fixed (alphabetical) order."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


@dataclass(frozen=True)
class Check:
    """A theoretical prediction against its simulated counterpart; passes when ``|theory - simulation| <= tolerance``.

    The tolerance comes from a standard error (say 5 SE) or from a stated numerical bound, never from tuning.
    """

    name: str
    theory: float
    simulation: float
    tolerance: float
    basis: str = ""

    @property
    def abs_error(self) -> float:
        return abs(float(self.theory) - float(self.simulation))

    @property
    def passed(self) -> bool:
        return bool(math.isfinite(self.abs_error) and self.abs_error <= self.tolerance)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "theory": float(self.theory),
            "simulation": float(self.simulation),
            "abs_error": self.abs_error,
            "tolerance": float(self.tolerance),
            "passed": self.passed,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class Preset:
    name: str
    paper: str
    citation: str
    figure: str
    description: str
    config_cls: type
    run: Callable
    summarize: Callable
    plot: Callable
    defaults: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
    animate: Callable | None = None


_REGISTRY: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    if preset.name in _REGISTRY:
        raise ValueError(f"preset {preset.name!r} registered twice")
    _REGISTRY[preset.name] = preset
    return preset


def all_presets() -> dict[str, Preset]:
    for module in paper_modules():
        importlib.import_module(f"attnlab.presets.{module}")
    return dict(_REGISTRY)


def get_preset(name: str) -> Preset:
    """The preset ``name``. Names start with their paper module (``marion-manifold`` lives in
    ``attnlab.presets.marion``), so only that module is imported when it registers the name: a Dask worker or a
    ``attnlab run`` process then skips importing the other papers' dependencies (about 1.3 s here)."""
    module = name.split("-", 1)[0]
    if name not in _REGISTRY and module in paper_modules():
        importlib.import_module(f"attnlab.presets.{module}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    presets = all_presets()
    if name not in presets:
        raise AttnlabError(f"unknown preset {name!r} (run 'attnlab list' to see them)")
    return presets[name]
