r"""A C kernel for the float32 particle step on CPUs with AVX2 and FMA: symmetric attention sums, one exponential per
unordered pair (used by :func:`attnlab.bruno.attention.attention` through ``method="auto"`` or ``"native"``).

Why C: on CPU, XLA cannot keep a score in registers from its exponential to its weighted sum over keys. The blocked
JAX kernels write each block of scores through memory; written as one loop over keys XLA makes one fusion per
accumulator, recomputing the exponentials, and as a variadic reduction it does not vectorise. A C loop keeps each
score in registers and, S being symmetric, evaluates one exponential per unordered pair (below);
``bench/particles.py`` measures it against the JAX kernels.

The math (Bruno et al.'s flows all have S = Q^T K symmetric: Q = K = I, or Q^T K = V = S positive definite). With
q_i = beta log2(e) S x_i the base-2 scores t_ij = <q_i, x_j> are symmetric, and with c_i = t_ii / 2

    t_ij - c_i - c_j <= 0      when S is positive semi-definite (Cauchy-Schwarz in the S inner product),

so g_ij = 2^(t_ij - c_i - c_j) lies in [0, 1], is symmetric, and g_ii = 1. One exponential per unordered pair serves
both rows: with u_j = 2^(c_j - C) [V x_j, 1] (C = max_j c_j),

    acc_i = sum_j g_ij u_j = sum_j 2^(t_ij - m_i) [V x_j, 1],      m_i = c_i + C (base 2),

which is the (m, acc) pair of the blocked kernels, so SA, USA and log Z follow as before. The caller
(:mod:`attnlab.bruno.attention`) checks the result (finite, every l_i >= 2^-60) and that S is symmetric and the
scores cannot overflow, and otherwise falls back to the JAX kernels.

The C source (``_attention_native.c``) is built and cached by :mod:`attnlab.native` (on first use, ``-O3 -march=native
-fopenmp``). On a CPU with AVX-512F the build is the 16-lane variant (two rows by 32 columns per inner step, tokens
padded to a multiple of 32), elsewhere the AVX2 one (8 lanes, padding 16); :func:`vector_bits` says which. Without a
compiler, AVX2 or FMA, or with ``ATTNLAB_NATIVE=0``, :func:`available` is False and every caller uses the JAX kernels;
:func:`unavailable_reason` says why.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import numpy as np

from attnlab import native as _build

__all__ = ["available", "unavailable_reason", "symmetric_sums", "symmetric_sums_xla", "xla_target", "MAX_D",
           "vector_bits", "exp2_per_second"]

MAX_D = 8


def _setup(lib):
    ptr = ctypes.c_void_p
    for d in range(2, MAX_D + 1):
        fn = getattr(lib, f"attnlab_sym_d{d}")
        fn.argtypes = [ctypes.c_int, ptr, ptr, ptr, ptr, ptr]
        fn.restype = ctypes.c_int
    for name in ("attnlab_sym_pad", "attnlab_sym_vector_bits", "attnlab_sym_has_ffi"):
        getattr(lib, name).argtypes, getattr(lib, name).restype = [], ctypes.c_int
    lib.attnlab_exp2_per_second.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_float)]
    lib.attnlab_exp2_per_second.restype = ctypes.c_double


def _ffi_header() -> list[tuple[Path, Path]]:
    """XLA's FFI C header, found through JAX (``jax.ffi.include_dir()``), or none: the kernel is then built without
    its FFI handler and :func:`xla_target` is None."""
    import jax

    root = Path(jax.ffi.include_dir())
    rel = Path("xla/ffi/api/c_api.h")
    return [(root, rel)] if (root / rel).is_file() else []


_KERNEL = _build.Kernel(Path(__file__).with_name("_attention_native.c"), _setup, include=_ffi_header)
XLA_TARGET = "attnlab_bruno_symmetric_sums"
available = _KERNEL.available
unavailable_reason = _KERNEL.unavailable_reason


def _soa(a, n_pad: int, fill: float = 0.0):
    """(N, k) or (N,) float32 -> C-contiguous (k, n_pad) or (n_pad,), padded with ``fill``."""
    a = np.asarray(a, np.float32)
    out = np.full(a.shape[1:][::-1] + (n_pad,), fill, np.float32)
    out[..., :a.shape[0]] = a.T
    return out


def symmetric_sums(q2, c, x, u):
    """``acc_i = sum_j 2^(<q2_i, x_j> - c_i - c_j) u_j`` for all i (float32; the derivation:
    :mod:`attnlab.bruno.native`).

    ``q2``, ``x`` (N, d) with 2 <= d <= MAX_D, ``c`` (N,), ``u`` (N, d + 1); returns (N, d + 1). Correct only when
    ``<q2_i, x_j>`` is symmetric in (i, j) and ``<q2_i, x_j> - c_i - c_j < 127`` (the caller checks both).
    """
    lib = _KERNEL.require()
    n, d = np.shape(x)
    if not 2 <= d <= MAX_D or np.shape(u) != (n, d + 1):
        raise ValueError(f"need 2 <= d <= {MAX_D} and u of shape (N, d + 1); got x {np.shape(x)}, u {np.shape(u)}")
    pad = lib.attnlab_sym_pad()
    n_pad = -(-n // pad) * pad
    qs, xs, us = _soa(q2, n_pad), _soa(x, n_pad), _soa(u, n_pad)
    cs = _soa(c, n_pad, 1e30)  # padded tokens: every score with them is clamped to 2^-125, times u = 0
    out = np.empty((d + 1, n_pad), np.float32)
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    status = getattr(lib, f"attnlab_sym_d{d}")(n_pad, p(qs), p(cs), p(xs), p(us), p(out))
    if status != 0:
        raise RuntimeError(f"native kernel failed (status {status})")
    return out[:, :n].T.copy()


@functools.cache
def xla_target() -> str | None:
    """The name of the kernel's XLA FFI handler (``attnlab_sym_ffi``), registered with JAX for the CPU on first call
    (``jax.ffi.register_ffi_target``), or None where the kernel or its FFI handler is unavailable (built without
    XLA's FFI header): callers then use a ``jax.pure_callback`` to :func:`symmetric_sums`."""
    lib = _KERNEL.lib()
    if lib is None or not lib.attnlab_sym_has_ffi():
        return None
    import jax

    jax.ffi.register_ffi_target(XLA_TARGET, jax.ffi.pycapsule(lib.attnlab_sym_ffi), platform="cpu")
    return XLA_TARGET


def symmetric_sums_xla(q2, c, x, u):
    """:func:`symmetric_sums` inside a compiled JAX program (traceable, vmapped sequentially): the inputs laid out
    as the kernel reads them (structure of arrays, padded as :func:`symmetric_sums` pads them) and the kernel called
    by XLA through its FFI handler (:func:`xla_target`, which must not be None), with no Python callback and no copy
    to the host: the same numbers as :func:`symmetric_sums`. (A ``jax.pure_callback`` hands its inputs to Python as
    arrays that XLA's thread pool must copy; with a pool of one thread, busy running the callback's program, that
    copy never ran and the program hung.)"""
    import jax
    import jax.numpy as jnp

    target = xla_target()
    if target is None:
        raise RuntimeError(f"the kernel's XLA handler is unavailable: {unavailable_reason() or 'built without it'}")
    n, d = x.shape
    pad = _KERNEL.require().attnlab_sym_pad()
    n_pad = -(-n // pad) * pad
    soa = lambda a, fill=0.0: jnp.pad(a.astype(jnp.float32).T, [(0, 0)] * (a.ndim - 1) + [(0, n_pad - n)],  # noqa: E731
                                      constant_values=fill)
    out = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct((d + 1, n_pad), jnp.float32), vmap_method="sequential")(
        soa(q2), soa(c, 1e30), soa(x), soa(u))
    return out[:, :n].T


def vector_bits() -> int | None:
    """The vector width the kernel was built for on this CPU: 512 (AVX-512F), 256 (AVX2), None if unavailable. The two
    variants sum in a different order, so their float32 results differ in the last bits; the width is part of the
    implementation a run records (:func:`attnlab.bruno.presets.implementations`)."""
    lib = _KERNEL.lib()
    return None if lib is None else int(lib.attnlab_sym_vector_bits())


def exp2_per_second(n_iter: int = 2_000_000) -> float:
    """The CPU's exponential throughput at the kernel's vector width and thread count: exponentials per second of a
    tight loop of the kernel's own exp2 polynomial on every OpenMP thread (the bound of ``bench/particles.py``)."""
    lib = _KERNEL.require()
    sink = ctypes.c_float()
    return float(lib.attnlab_exp2_per_second(int(n_iter), ctypes.byref(sink)))
