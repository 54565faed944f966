"""The conformance kit: what every preset, attnlab's own and a plugin's alike, must satisfy, as functions.

In the spirit of scikit-learn's ``check_estimator``: :func:`check_preset` runs a preset at quick size through the
store (as ``attnlab run --quick`` does) and raises :class:`AssertionError` listing every broken rule of the
contract; :func:`parametrize_with_checks` turns a list of preset names into a pytest parametrisation, one test per
preset. attnlab's own conformance test is this kit applied to its catalogue.

The contract:

* **registration**: the :class:`~attnlab.registry.Preset` record is complete (:func:`attnlab.registry.contract_problems`);
* **data** (:func:`dataset_problems`): CF conventions as xarray users expect them: every dimension has a coordinate
  with ``units`` and ``long_name``, every variable and coordinate has ``units``, attributes are JSON-native;
* **figures** (:func:`figure_problems`): every panel labelled, symbols in mathtext (``$\\kappa$``, never ``kappa``),
  colour-coded artists with a labelled colour bar; at least one figure;
* **results**: finite metrics, strict JSON in ``summary.json`` and ``config.json``, a one-line finding in words;
* **checks**: at least one; each evaluated, finite, passing, with a negative control that it rejects (a check that is
  not evaluated, or whose control is within its tolerance, never counts as passed);
* **determinism**: the same seed gives the same metrics (``determinism=True`` runs the preset a second time).
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["check_preset", "parametrize_with_checks", "preset_problems", "dataset_problems", "figure_problems",
           "result_problems"]

# Greek letters and other symbols that must be written in mathtext ($\kappa$), never as ASCII words or ^ and _.
_ASCII_MATH = re.compile(r"\b(alpha|beta|gamma|delta|eps|epsilon|kappa|lambda|lambda0|mu|nu|rho|sigma|tau|theta|"
                         r"eta|zeta|xi|omega|phi|psi)\b|[\^_]|\bsqrt\b", re.IGNORECASE)


def _outside_math(text: str) -> str:
    """``text`` without its $...$ segments."""
    return re.sub(r"\$[^$]*\$", " ", text)


def figure_problems(fig, name: str = "figure") -> list[str]:
    """What breaks the figure conventions in ``fig``: every panel has an x and a y label (a 3-D panel also a z label),
    symbols are mathtext (no ASCII pseudo-maths such as ``kappa`` or ``E(T-y)^2`` outside $...$ in labels, titles,
    legends), and every colour-coded artist (image, scatter coloured by value) has a labelled colour bar."""
    problems = []
    for i, ax in enumerate(fig.axes):
        where = f"{name}, panel {i}"
        if getattr(ax, "_colorbar", None) is not None:  # a colour bar's own axes: its label is its long axis's
            cb = ax._colorbar
            label = (ax.get_ylabel() if cb.orientation == "vertical" else ax.get_xlabel())
            if not label.strip():
                problems.append(f"{where}: colour bar without a label")
            texts = [label]
        else:
            labels = {"x": ax.get_xlabel(), "y": ax.get_ylabel()}
            if hasattr(ax, "get_zlabel"):
                labels["z"] = ax.get_zlabel()
            if ax.axison:
                problems += [f"{where}: no {k} label" for k, v in labels.items() if not v.strip()]
            texts = [*labels.values(), ax.get_title()]
            legend = ax.get_legend()
            if legend is not None:
                texts += [t.get_text() for t in legend.get_texts()]
            mappables = [*ax.images, *(c for c in ax.collections
                                       if c.get_array() is not None and c.get_cmap() is not None
                                       and np.size(c.get_array()) > 1 and _colour_coded(c))]
            if mappables and not any(m.colorbar is not None for m in mappables):
                problems.append(f"{where}: colour-coded without a colour bar")
        problems += [f"{where}: ASCII maths in {t!r}" for t in texts if _ASCII_MATH.search(_outside_math(t))]
    if fig._suptitle is not None and _ASCII_MATH.search(_outside_math(fig._suptitle.get_text())):
        problems.append(f"{name}: ASCII maths in the title {fig._suptitle.get_text()!r}")
    return problems


def _colour_coded(collection) -> bool:
    """Whether a collection's colours come from its data array (a scatter with ``c=values``), not a fixed colour."""
    arr = np.asarray(collection.get_array(), dtype=float)
    return arr.ndim == 1 and np.ptp(arr[np.isfinite(arr)]) > 0 if np.isfinite(arr).any() else False


def dataset_problems(ds) -> list[str]:
    """What breaks the data conventions (CF, as xarray users expect) in ``ds``: every dimension has a coordinate with
    ``units`` and ``long_name``; every variable and coordinate has ``units``; attributes are JSON-native (numbers,
    strings, lists, dicts; no Python-repr strings); the dataset's attributes name the preset, its citation and hold
    the resolved config."""
    problems = []
    for dim in ds.dims:
        if dim not in ds.coords:
            problems.append(f"dimension {dim!r} has no coordinate")
            continue
        problems += [f"coordinate {dim!r} has no {a}" for a in ("units", "long_name") if a not in ds[dim].attrs]
    problems += [f"variable {v!r} has no units" for v in ds.data_vars if "units" not in ds[v].attrs]
    problems += [f"coordinate {c!r} has no units" for c in ds.coords if "units" not in ds[c].attrs]
    for owner, attrs in [("dataset", ds.attrs), *((f"{k!r}", ds[k].attrs) for k in ds.variables)]:
        for key, value in attrs.items():
            try:
                json.dumps(_native(value), allow_nan=False)
            except (TypeError, ValueError):
                problems.append(f"{owner} attribute {key!r} is not JSON-native: {value!r}")
                continue
            if isinstance(value, str) and re.fullmatch(r"\s*(['\"].*['\"]|\(.*\)|\[.*\]|\{.*\})\s*", value, re.S):
                problems.append(f"{owner} attribute {key!r} is a repr or JSON text, not a value: {value!r}")
    problems += [f"dataset attributes lack {a!r}" for a in ("preset", "citation", "config") if a not in ds.attrs]
    return problems


def _native(value):
    """NumPy scalars and arrays as the JSON values a store writes them as."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def preset_problems(preset, ds, config) -> list[str]:
    """:func:`dataset_problems` of a preset's dataset as :func:`attnlab.api.execute` stores it (with the preset and
    its citation; an empty config stands for the resolved one) and :func:`figure_problems` of every figure drawn
    from it."""
    import matplotlib.pyplot as plt

    from attnlab import runtime

    ds.attrs.update(preset=preset.name, citation=preset.citation, config={})  # added by attnlab.api.execute
    problems = dataset_problems(ds)
    with runtime.x64():
        figures = preset.plot(ds, config)
    problems += [q for name, fig in figures.items() for q in figure_problems(fig, name)]
    plt.close("all")
    return problems


def _strict(text: str):
    def bad(token):
        raise ValueError(f"bare {token} in JSON")

    return json.loads(text, parse_constant=bad)


def result_problems(run, *, not_evaluated_ok: tuple[str, ...] = ()) -> list[str]:
    """What breaks the contract in a finished :class:`attnlab.Run` (read back from its run directory when it has
    one): strict JSON, a one-line finding, finite metrics, and checks that are evaluated (unless their reason starts
    with one of ``not_evaluated_ok``), finite, passing, with a negative control that they reject."""
    problems = []
    if run.run_dir is not None:
        for name in ("summary.json", "config.json"):
            try:
                _strict((Path(run.run_dir) / name).read_text())
            except (OSError, ValueError) as e:
                problems.append(f"{name}: {e}")
    if not (isinstance(run.finding, str) and run.finding.strip() and "\n" not in run.finding):
        problems.append("no one-line finding in words")
    for name, value in _flat(run.metrics):
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(f"metric {name!r} is not finite ({value})")
    if not run.checks:
        problems.append("no check of theory against simulation")
    for c in run.checks:
        label = f"check {c.name!r}"
        if not c.evaluated:
            if not c.reason.startswith(not_evaluated_ok) or not not_evaluated_ok:
                problems.append(f"{label} not evaluated at quick size: {c.reason}")
            continue
        if not all(math.isfinite(float(x)) for x in (c.theory, c.simulation, c.tolerance)):
            problems.append(f"{label} is not finite")
        if not c.within_tolerance:
            problems.append(f"{label} fails: |{c.theory:.6g} - {c.simulation:.6g}| > {c.tolerance:.6g}")
        if not c.control:
            problems.append(f"{label} has no negative control")
        elif not c.control_rejected:
            problems.append(f"{label}: its negative control ({c.control}) is not rejected (error "
                            f"{c.control_error:.3g} <= tolerance {c.tolerance:.3g})")
        if c.passed != (c.status == "passed"):
            problems.append(f"{label}: passed but its status is {c.status!r}")
    return problems


def _flat(metrics, prefix=""):
    for k, v in (metrics or {}).items():
        if isinstance(v, dict):
            yield from _flat(v, f"{prefix}{k}.")
        elif isinstance(v, (list, tuple)):
            yield from _flat({str(i): x for i, x in enumerate(v)}, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}", v


def check_preset(name: str, *, run=None, seed: int = 0, overrides: dict | None = None, determinism: bool = True,
                 out: str | Path | None = None, not_evaluated_ok: tuple[str, ...] = ()) -> None:
    """Assert that the preset ``name`` follows the whole contract (module doc); raise :class:`AssertionError` listing
    every problem. It runs at quick size with ``seed`` and ``overrides`` (a required local input, say) through
    :func:`attnlab.run` into ``out`` (a temporary directory by default), unless a finished quick ``run`` of it is
    given; ``determinism`` runs it once more (without writing) and compares the metrics."""
    import attnlab
    from attnlab.registry import contract_problems, get_preset

    preset = get_preset(name)
    problems = [f"registration: {p}" for p in contract_problems(preset)]
    with tempfile.TemporaryDirectory(prefix="attnlab-check-") as tmp:
        ran_here = run is None  # a given run may have been stored without its figures (they are drawn below)
        if run is None:
            run = attnlab.run(name, quick=True, seed=seed, out=Path(out or Path(tmp) / "run"), **(overrides or {}))
        problems += [f"data: {p}" for p in dataset_problems(run.data)]
        from attnlab import runtime

        with runtime.x64():  # as the store draws them
            figures = run.figures
        if not figures:
            problems.append("figures: none drawn")
        problems += [f"figures: {p}" for n, f in figures.items() for p in figure_problems(f, n)]
        if ran_here and not any(str(f).endswith(".png") for f in
                                               _strict((Path(run.run_dir) / "summary.json").read_text())["figures"]):
            problems.append("figures: none written with the run")
        import matplotlib.pyplot as plt

        plt.close("all")
        problems += result_problems(run, not_evaluated_ok=not_evaluated_ok)
        if determinism:
            again = attnlab.run(name, quick=True, seed=seed, **(overrides or {}))
            if dict(_flat(again.metrics)) != dict(_flat(run.metrics)):
                diff = [k for k, v in _flat(again.metrics) if dict(_flat(run.metrics)).get(k) != v]
                problems.append(f"determinism: the same seed gave other metrics ({', '.join(diff[:5])})")
    if problems:
        raise AssertionError(f"preset {name!r} breaks the contract:\n  " + "\n  ".join(problems))


def parametrize_with_checks(names):
    """A pytest decorator running a test once per preset of ``names``, with the preset's name as its argument::

        @attnlab.testing.parametrize_with_checks(["mypaper-risk"])
        def test_conforms(name):
            attnlab.testing.check_preset(name)
    """
    import pytest

    return pytest.mark.parametrize("name", list(names), ids=list(names))
