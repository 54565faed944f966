"""attnlab: exact simulation and theory of attention layers, checked against each other.

Layout, one line per folder:

* ``attnlab.slr`` -- single-location regression core shared by three papers: the data law, overlaps, Owen's T;
* ``attnlab.marion`` -- erf attention on SLR (Marion, Berthier, Biau, Boyer, ICLR 2025): risk, PGD, SGD;
* ``attnlab.dohmatob`` -- softmax attention on SLR (Dohmatob, NeurIPS 2025): mean-field risk, flows, RGD;
* ``attnlab.duranthon`` -- softmax vs linear attention (Duranthon et al. 2025): Bayes risk, ERM, replica;
* ``attnlab.sakai`` -- infinite-width multi-head attention (Sakai, Karakida, Imaizumi, NeurIPS 2025);
* ``attnlab.bruno`` -- mean-field transformer dynamics on the sphere (Bruno, Pasqualotto, Agazzi, NeurIPS 2025);
* ``attnlab.app`` -- command line, run store, Dask sweeps, report (the only place importing Typer, Rich, Dask, Zarr).

Each paper's folder holds its theory, its simulation, its presets (``presets.py``) and its figures, and
re-exports its public functions in its ``__init__``. At the top level: :func:`run` and :func:`presets` (the Python
entry points), :mod:`attnlab.registry` (the catalogue, :func:`~attnlab.registry.resolve_config`),
:mod:`attnlab.runtime` (float64, XLA flags, compile cache), :mod:`attnlab.native` (building the C kernels).

Importing attnlab changes nothing in the process, and neither does calling it: JAX's configuration, environment
variables and other libraries stay as they were (:func:`run` scopes what it sets, :func:`attnlab.runtime.configured`).
Bad input to :func:`run` raises :class:`AttnlabError`, one line, as the command line prints it. Presets run in
float64 inside :func:`attnlab.runtime.x64`; the public functions of the paper packages do the same.

Extending attnlab: :mod:`attnlab.extend` (the API a plugin registers, checks and plots with) and
:mod:`attnlab.testing` (the conformance kit).
"""

import typing as _typing

__version__ = "0.1.0"

__all__ = ["__version__", "run", "presets", "Run", "Check", "Preset", "resolve_config", "AttnlabError"]

_LAZY = {"run": "attnlab.api", "presets": "attnlab.api", "Run": "attnlab.api", "Check": "attnlab.registry",
         "Preset": "attnlab.registry", "resolve_config": "attnlab.registry", "AttnlabError": "attnlab.errors"}
"""Where each top-level name lives: imported on first use (PEP 562), so that ``import attnlab`` and the command
line's ``--version``, ``-h``, ``list`` and ``show`` do not pay for pydantic, NumPy or JAX."""


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'attnlab' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if _typing.TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs: the names above, as they resolve
    from attnlab.api import Run, presets, run  # noqa: F401
    from attnlab.errors import AttnlabError  # noqa: F401
    from attnlab.registry import Check, Preset, resolve_config  # noqa: F401
