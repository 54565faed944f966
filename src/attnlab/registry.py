"""The preset catalogue: every experiment of every paper, as data (a validated config) plus pure functions.

A :class:`Preset` holds a config class with per-preset defaults and quick-size overrides, and three functions:

* ``run(config, key, progress) -> xarray.Dataset`` (the simulation and the theory, with named dims and units);
* ``summarize(dataset, config) -> (metrics, checks)`` (reads only the dataset): metrics are finite numbers, or None
  where one does not apply to the config (a standard error of a single repeat); a NaN or infinite metric fails the
  run;
* ``plot(dataset, config) -> {name: matplotlib Figure}`` (reads only the dataset);
* optionally ``animate(dataset, path)``, which writes an animated GIF of the run to ``path``;
* optionally ``finding(metrics, config)``, the run's result in one line of words;
* optionally ``implementations(config)``, the implementation (C kernel or JAX) each of its jobs runs;
* optionally ``prerequisite(config)``, why it cannot run here (a missing local input or optional extra);
* optionally ``memory(config)``, an upper bound of the bytes a run takes (else the paper's ``memory`` module's).

Each paper's folder has a ``presets`` module that registers its presets with :func:`register` when imported, and
is declared as an entry point of the group :data:`ENTRY_POINT_GROUP` (``attnlab.presets``) in attnlab's
``pyproject.toml``; a plugin's distribution declares its own the same way (:mod:`attnlab.extend`).
:func:`all_presets` loads every entry point of the group. :func:`resolve_config` is the one place where a preset's
defaults, its quick sizes and the user's overrides are merged: the CLI, the sweeps, :func:`attnlab.run` and the
tests all build their configs through it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnlab.config import ExperimentConfig, validate_config
from attnlab.errors import AttnlabError

__all__ = ["PAPERS", "ENTRY_POINT_GROUP", "Check", "mean_se", "Preset", "register", "contract_problems", "get_preset",
           "all_presets", "resolve_config", "unmet", "deferred"]

PAPERS: tuple[str, ...] = ("marion", "dohmatob", "duranthon", "sakai", "bruno")
"""The paper folders, in the order of the catalogue; preset names start with their paper (``marion-manifold``)."""


def _finite(x) -> float | None:
    """``x`` as a float, or None where it is not finite (JSON has no NaN)."""
    x = float(x)
    return x if math.isfinite(x) else None


def mean_se(x) -> tuple[float, float]:
    """The mean of repeated measurements ``x`` (any shape, flattened) and its standard error ``std(ddof=1) /
    sqrt(size)`` (NaN for fewer than two): the usual basis of a check's tolerance."""
    x = np.asarray(x, dtype=float).reshape(-1)
    return float(np.mean(x)), (float(np.std(x, ddof=1) / math.sqrt(x.size)) if x.size > 1 else math.nan)


@dataclass(frozen=True)
class Check:
    """A theoretical prediction against its simulated counterpart, with its negative control.

    The check passes when ``|theory - simulation| <= tolerance``. The tolerance comes from a standard error (say 5 SE)
    or a stated numerical bound (``basis`` says which), never from tuning; it must be finite and positive. The
    **control** is the same check evaluated on a deliberately wrong counterpart (``control``: what it is, e.g.
    "tokens frozen at t = 0"; ``control_theory``/``control_simulation``: its two sides, by default this check's):
    a check has power only if its control fails. A check that cannot be evaluated (too few repeats, no point of the
    needed kind) is built with :meth:`not_evaluated` and never counts as passed.
    """

    name: str
    theory: float
    simulation: float
    tolerance: float
    basis: str = ""
    control: str = ""
    control_theory: float | None = None
    control_simulation: float | None = None
    reason: str = ""

    def __post_init__(self):
        if not self.reason and not (math.isfinite(float(self.tolerance)) and float(self.tolerance) > 0):
            raise ValueError(f"check {self.name!r}: the tolerance must be finite and positive (got {self.tolerance}); "
                             "use Check.not_evaluated(name, reason) when it cannot be derived")

    @classmethod
    def not_evaluated(cls, name: str, reason: str, *, theory: float = math.nan, basis: str = "") -> Check:
        """A check that could not be evaluated here, with the ``reason``; it never passes."""
        return cls(name, theory, math.nan, math.nan, basis, reason=reason)

    @classmethod
    def where_finite(cls, name: str, *, theory, simulation, tolerance, **kw) -> Check:
        """The check, or :meth:`not_evaluated` (saying which) where a side or the tolerance is not finite, or the
        tolerance is not positive (e.g. a standard error of zero over identical repeats)."""
        bad = [label for label, x in (("theory", theory), ("simulation", simulation), ("tolerance", tolerance))
               if not math.isfinite(float(x))]
        if bad:
            return cls.not_evaluated(name, f"non-finite {', '.join(bad)} (the run diverged or overflowed)",
                                     theory=float(theory), basis=kw.get("basis", ""))
        if not float(tolerance) > 0:
            return cls.not_evaluated(name, f"tolerance {float(tolerance):g} is not positive (zero standard error)",
                                     theory=float(theory), basis=kw.get("basis", ""))
        return cls(name, theory=float(theory), simulation=float(simulation), tolerance=float(tolerance), **kw)

    @property
    def evaluated(self) -> bool:
        return not self.reason

    @property
    def abs_error(self) -> float:
        return abs(float(self.theory) - float(self.simulation))

    @property
    def within_tolerance(self) -> bool:
        """Whether ``|theory - simulation| <= tolerance`` (an evaluated check; not yet a verdict: see :attr:`passed`)."""
        return bool(self.evaluated and math.isfinite(self.abs_error) and self.abs_error <= self.tolerance)

    @property
    def passed(self) -> bool:
        """Within tolerance, and the negative control (when one is given) rejected: a check that cannot tell the
        right counterpart from the wrong one has no power, and does not pass."""
        return self.within_tolerance and self.control_rejected is not False

    @property
    def status(self) -> str:
        """``"passed"``, ``"failed"``, ``"not evaluated"`` or ``"inconclusive"`` (within tolerance, but the negative
        control is within it too: :attr:`verdict` says so)."""
        if not self.evaluated:
            return "not evaluated"
        if self.within_tolerance and self.control_rejected is False:
            return "inconclusive"
        return "passed" if self.passed else "failed"

    @property
    def verdict(self) -> str:
        """The status with its reason, in words: ``"not evaluated: too few repeats"``, ``"inconclusive: the negative
        control (...) is within the tolerance too"``."""
        if self.status == "not evaluated":
            return f"not evaluated: {self.reason}"
        if self.status == "inconclusive":
            return (f"inconclusive: the negative control ({self.control}) is within the tolerance too "
                    f"(control error {self.control_error:.3g} <= {float(self.tolerance):.3g})")
        return self.status

    @property
    def control_error(self) -> float:
        """``|control_theory - control_simulation|`` (each side defaulting to this check's)."""
        theory = self.theory if self.control_theory is None else self.control_theory
        simulation = self.simulation if self.control_simulation is None else self.control_simulation
        return abs(float(theory) - float(simulation))

    @property
    def control_rejected(self) -> bool | None:
        """Whether the check rejects its wrong counterpart (None: no control given, or the check not evaluated)."""
        if not self.evaluated or not self.control or (self.control_theory is None and self.control_simulation is None):
            return None
        err = self.control_error
        return bool(not math.isfinite(err) or err > self.tolerance)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (non-finite numbers as null)."""
        return {
            "name": self.name,
            "theory": _finite(self.theory),
            "simulation": _finite(self.simulation),
            "abs_error": _finite(self.abs_error),
            "tolerance": _finite(self.tolerance),
            "passed": self.passed,
            "status": self.status,
            "reason": self.reason,
            "verdict": self.verdict,
            "basis": self.basis,
            "control": self.control,
            "control_theory": None if self.control_theory is None else _finite(self.control_theory),
            "control_simulation": None if self.control_simulation is None else _finite(self.control_simulation),
            "control_error": _finite(self.control_error) if self.control else None,
            "control_rejected": self.control_rejected,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Check:
        """The check written by :meth:`as_dict` (null read as NaN)."""
        num = lambda k: math.nan if d.get(k) is None else float(d[k])  # noqa: E731
        if d.get("reason"):
            return cls.not_evaluated(d["name"], d["reason"], theory=num("theory"), basis=d.get("basis", ""))
        return cls(d["name"], num("theory"), num("simulation"), num("tolerance"), d.get("basis", ""),
                   d.get("control", ""), None if d.get("control_theory") is None else float(d["control_theory"]),
                   None if d.get("control_simulation") is None else float(d["control_simulation"]))


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
    finding: Callable | None = None
    """``finding(metrics, config) -> str``: the run's result in one line of words (e.g. "27/30 runs reach the oracle,
    median |kappa| 0.983"), written to ``summary.json`` and printed by the report above the figures."""
    implementations: Callable | None = None
    """``implementations(config) -> {job: "native" | "jax"}`` for presets with a C kernel and a JAX path per job:
    the implementation each job runs with ``config`` on this machine (``config.implementation``, ``auto`` resolved);
    recorded in ``config.json`` and ``summary.json`` and part of the run's hash."""
    prerequisite: Callable | None = None
    """``prerequisite(config) -> str | None`` for presets that need what attnlab cannot provide (a local model
    directory given by a config field, an optional extra): why the preset cannot run with ``config`` here, in one
    line that says how to provide it, or None when it can. ``attnlab run`` and :func:`attnlab.run` refuse such a
    config with that line (exit status 2); ``attnlab reproduce`` reports the preset as skipped, not run, with it (no
    run, no checks counted)."""
    memory: Callable | None = None
    """``memory(config) -> float``: an upper bound of the bytes a run takes, used instead of the paper's ``memory``
    module (:mod:`attnlab.app.resources`)."""
    unused: frozenset[str] = frozenset()
    """Fields of ``config_cls`` that this preset does not read (a config class shared by several presets): setting
    one is refused by :func:`resolve_config` in one line, instead of giving a run that differs only by its hash."""


ENTRY_POINT_GROUP = "attnlab.presets"
"""The entry-point group through which installed distributions register presets: each entry point's name is a
paper's, its value a module that registers the paper's presets when imported (or a function returning them).
attnlab's own papers are declared in its ``pyproject.toml`` in this group."""

_REGISTRY: dict[str, Preset] = {}
_LOADED: set[str] = set()  # entry points already loaded (by "name=value")
_NAME = re.compile(r"[a-z][a-z0-9_]*(-[a-z0-9_.]+)+")


def contract_problems(preset: Preset) -> list[str]:
    """What keeps ``preset`` from being registered (empty when it follows the record's contract): a name
    ``paper-experiment`` that starts with its paper, a config class derived from :class:`ExperimentConfig` whose
    fields all have defaults, defaults, quick sizes and ``unused`` fields among its fields, and callables where
    functions are expected."""
    problems = []
    if not isinstance(preset, Preset):
        return [f"{preset!r} is not an attnlab.extend.Preset"]
    if not isinstance(preset.name, str) or not _NAME.fullmatch(preset.name):
        problems.append(f"name {preset.name!r} is not lower-case 'paper-experiment'")
    elif not isinstance(preset.paper, str) or preset.name.split("-", 1)[0] != preset.paper:
        problems.append(f"name {preset.name!r} does not start with its paper {preset.paper!r} and a '-'")
    for label in ("citation", "figure", "description"):
        if not isinstance(getattr(preset, label), str):
            problems.append(f"{label} is not a string")
    cls = preset.config_cls
    if not (isinstance(cls, type) and issubclass(cls, ExperimentConfig)):
        problems.append("config_cls is not a subclass of attnlab.extend.ExperimentConfig")
    else:
        fields = set(cls.model_fields)
        problems += [f"config field {n!r} has no default" for n, f in cls.model_fields.items() if f.is_required()]
        for label in ("defaults", "quick", "unused"):
            unknown = sorted(set(getattr(preset, label)) - fields)
            if unknown:
                problems.append(f"{label} name fields the config class does not have: {', '.join(unknown)}")
    for label in ("run", "summarize", "plot"):
        if not callable(getattr(preset, label)):
            problems.append(f"{label} is not callable")
    for label in ("animate", "finding", "implementations", "prerequisite", "memory"):
        value = getattr(preset, label)
        if value is not None and not callable(value):
            problems.append(f"{label} is neither None nor callable")
    return problems


def deferred(target: str) -> Callable:
    """The function ``target`` (``"package.module:name"``), imported at its first call: a preset's ``plot`` given
    as ``deferred("mypackage.figures:plot")`` keeps matplotlib, and whatever else its module imports, out of the
    processes that compute and check without drawing (``attnlab.run`` without ``out``, sweep workers, tests)."""
    import importlib

    module, _, name = target.partition(":")
    if not module or not name:
        raise ValueError(f"deferred target {target!r} is not 'package.module:name'")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__, call.__qualname__, call.__module__ = name, name, module
    call.__doc__ = f"``{target}``, imported at its first call (:func:`attnlab.registry.deferred`)."
    return call


def register(preset: Preset) -> Preset:
    """Add ``preset`` to the catalogue: a name can be registered once, and the record must follow the contract
    (:func:`contract_problems`); else ``ValueError``, one line."""
    problems = contract_problems(preset)
    if problems:
        raise ValueError(f"preset {getattr(preset, 'name', preset)!r} breaks the contract: {'; '.join(problems)}")
    if preset.name in _REGISTRY:
        raise ValueError(f"preset {preset.name!r} registered twice")
    _REGISTRY[preset.name] = preset
    return preset


def _entry_points(paper: str | None = None) -> list:
    return [ep for ep in _group() if paper is None or ep.name == paper]


@functools.cache
def _group() -> tuple:
    """The entry points of :data:`ENTRY_POINT_GROUP`, read once per process from the installed distributions."""
    from importlib import metadata

    found = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    if not any(_distribution(ep) == "attnlab" for ep in found):
        # attnlab run from a source tree that pip never installed (PYTHONPATH=src): its own papers have no metadata,
        # so they are declared here as pyproject.toml declares them
        found = [metadata.EntryPoint(p, f"attnlab.{p}.presets", ENTRY_POINT_GROUP) for p in PAPERS] + found
    seen, unique = set(), []
    for ep in found:  # a distribution seen twice on sys.path (an editable install beside a wheel) counts once
        if (ep.name, ep.value) not in seen:
            seen.add((ep.name, ep.value))
            unique.append(ep)
    order = {p: i for i, p in enumerate(PAPERS)}
    unique.sort(key=lambda ep: (order.get(ep.name, len(order)), ep.name))
    return tuple(unique)


def _distribution(ep) -> str:
    dist = getattr(ep, "dist", None)
    return (dist.metadata["Name"] or "?") if dist is not None else "attnlab"


WARNINGS: list[str] = []
"""The one-line warnings this process printed while loading entry points (a broken plugin): the catalogue cache of
``attnlab list`` and ``attnlab show`` (:mod:`attnlab.app.catalogue`) is not written when a load printed one, so that
the next call loads the plugin again and says so again."""


def _warn(text: str) -> None:
    import sys

    line = " ".join(text.split())
    WARNINGS.append(line)
    print(line, file=sys.stderr)


def _load_entry_point(ep) -> None:
    """Load one entry point of :data:`ENTRY_POINT_GROUP` once; a failure (import error, a preset breaking the
    contract or registered twice) costs one line on stderr naming the entry point and its distribution, and the
    presets registered before it stay."""
    key = f"{ep.name}={ep.value}"
    if key in _LOADED:
        return
    _LOADED.add(key)
    try:
        obj = ep.load()
        if callable(obj) and not isinstance(obj, type):
            for preset in obj() or ():
                register(preset)
    except Exception as e:  # a plugin's fault must not stop attnlab's own presets
        _warn(f"attnlab: ignoring the presets of entry point {ep.name!r} ({ep.value}) of distribution "
              f"{_distribution(ep)!r}: {type(e).__name__}: {e}")


def all_presets() -> dict[str, Preset]:
    """Every registered preset, by name: the papers of every installed distribution's entry points
    (:data:`ENTRY_POINT_GROUP`), attnlab's own first, in the order of :data:`PAPERS`."""
    group = _entry_points()
    for ep in group:
        _load_entry_point(ep)
    # the registration order depends on which presets the process asked for first (get_preset loads one paper):
    # the catalogue's order is that of the entry points, each paper's presets in the order it registered them
    rank = {ep.name: i for i, ep in enumerate(group)}
    return dict(sorted(_REGISTRY.items(), key=lambda item: rank.get(item[1].paper, len(rank))))


def get_preset(name: str) -> Preset:
    """The preset ``name``. Only its paper's entry point is loaded (a Dask worker or an ``attnlab run`` process then
    skips importing the other papers' dependencies), or every one when no paper has that name."""
    paper = name.split("-", 1)[0] if isinstance(name, str) else ""
    if name not in _REGISTRY:
        for ep in _entry_points(paper):
            _load_entry_point(ep)
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
    ignored = sorted(set(overrides or {}) & set(p.unused))
    if ignored:
        raise AttnlabError(f"{p.name} does not use the config field {ignored[0]!r}: setting it would change nothing "
                           "but the run's hash")
    base = {**p.defaults, **(p.quick if quick else {})}
    return validate_config(p.config_cls, base, dict(overrides or {}))


def unmet(preset: Preset, config: ExperimentConfig) -> str | None:
    """Why ``preset`` cannot run with ``config`` here (its :attr:`Preset.prerequisite`), or None."""
    check = getattr(preset, "prerequisite", None)
    return None if check is None else check(config)
