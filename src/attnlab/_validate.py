"""Argument checks of the paper packages' public functions: one place, used by every paper.

Each check raises a one-sentence :class:`ValueError` that names the argument, says what is accepted and what was
given (diffrax's style: ``n must be an integer >= 1; got -5``), before any tracing. Checks read concrete values only:
an argument that is a JAX tracer (the caller differentiates or jits the public function) passes its value checks
untouched (its shape is still checked), so no check ever runs inside compiled code.

* :func:`count` -- a size or a number of samples: a Python or NumPy integer (not a bool) at least ``minimum``;
* :func:`real`, :func:`positive`, :func:`nonnegative` -- real numbers (scalars or arrays, every entry checked):
  not NaN, finite unless allowed, within bounds;
* :func:`choice` -- one of a few names;
* :func:`shape` -- an array's shape against the expected one (``None`` for a free axis);
* :func:`realisable` -- five overlaps of unit vectors k, v with an orthonormal teacher pair k*, v* (the Gram matrix
  of (k*, v*, k, v) positive semidefinite);
* :func:`teacher` -- an orthogonal teacher pair of one length;
* :func:`psd` -- a symmetric positive semidefinite matrix;
* :func:`checked` / :func:`public` -- a function whose arguments are checked first (and, for :func:`public`, which
  computes in float64: :func:`attnlab.runtime.float64`).
"""

from __future__ import annotations

import functools
import inspect
import numbers
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["is_concrete", "count", "real", "positive", "nonnegative", "choice", "shape", "realisable", "teacher", "psd",
           "finite_float", "is_integer", "checked", "public"]

F = TypeVar("F", bound=Callable)


def _shown(value) -> str:
    """A short one-line rendering of a received value."""
    if hasattr(value, "shape") and np.ndim(value) > 0:
        return f"an array of shape {tuple(np.shape(value))}"
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def is_concrete(value) -> bool:
    """Whether ``value`` (any pytree) holds no JAX tracer: its values can be read on the host."""
    import jax

    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(value))


def count(name: str, value, minimum: int = 1) -> int:
    """``value`` as a Python int when it is an integer (Python or NumPy, or a 0-d integer array; not a bool) of at
    least ``minimum``; else a ValueError naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be an integer >= {minimum}, not a boolean; got {value!r}")
    if isinstance(value, numbers.Integral):
        n = int(value)
    elif (hasattr(value, "dtype") and np.ndim(value) == 0 and np.issubdtype(np.dtype(value.dtype), np.integer)
          and is_concrete(value)):
        n = int(value)
    else:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {_shown(value)}")
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {n}")
    return n


def _bound_text(lo, hi, lo_open, hi_open) -> str:
    if lo is not None and hi is not None:
        return f"in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f"{'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f"{'<' if hi_open else '<='} {hi:g}"
    return "finite"


def real(name: str, value, *, lo: float | None = None, hi: float | None = None, lo_open: bool = False,
         hi_open: bool = False, allow_inf: bool = False, scalar: bool = False, sequence: bool = False):
    """Check that ``value`` (a real number or, unless ``scalar``, an array of them; every entry) is not NaN, finite
    unless ``allow_inf``, and within ``lo``/``hi`` (open or closed ends). A list or tuple of numbers counts as an
    array only with ``sequence`` (for functions that convert their argument; arithmetic on a list fails). Returns
    ``value`` unchanged; a traced value is not read."""
    if scalar and np.ndim(value) != 0:
        raise ValueError(f"{name} must be a number; got {_shown(value)}")
    if not sequence and isinstance(value, (list, tuple)):
        raise ValueError(f"{name} must be a number or an array; got a {type(value).__name__}")
    if not is_concrete(value):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, not a boolean; got {value!r}")
    try:
        x = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of them; got {_shown(value)}") from None
    every = "every entry of " if x.ndim else ""
    where = _bound_text(lo, hi, lo_open, hi_open)
    if np.isnan(x).any():
        raise ValueError(f"{every}{name} must be a {'finite number' if where == 'finite' else 'number ' + where}; got NaN")
    if not allow_inf and np.isinf(x).any():
        raise ValueError(f"{every}{name} must be a finite number{'' if where == 'finite' else ' ' + where}; got "
                         f"{x[np.isinf(x)].flat[0]}")
    bad = np.zeros(x.shape, bool)
    if lo is not None:
        bad |= (x <= lo) if lo_open else (x < lo)
    if hi is not None:
        bad |= (x >= hi) if hi_open else (x > hi)
    if bad.any():
        raise ValueError(f"{every}{name} must be {where}; got {x[bad].flat[0]:g}")
    return value


def positive(name: str, value, *, allow_inf: bool = False, scalar: bool = False, sequence: bool = False):
    """:func:`real` with ``value > 0`` (every entry)."""
    return real(name, value, lo=0.0, lo_open=True, allow_inf=allow_inf, scalar=scalar, sequence=sequence)


def nonnegative(name: str, value, *, allow_inf: bool = False, scalar: bool = False, sequence: bool = False):
    """:func:`real` with ``value >= 0`` (every entry)."""
    return real(name, value, lo=0.0, allow_inf=allow_inf, scalar=scalar, sequence=sequence)


def choice(name: str, value, choices: Sequence[str]) -> str:
    """``value`` when it is one of ``choices``; else a ValueError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(repr(c) for c in choices)}; got {_shown(value)}")
    return value


def shape(name: str, value, expected: Sequence[int | None]) -> tuple[int, ...]:
    """The shape of ``value`` when it matches ``expected`` (an int per axis, ``None`` for any length); else a
    ValueError giving both shapes."""
    got = tuple(np.shape(value))
    if len(got) != len(expected) or any(e is not None and g != e for g, e in zip(got, expected)):
        want = "(" + ", ".join("*" if e is None else str(e) for e in expected) + ("," if len(expected) == 1 else "") + ")"
        raise ValueError(f"{name} must have shape {want}; got shape {got}")
    return got


def _tolerance(*values) -> float:
    """Round-off allowed on a constraint between unit vectors' inner products: 1e-9 for float64 inputs, 1e-5 when
    any is in a lower precision."""
    low = any(hasattr(v, "dtype") and np.issubdtype(np.dtype(v.dtype), np.floating) and np.dtype(v.dtype).itemsize < 8
              for v in values)
    return 1e-5 if low else 1e-9


def realisable(name: str, kappa, nu, theta, eta, rho, *, letters=("kappa", "nu", "theta", "eta", "rho")) -> None:
    """Check that ``(kappa, nu, theta, eta, rho) = (k.k*, v.v*, v.k*, k.v*, k.v)`` are the overlaps of unit vectors
    k, v with an orthonormal pair k*, v* (every point of broadcast arrays): the Gram matrix of (k*, v*, k, v) is
    positive semidefinite, i.e. (Schur complement of the teacher block) ``kappa^2 + eta^2 <= 1``,
    ``theta^2 + nu^2 <= 1`` and ``(rho - kappa theta - eta nu)^2 <= (1 - kappa^2 - eta^2)(1 - theta^2 - nu^2)``
    (Cauchy-Schwarz on the parts of k and v orthogonal to the teacher). Up to round-off (:func:`_tolerance`).
    ``letters``: the names of the five overlaps in messages (Dohmatob's are ``mu, nu, zeta, eta, rho`` here)."""
    values = (kappa, nu, theta, eta, rho)
    if not is_concrete(values):
        return
    K, N, T, E, R = letters
    for field, v in zip(letters, values):
        real(f"{name}.{field}", v)
    tol = _tolerance(*values)
    k, n, t, e, r = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in values))
    a = 1.0 - k**2 - e**2
    b = 1.0 - t**2 - n**2
    c = r - k * t - e * n
    for bad, need in ((a < -tol, f"{K}^2 + {E}^2 <= 1"), (b < -tol, f"{T}^2 + {N}^2 <= 1"),
                      (c**2 > np.maximum(a, 0.0) * np.maximum(b, 0.0) + tol,
                       f"({R} - {K} {T} - {E} {N})^2 <= (1 - {K}^2 - {E}^2)(1 - {T}^2 - {N}^2)")):
        if bad.any():
            i = tuple(np.argwhere(bad)[0]) if bad.ndim else ()
            point = ", ".join(f"{float(x[i]):.6g}" for x in (k, n, t, e, r))
            raise ValueError(f"{name} must be overlaps ({', '.join(letters)}) of unit vectors with an orthonormal "
                             f"teacher pair, which needs {need}; got ({point})")


def teacher(k_name: str, k_star, v_name: str, v_star, *, norm: float | None = 1.0) -> int:
    """The dimension d of a teacher pair: vectors of one shape (d,), d >= 2, orthogonal and each of length ``norm``
    up to round-off (``norm=None``: any common length). Values of traced vectors are not read."""
    d = shape(k_name, k_star, (None,))[0]
    shape(v_name, v_star, (d,))
    if d < 2:
        raise ValueError(f"{k_name} and {v_name} must have dimension d >= 2; got d = {d}")
    if not is_concrete((k_star, v_star)):
        return d
    k, v = np.asarray(k_star, np.float64), np.asarray(v_star, np.float64)
    real(k_name, k)
    real(v_name, v)
    nk, nv = float(np.linalg.norm(k)), float(np.linalg.norm(v))
    length = nk if norm is None else norm
    tol = _tolerance(k_star, v_star) * 100
    if nk == 0 or abs(nk - length) > tol * length or abs(nv - length) > tol * length:
        raise ValueError(f"{k_name} and {v_name} must both have length {length:g}; got {nk:.6g} and {nv:.6g}")
    if abs(float(k @ v)) > tol * length**2:
        raise ValueError(f"{k_name} and {v_name} must be orthogonal; got {k_name} . {v_name} = {float(k @ v):.3g}")
    return d


def psd(name: str, value, *, rtol: float = 1e-10) -> np.ndarray:
    """``value`` as a float64 array when it is a finite, symmetric, positive semidefinite square matrix (or a stack
    of them on the leading axes): eigenvalues >= ``-rtol n`` times the largest magnitude of an entry (n the size);
    else a ValueError. One Cholesky factorisation of the shifted matrix decides (an eigendecomposition only for the
    message of a matrix that fails)."""
    M = np.asarray(value, np.float64)
    if M.ndim < 2 or M.shape[-1] != M.shape[-2]:
        raise ValueError(f"{name} must be a square matrix; got shape {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError(f"{name} must be finite; got a non-finite entry")
    if M.size == 0:
        return M
    scale = max(float(np.abs(M).max()), np.finfo(float).tiny)
    if not np.allclose(M, np.swapaxes(M, -1, -2), rtol=rtol, atol=rtol * scale):
        raise ValueError(f"{name} must be symmetric")
    shift = rtol * scale * M.shape[-1]
    try:
        np.linalg.cholesky(M + shift * np.eye(M.shape[-1]))
    except np.linalg.LinAlgError:
        low = float(np.linalg.eigvalsh(M).min())
        raise ValueError(f"{name} must be positive semidefinite; its smallest eigenvalue is {low:.3g}") from None
    return M


def checked(fn: F, check: Callable[..., Any]) -> F:
    """``fn`` whose arguments are first passed to ``check`` by name (``check(**arguments)``, defaults filled in;
    ``check`` takes the names it needs and ``**_``). ``check`` raises ValueError on a bad argument."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{fn.__name__}(): {err}") from None
        bound.apply_defaults()
        check(**bound.arguments)
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def public(fn: F, check: Callable[..., Any] | None = None) -> F:
    """``fn`` computing in float64 whatever the caller's JAX setting (:func:`attnlab.runtime.float64`), its arguments
    checked by ``check`` first (:func:`checked`)."""
    from attnlab.runtime import float64

    return float64(fn if check is None else checked(fn, check))


def finite_float(name: str, value) -> float:
    """``value`` as a Python float when it is a finite real number; else a ValueError."""
    real(name, value, scalar=True)
    return float(value)


def is_integer(value) -> bool:
    """Whether ``value`` is a Python or NumPy integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))

