"""The conventions every preset's figures and data follow, as functions returning the list of what breaks them (empty
when all hold). The conformance test applies them to every preset; a paper's tests may apply them to one figure."""

from __future__ import annotations

import json
import re

import numpy as np

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

    ds.attrs.update(preset=preset.name, citation=preset.citation, config={})  # added by attnlab.api.execute
    problems = dataset_problems(ds)
    figures = preset.plot(ds, config)
    problems += [q for name, fig in figures.items() for q in figure_problems(fig, name)]
    plt.close("all")
    return problems
