"""The environment the suite runs in is the one ``pyproject.toml`` asks for: every installed distribution among
attnlab's dependencies and test extras lies within its bounds. The bounds carry decisions (for one,
``ml_dtypes<0.7``, whose 0.7 release takes most of a second to import in every process that imports JAX); an
environment past them would test something else than what ``make test`` installs."""

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    return [Requirement(r) for r in (*project["dependencies"], *project["optional-dependencies"]["test"])]


def unmet(requirements: list[Requirement]) -> list[str]:
    """``name installed-version (wanted specifier)`` for each requirement whose installed version lies outside its
    specifier, or ``name not installed``."""
    out = []
    for req in requirements:
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            out.append(f"{req.name} not installed")
            continue
        if not req.specifier.contains(version, prereleases=True):
            out.append(f"{req.name} {version} (wanted {req.specifier})")
    return out


def test_installed_dependencies_lie_within_the_bounds_of_pyproject():
    reqs = _requirements()
    assert any(r.name == "ml_dtypes" for r in reqs)
    assert unmet(reqs) == []


def test_a_bound_the_installed_version_breaks_is_reported():
    """Control: the same check rejects a requirement that excludes what is installed, and one not installed."""
    installed = metadata.version("ml_dtypes")
    wrong = [Requirement(f"ml_dtypes<{installed}"), Requirement("attnlab-no-such-distribution>=1")]
    assert unmet(wrong) == [f"ml_dtypes {installed} (wanted <{installed})", "attnlab-no-such-distribution not installed"]
