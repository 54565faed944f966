"""The preset registry: every experiment of every paper, as data (a validated config) plus pure functions.

A :class:`Preset` holds a config class with per-preset defaults and quick-size overrides, and three functions:

* ``run(config, key, progress) -> xarray.Dataset`` (the simulation and the theory, with named dims and units);
* ``summarize(dataset, config) -> (metrics, checks)`` (reads only the dataset);
* ``plot(dataset, config) -> {name: matplotlib Figure}`` (reads only the dataset).

Paper modules register their presets by calling :func:`register` at import time; :func:`all_presets` imports them.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from attnlab.errors import AttnlabError

__all__ = ["Check", "Preset", "register", "get_preset", "all_presets", "PAPER_MODULES"]

PAPER_MODULES = ("marion",)


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


_REGISTRY: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    if preset.name in _REGISTRY:
        raise ValueError(f"preset {preset.name!r} registered twice")
    _REGISTRY[preset.name] = preset
    return preset


def all_presets() -> dict[str, Preset]:
    for module in PAPER_MODULES:
        importlib.import_module(f"attnlab.presets.{module}")
    return dict(_REGISTRY)


def get_preset(name: str) -> Preset:
    presets = all_presets()
    if name not in presets:
        raise AttnlabError(f"unknown preset {name!r} (run 'attnlab list' to see them)")
    return presets[name]
