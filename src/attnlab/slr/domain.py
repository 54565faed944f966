"""The domains of the functions that :mod:`attnlab.slr` exports: one check per function, of the same name, run on the
arguments before the function (:func:`attnlab._validate.public`). Each raises a one-line ValueError naming the first
argument outside the domain.

The SLR model needs a teacher pair (k*, v*) of unit, orthogonal vectors, sizes that are integers >= 1, a signal
standard deviation gamma >= 0 and a label noise eps >= 0; the overlaps of a student are those of unit vectors
(:func:`attnlab._validate.realisable`).
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.slr.overlaps import DohmatobOverlaps, Overlaps

__all__ = ["sample_teacher", "init_sphere", "sample_slr", "sample_slr_in_frame", "orthonormal_frame", "overlaps",
           "frame_coordinates", "owens_t", "zeta", "mc_mean", "mc_mean_to_se", "model_constants",
           "marion_overlaps", "dohmatob_overlaps"]


def model_constants(**values) -> None:
    """Each of the given sizes ``n`` (samples) and ``L`` (tokens) an integer >= 1, ``gamma >= 0`` and ``eps >= 0``
    (standard deviations)."""
    for name, value in values.items():
        if name in ("n", "L"):
            check.count(name, value)
        else:
            check.nonnegative(name, value)


def sample_teacher(*, d, **_) -> None:
    check.count("d", d, minimum=2)


def init_sphere(*, d, **_) -> None:
    check.count("d", d)


def sample_slr(*, k_star, v_star, n, L, gamma, eps, **_) -> None:
    check.teacher("k_star", k_star, "v_star", v_star)
    model_constants(n=n, L=L, gamma=gamma, eps=eps)


def sample_slr_in_frame(*, n, L, gamma, eps, d, **_) -> None:
    model_constants(n=n, L=L, gamma=gamma, eps=eps)
    check.count("d", d, minimum=4)


def orthonormal_frame(*, d, r, **_) -> None:
    d = check.count("d", d)
    if check.count("r", r) > d:
        raise ValueError(f"r must be at most d = {d} (an orthonormal r-frame of R^d); got r = {r}")


def overlaps(*, k, v, k_star, v_star, **_) -> None:
    named = {"k": k, "v": v, "k_star": k_star, "v_star": v_star}
    for name, x in named.items():
        if np.ndim(x) < 1:
            raise ValueError(f"{name} must be a vector (or a batch of vectors on the last axis); got a scalar")
    dims = {name: np.shape(x)[-1] for name, x in named.items()}
    if len(set(dims.values())) > 1:
        raise ValueError(f"k, v, k_star and v_star must have the same dimension on the last axis; got {dims}")
    try:
        np.broadcast_shapes(*(np.shape(x) for x in named.values()))
    except ValueError:
        shapes = {name: np.shape(x) for name, x in named.items()}
        raise ValueError(f"the leading axes of k, v, k_star and v_star must broadcast; got shapes {shapes}") from None


def marion_overlaps(name: str, o) -> None:
    """``o`` an :class:`~attnlab.slr.overlaps.Overlaps` (Marion's field order) of unit vectors."""
    if not isinstance(o, Overlaps):
        raise ValueError(f"{name} must be an attnlab.slr.Overlaps (kappa, nu, theta, eta, rho); got {type(o).__name__}"
                         + (" (convert with .to_marion())" if isinstance(o, DohmatobOverlaps) else ""))
    check.realisable(name, o.kappa, o.nu, o.theta, o.eta, o.rho)


def dohmatob_overlaps(name: str, o) -> None:
    """``o`` a :class:`~attnlab.slr.overlaps.DohmatobOverlaps` (Dohmatob's field order) of unit vectors."""
    if not isinstance(o, DohmatobOverlaps):
        raise ValueError(f"{name} must be an attnlab.slr.DohmatobOverlaps (mu, nu, eta, zeta, rho); got "
                         f"{type(o).__name__}" + (" (convert with .to_dohmatob())" if isinstance(o, Overlaps) else ""))
    check.realisable(name, o.mu, o.nu, o.zeta, o.eta, o.rho, letters=("mu", "nu", "zeta", "eta", "rho"))


def frame_coordinates(*, o, **_) -> None:
    marion_overlaps("o", o)


def owens_t(*, h, a, **_) -> None:
    check.real("h", h, allow_inf=True, sequence=True)
    check.real("a", a, lo=0.0, hi=1.0, sequence=True)


def zeta(*, t, sigma, **_) -> None:
    check.real("t", t, allow_inf=True, sequence=True)
    check.nonnegative("sigma", sigma, sequence=True)


def mc_mean(*, sample_fn, n, chunk, **_) -> None:
    if not callable(sample_fn):
        raise ValueError(f"sample_fn must be a callable sample_fn(key, chunk) -> (chunk,); got {sample_fn!r}")
    check.count("n", n, minimum=2)
    check.count("chunk", chunk)


def mc_mean_to_se(*, sample_fn, target_se, n, chunk, n_min=None, **_) -> None:
    mc_mean(sample_fn=sample_fn, n=n, chunk=chunk)
    check.nonnegative("target_se", target_se)
    if n_min is not None:
        check.count("n_min", n_min, minimum=2)
