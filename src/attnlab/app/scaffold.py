"""``attnlab new PACKAGE``: the skeleton of a plugin package, which installs and passes the conformance kit as written.

The skeleton holds ``pyproject.toml`` (the entry point in the group ``attnlab.presets``), a package with one preset
(its config, run, summary with one check and its negative control, one figure, a finding) and one test calling
:func:`attnlab.testing.check_preset`. Its preset is the smallest theory worth checking: the mean of ``n_samples``
draws of N(mu, sigma^2) has expectation mu and standard error sigma / sqrt(n); the control is the same check against
mu + 10 sigma / sqrt(n), which it must reject.
"""

from __future__ import annotations

import keyword
import re
from pathlib import Path

from attnlab.errors import AttnlabError

__all__ = ["write_plugin", "package_names"]

_PYPROJECT = '''[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{paper}: presets for attnlab"
requires-python = ">=3.11"
dependencies = ["attnlab"]

[project.optional-dependencies]
test = ["pytest"]

# attnlab finds the presets of installed packages through this group; the name is the paper's
[project.entry-points."attnlab.presets"]
{paper} = "{module}.presets"

[tool.setuptools.packages.find]
where = ["src"]
'''

_INIT = '''"""{paper}: a paper's presets for attnlab (registered by :mod:`{module}.presets` through the entry point)."""
'''

_PRESETS = '''"""The presets of {paper}, registered with attnlab when this module is imported (the entry point of the group
``attnlab.presets`` in pyproject.toml names it).

``{paper}-mean``: the mean of n draws of N(mu, sigma^2). Theory: its expectation is mu and its standard error is
sigma / sqrt(n). Check: the mean of the repeats' sample means against mu, within 5 standard errors of that mean;
negative control: the same check against mu + 10 sigma / sqrt(n), which it must reject.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import xarray as xr
from pydantic import Field

from attnlab.extend import SIMULATION, THEORY, Check, ExperimentConfig, Preset, mean_se, panels, paper_figure, register

CITATION = "{paper}"


class MeanConfig(ExperimentConfig):
    mu: float = Field(0.5, ge=-1e6, le=1e6, description="mean mu of the Gaussian draws")
    sigma: float = Field(1.0, gt=0, le=1e6, description="standard deviation sigma of the draws")
    n_samples: int = Field(10_000, ge=2, le=10**8, description="draws n per repeat")
    n_repeats: int = Field(64, ge=2, le=10**5, description="independent repeats of the experiment")


def run(config: MeanConfig, key, progress=None) -> xr.Dataset:
    """Draw ``n_repeats`` samples of ``n_samples`` Gaussians; keep each repeat's sample mean and the theory."""
    draws = config.mu + config.sigma * jax.random.normal(key, (config.n_repeats, config.n_samples))
    means = np.asarray(draws.mean(axis=1), dtype=float)
    if progress is not None:
        progress(1, 1)
    return xr.Dataset(
        {{"sample_mean": ("repeat", means, {{"units": "1", "long_name": "sample mean of one repeat"}}),
          "theory_mean": ((), float(config.mu), {{"units": "1", "long_name": "expectation mu"}}),
          "theory_se": ((), config.sigma / math.sqrt(config.n_samples),
                        {{"units": "1", "long_name": "standard error sigma / sqrt(n)"}})}},
        coords={{"repeat": ("repeat", np.arange(config.n_repeats), {{"units": "1", "long_name": "repeat"}})}})


def summarize(ds: xr.Dataset, config: MeanConfig):
    """Metrics and the check of the theory against the simulation, with its negative control."""
    mean, se = mean_se(ds.sample_mean.values)
    theory, spread = float(ds.theory_mean), float(ds.theory_se)
    metrics = {{"mean_of_sample_means": mean, "sd_of_sample_means": float(np.std(ds.sample_mean.values, ddof=1)),
               "theory_standard_error": spread}}
    check = Check.where_finite(
        "mean of the sample means = mu", theory=theory, simulation=mean, tolerance=5 * se,
        basis="5 standard errors of the mean over repeats",
        control="mu + 10 sigma / sqrt(n) instead of mu", control_theory=theory + 10 * spread)
    return metrics, [check]


@paper_figure
def plot(ds: xr.Dataset, config: MeanConfig):
    """The sample means of the repeats against the theory's mu and the band mu +- 2 sigma / sqrt(n)."""
    fig, (ax,) = panels(1)
    ax.plot(ds.repeat, ds.sample_mean, **SIMULATION, label="simulation")
    mu, se = float(ds.theory_mean), float(ds.theory_se)
    ax.axhline(mu, **THEORY, label=r"theory $\\mu$")
    ax.axhspan(mu - 2 * se, mu + 2 * se, color="0.85", label=r"$\\mu \\pm 2\\sigma/\\sqrt{{n}}$")
    ax.set(xlabel="repeat", ylabel=r"sample mean $\\bar{{x}}$")
    ax.legend()
    return {{"means": fig}}


def finding(metrics, config: MeanConfig) -> str:
    return (f"the sample means scatter by {{metrics['sd_of_sample_means']:.3g}} around "
            f"{{metrics['mean_of_sample_means']:.4g}}, as sigma / sqrt(n) = {{metrics['theory_standard_error']:.3g}} "
            f"around mu = {{config.mu:g}} predicts")


register(Preset(
    name="{paper}-mean", paper="{paper}", citation=CITATION, figure="no figure in the paper",
    description="The mean of n Gaussian draws against its expectation mu and standard error sigma / sqrt(n).",
    config_cls=MeanConfig, run=run, summarize=summarize, plot=plot, finding=finding,
    quick={{"n_samples": 1000, "n_repeats": 32}}))
'''

_TEST = '''"""The conformance kit of attnlab over this package's presets."""

import attnlab.testing

PRESETS = ["{paper}-mean"]


@attnlab.testing.parametrize_with_checks(PRESETS)
def test_preset_conforms(name):
    attnlab.testing.check_preset(name)
'''

_README = '''# {dist}

Presets of {paper} for [attnlab](https://pypi.org/project/attnlab/).

    pip install -e .
    attnlab list                     # shows {paper}-mean
    attnlab run {paper}-mean --quick
    pytest                           # the conformance kit over the presets
'''


def package_names(package: str) -> tuple[str, str]:
    """``(distribution name, module and paper name)`` for ``PACKAGE`` (a path's last part): the module is the name
    with ``-`` as ``_``; it must be a lower-case Python identifier, and not a keyword."""
    dist = Path(package).name
    module = dist.replace("-", "_")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", module) or keyword.iskeyword(module) or module == "attnlab":
        raise AttnlabError(f"invalid package name {dist!r}: lower-case letters, digits, '_' or '-', starting with a "
                           "letter (it names the Python module and the paper)")
    return dist, module


def write_plugin(package: str | Path) -> list[Path]:
    """Write the skeleton of the plugin ``package`` into the new directory ``package``; return the files written.
    Refuses (one line) a path that exists."""
    root = Path(package)
    dist, module = package_names(str(package))
    if root.exists() or root.is_symlink():
        raise AttnlabError(f"{root} exists: attnlab new writes a new directory and touches nothing that exists")
    values = {"dist": dist, "module": module, "paper": module}
    files = {root / "pyproject.toml": _PYPROJECT, root / "README.md": _README,
             root / "src" / module / "__init__.py": _INIT, root / "src" / module / "presets.py": _PRESETS,
             root / "tests" / "test_conformance.py": _TEST}
    try:
        for path, template in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(template.format(**values))
    except OSError as e:
        raise AttnlabError(f"cannot write {root}: {e.strerror or e}") from None
    return list(files)
