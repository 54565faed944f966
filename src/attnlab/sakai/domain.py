"""The domains of the functions that :mod:`attnlab.sakai` exports and that do not check their own arguments (the
samplers, the limit law and the kernel maps do: sizes integers >= 1, a known input activation, kernels symmetric
positive semidefinite): one check per function, of the same name, run on the arguments before the function
(:func:`attnlab._validate.public`); a one-line ValueError names the first argument outside the domain.

The distances compare samples: 1-D arrays of finite numbers, at least 2 each (a KDE bandwidth and an empirical law
need them), on a grid of at least 2 finite points; the Rao-Blackwellised density needs positive variances.
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.sakai.model import ACTIVATIONS

__all__ = ["psi", "kde_kl", "ks_w1", "bootstrap_ks_w1", "rb_density"]


def _sample(name, x) -> None:
    n = check.shape(name, x, (None,))[0]
    if n < 2:
        raise ValueError(f"{name} must hold at least 2 draws; got {n}")
    check.real(name, x)


def _grid(grid) -> None:
    _sample("grid", grid)


def psi(*, activation, **_) -> None:
    check.choice("activation", activation, ACTIVATIONS)


def kde_kl(*, x, y, grid, **_) -> None:
    _sample("x", x)
    _sample("y", y)
    _grid(grid)
    for name, z in (("x", x), ("y", y)):
        if check.is_concrete(z) and np.ptp(np.asarray(z)) == 0:
            raise ValueError(f"{name} must not be constant (its KDE bandwidth would be 0)")


def ks_w1(*, x, y, **_) -> None:
    _sample("x", x)
    _sample("y", y)


def bootstrap_ks_w1(*, x, y, n_boot, **_) -> None:
    ks_w1(x=x, y=y)
    check.count("n_boot", n_boot)


def rb_density(*, v, grid, block, **_) -> None:
    check.shape("v", v, (None,))
    if np.shape(v)[0] < 1:
        raise ValueError("v must hold at least one variance")
    check.positive("v", v)
    check.shape("grid", grid, (None,))
    check.real("grid", grid)
    check.count("block", block)
