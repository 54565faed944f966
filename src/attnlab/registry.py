"""The preset catalogue: every experiment of every paper, as data (a validated config) plus pure functions.

A :class:`Preset` holds a config class with per-preset defaults and quick-size overrides, and three functions:

* ``run(config, key, progress) -> xarray.Dataset`` (the simulation and the theory, with named dims and units);
* ``summarize(dataset, config) -> (metrics, checks)`` (reads only the dataset);
* ``plot(dataset, config) -> {name: matplotlib Figure}`` (reads only the dataset);
* optionally ``animate(dataset, path)``, which writes an animated GIF of the run to ``path``;
* optionally ``implementations(config)``, the implementation (C kernel or JAX) each of its jobs runs.

Each paper's folder has a ``presets`` module that registers its presets with :func:`register` when imported;
:func:`all_presets` imports those of :data:`PAPERS`. :func:`resolve_config` is the one place where a preset's
defaults, its quick sizes and the user's overrides are merged: the CLI, the sweeps, :func:`attnlab.run` and the
tests all build their configs through it.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attnlab.config import ExperimentConfig, validate_config
from attnlab.errors import AttnlabError

__all__ = ["PAPERS", "Check", "Preset", "register", "get_preset", "all_presets", "resolve_config"]

PAPERS: tuple[str, ...] = ("marion", "dohmatob", "duranthon", "sakai", "bruno")
"""The paper folders, in the order of the catalogue; preset names start with their paper (``marion-manifold``)."""


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
    """One experiment: its paper, the paper's figure, a config class with defaults and quick sizes, and the pure
    functions that run it, summarise its dataset into metrics and checks, and draw its figures."""

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
    implementations: Callable | None = None
    """``implementations(config) -> {job: "native" | "jax"}`` for presets with a C kernel and a JAX path per job:
    the implementation each job runs with ``config`` on this machine (``config.implementation``, ``auto`` resolved);
    recorded in ``config.json`` and ``summary.json`` and part of the run's hash."""


_REGISTRY: dict[str, Preset] = {}


def register(preset: Preset) -> Preset:
    """Add ``preset`` to the catalogue (a name can be registered once)."""
    if preset.name in _REGISTRY:
        raise ValueError(f"preset {preset.name!r} registered twice")
    _REGISTRY[preset.name] = preset
    return preset


def _load(paper: str) -> None:
    importlib.import_module(f"attnlab.{paper}.presets")


def all_presets() -> dict[str, Preset]:
    """Every registered preset, by name, papers in the order of :data:`PAPERS`."""
    for paper in PAPERS:
        _load(paper)
    return dict(_REGISTRY)


def get_preset(name: str) -> Preset:
    """The preset ``name``. Only its paper's ``presets`` module is imported (a Dask worker or an ``attnlab run``
    process then skips importing the other papers' dependencies)."""
    paper = name.split("-", 1)[0]
    if name not in _REGISTRY and paper in PAPERS:
        _load(paper)
    if name in _REGISTRY:
        return _REGISTRY[name]
    if name not in all_presets():
        raise AttnlabError(f"unknown preset {name!r} (run 'attnlab list' to see them)")
    return _REGISTRY[name]


def resolve_config(preset: str | Preset, *, quick: bool = False,
                   overrides: Mapping[str, Any] | None = None) -> ExperimentConfig:
    """The validated config of ``preset``: its config class's defaults, then the preset's ``defaults``, then (with
    ``quick``) its quick sizes, then ``overrides``. Unknown keys and invalid values raise one-line
    :class:`~attnlab.errors.AttnlabError`."""
    p = get_preset(preset) if isinstance(preset, str) else preset
    base = {**p.defaults, **(p.quick if quick else {})}
    return validate_config(p.config_cls, base, dict(overrides or {}))
