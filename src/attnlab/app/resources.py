"""Refuse, before anything runs, a config whose arrays cannot fit in this machine's available memory.

Each paper folder has a ``memory`` module with ``memory_bytes(preset_name, config) -> float``: a cheap upper bound,
from the config alone, of the bytes its largest arrays take (None for a preset it does not know). :func:`estimate`
looks it up by the preset's ``paper``, unless the preset has its own ``memory(config)``; :func:`check_memory`
compares it with ``psutil.virtual_memory().available`` and raises a one-line :class:`~attnlab.errors.AttnlabError`
naming the estimate. A new paper adds its own ``memory.py``; a paper without one is not checked.
"""

from __future__ import annotations

import importlib
import math

from attnlab.errors import AttnlabError

__all__ = ["estimate", "available_bytes", "check_memory", "format_bytes"]


def estimate(preset, config) -> float | None:
    """Upper bound of the bytes a run of ``preset`` with ``config`` needs (None: no estimate for this paper). A
    preset's own ``memory(config)`` comes first."""
    own = getattr(preset, "memory", None)
    if own is not None:
        return float(own(config))
    try:
        module = importlib.import_module(f"attnlab.{preset.paper}.memory")
    except ModuleNotFoundError as e:
        if e.name not in (f"attnlab.{preset.paper}.memory", f"attnlab.{preset.paper}"):
            raise
        return None
    try:
        value = module.memory_bytes(preset.name, config)
    except OverflowError:
        return math.inf
    return None if value is None else float(value)


def available_bytes() -> float:
    import psutil

    return float(psutil.virtual_memory().available)


def format_bytes(n: float) -> str:
    if not math.isfinite(n):
        return "more than can be counted"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}" if unit != "B" else f"{n:.0f} B"
        n /= 1024
    return f"{n:.3g} PiB"  # pragma: no cover


def check_memory(preset, config) -> float | None:
    """Raise :class:`AttnlabError` if the estimate of ``preset`` with ``config`` exceeds the available memory;
    return the estimate."""
    need = estimate(preset, config)
    if need is None:
        return None
    have = available_bytes()
    if not need <= have:
        raise AttnlabError(f"{preset.name}: this config needs about {format_bytes(need)} of memory, more than the "
                           f"{format_bytes(have)} available here; reduce its sizes")
    return need
