"""The repository's scripts under tools/ and bench/ (not packages) loaded as modules, for the tests of what they
write."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_tool(name: str, folder: str = "tools"):
    """``<folder>/<name>.py`` as a fresh module (``tools`` or ``bench``)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
