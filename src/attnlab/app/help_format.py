"""Typer's help formatter without the imports attnlab's help never uses.

``typer.rich_utils`` (imported the first time a help page is printed) imports ``rich.markdown`` (markdown-it) and
``rich.traceback`` (pygments) at module level: most of the formatter's import time. attnlab's help is written
in Rich markup, never Markdown, and the command line prints no traceback. :func:`load` imports ``typer.rich_utils``
with those two modules' classes bound to stand-ins that import the real module on first use, then takes the
stand-in modules out of ``sys.modules`` so that any later ``import rich.markdown`` loads the real one. Only the
command line's own process calls it.
"""

from __future__ import annotations

import importlib
import sys
import types

DEFERRED = {"rich.markdown": "Markdown", "rich.traceback": "Traceback"}
"""Module -> the one name ``typer.rich_utils`` imports from it."""


def _stand_in(module: str, name: str) -> type:
    """A class named ``name`` whose instances are ``module.name``'s, imported at the first instance."""

    def __new__(cls, *args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    return type(name, (), {"__new__": __new__, "__module__": __name__,
                           "__doc__": f"Stand-in for {module}.{name}, imported at the first instance."})


def load() -> None:
    """Import ``typer.rich_utils`` with :data:`DEFERRED` standing in; a no-op once it is imported. Should the
    installed Typer import anything else from those modules, it is imported the plain way."""
    if "typer.rich_utils" in sys.modules:
        return
    placed = []
    for module, name in DEFERRED.items():
        if module not in sys.modules:
            stand_in = types.ModuleType(module)
            setattr(stand_in, name, _stand_in(module, name))
            sys.modules[module] = stand_in
            placed.append(module)
    try:
        importlib.import_module("typer.rich_utils")
    except ImportError:
        sys.modules.pop("typer.rich_utils", None)
        for module in placed:
            sys.modules.pop(module, None)
        placed = []
        importlib.import_module("typer.rich_utils")
    finally:
        for module in placed:
            sys.modules.pop(module, None)
