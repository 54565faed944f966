"""The extension API: everything attnlab's own presets use to register, check, plot and store, for a plugin to use
the same way. Nothing a plugin needs is elsewhere, and nothing here is private.

A plugin is a Python distribution that declares, in its ``pyproject.toml``, an entry point in the group
``attnlab.presets`` (:data:`ENTRY_POINT_GROUP`)::

    [project.entry-points."attnlab.presets"]
    mypaper = "mypaper.presets"

The entry point's name is the paper's name, which every preset name of the paper starts with (``mypaper-risk``);
its value is a module that registers the paper's presets when imported (with :func:`register`), or a function
returning them. attnlab's five papers register through the same group. Once the distribution is installed, its
presets appear in ``attnlab list``, ``show``, ``run``, ``reproduce mypaper``, ``sweep``, the report and
:func:`attnlab.presets`; :func:`attnlab.testing.check_preset` asserts the whole contract. ``attnlab new PACKAGE``
writes a plugin's skeleton that passes it as generated.

The contract of a preset (:class:`Preset`):

* a **config class**, a subclass of :class:`ExperimentConfig` (pydantic, frozen, unknown keys refused, numbers
  finite), every field with a default and a ``description``; the preset's ``defaults`` and ``quick`` sizes are
  values of its fields;
* ``run(config, key, progress) -> xarray.Dataset``: the simulation and the theory from ``jax.random`` key ``key``
  (call ``progress(done, total)`` now and then), in float64 (the store runs it inside :func:`x64`); every
  dimension a coordinate with ``units`` and ``long_name``, every variable with ``units``;
* ``summarize(dataset, config) -> (metrics, checks)``: finite metrics (a dict of numbers) and :class:`Check`\\ s, each
  with a tolerance derived from a standard error (:func:`mean_se`) or a stated numerical bound, and a negative
  control that it must reject (or :meth:`Check.not_evaluated`, with the reason, which never passes);
* ``plot(dataset, config) -> {name: Figure}``: figures under :func:`paper_figure`, labels in mathtext, a curve of
  data points styled by :func:`sparse` (under :data:`FEW_POINTS` points, markers and no joining line); given as
  ``deferred("mypaper.figures:plot")``, its module (and matplotlib) is imported at the first draw only;
* compiled functions declared with :func:`jit` (``jax.jit`` whose traced program a later process loads instead of
  tracing again, :mod:`attnlab.programs`) rather than ``jax.jit``, where their trace depends only on their arguments;
* optionally ``finding(metrics, config) -> str`` (one line of words), ``memory(config) -> bytes``,
  ``prerequisite(config) -> str | None``, ``unused`` (config fields this preset does not read).
"""

from __future__ import annotations

from attnlab.config import ExperimentConfig, check_seed, validate_config
from attnlab.errors import AttnlabError
from attnlab.plot import (
    FEW_POINTS,
    LABELS,
    SIMULATION,
    STYLE,
    THEORY,
    band,
    colorbar,
    panels,
    paper_figure,
    render_figure,
    save_figure,
    sparse,
)
from attnlab.programs import jit
from attnlab.registry import (
    ENTRY_POINT_GROUP,
    Check,
    Preset,
    contract_problems,
    deferred,
    get_preset,
    mean_se,
    register,
    resolve_config,
)
from attnlab.runtime import float64, x64

__all__ = ["ENTRY_POINT_GROUP", "ExperimentConfig", "Check", "Preset", "register", "deferred", "mean_se",
           "contract_problems", "resolve_config", "get_preset", "validate_config", "check_seed", "AttnlabError", "x64",
           "float64", "jit", "paper_figure", "panels", "band", "colorbar", "render_figure", "save_figure", "sparse",
           "FEW_POINTS", "LABELS", "THEORY", "SIMULATION", "STYLE"]
