r"""A C kernel for Riemannian gradient descent of softmax attention on an empirical risk (Dohmatob, eq. 29, Figure 2),
float32 token arithmetic on CPUs with AVX-512F (16 lanes) or AVX2 and FMA (8 lanes) (used by
:func:`attnlab.dohmatob.rgd.run_rgd` with implementation="native").

The math is that of :func:`attnlab.dohmatob.rgd._joint_value_and_grad`: K runs share the tokens of a repeat; run k
has ``a = lam X u``, ``b = X v``, ``w = softmax(a)`` over the L tokens, ``g = sigma(b)``, ``f = sum_l w_l g_l``,
``r = f - y`` and

    d/da_l = (2/n) r lam w_l (g_l - f),      d/db_l = (2/n) r w_l sigma'(b_l),      grad_u = X^T d/da,  grad_v = X^T d/db,

then ``w <- (w - step_size (g - (w.g) w)) / |.|`` for every row, in float64.

Why C: XLA on CPU runs each step as two separate token products (scores ``X [U V]^T`` and gradient ``C X``) with the
softmax in between, so the 8 MB of float32 tokens of a Figure-2 repeat (n L = 20,000 tokens, d = 100) go through
memory three times per step, and tall-skinny products of this shape run well below the float32 FMA peak.

Layout: :func:`tokens` stores the tokens sample-lane, (R, ceil(n / VL), L, d, VL): a block of VL samples (VL =
:func:`lanes`: 16 where the build targets AVX-512F, else 8), one per lane of every vector ``x[l][j]`` (coordinate j
of token l of the VL samples). Then every part of a step is vertical, with
no horizontal sum and no idle lane for any L or d:

* scores of a block: tiles of 4 tokens x 3 rows, each FMA a row coefficient ``w_r[j]`` (broadcast) times VL samples'
  coordinate, summed in float32 over chunks of 25 coordinates whose sums are then added;
* softmax over the L tokens: a max, exp2 and sums across L vectors of VL samples;
* gradient: per-lane accumulators ``G[r][j]`` (tiles of 4 rows x 3 coordinates over the L tokens of the block,
  whose 64 KB of tokens are still in cache from the scores), added into float64 lane accumulators every 8 blocks and
  summed over the lanes once per step.

The samples that pad n to a multiple of VL are zero tokens with label 0: sigma(0) = 0 for the three links, so their
residual is exactly 0 and they add nothing. The iterates, the projection and the losses are float64. One repeat runs
on one OpenMP thread from start to end, so the result does not depend on the thread count.

Denormals: the float32 arithmetic flushes results and operands below 2^-126 to zero, as XLA's CPU threads do (the
thread's own setting is put back when its repeat ends). The softmax weights of the tokens far below a sample's largest
score reach the exp2 floor 2^-125, and their products with the residual are denormal; each operation on a denormal
costs a microcode assist of about a hundred cycles, and on the preset's data enough of them occur to make the whole
step several times slower.

Cost: the kernel does the 2 x n L x 2K x d multiply-adds of a step (scores and gradient of the K runs) at about 0.4
of the core's peak of two vector FMAs per cycle (``bench/softmax_rgd.py`` measures the preset with it and reports
the rate against the FMA bound, :func:`fma_flops_per_second`); the token-major alternative (one sample's tokens per
tile) would need horizontal sums of VL lanes and leave lanes idle in the softmax for most L.

Differences from the JAX float32 path are float32 round-off (the order of the sums and a polynomial exp2 with
relative error below 2e-7), bounded in ``tests/dohmatob/test_rgd_native.py``: at Figure-2 shapes, after 40 steps, the
iterates must be within 2e-5 of the float64 path and the losses within a relative 2e-5.

Built and cached by :mod:`attnlab.native`; ``ATTNLAB_NATIVE=0`` disables it.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from attnlab import native as _build

__all__ = ["available", "unavailable_reason", "LINK_CODES", "lanes", "tokens", "run", "flops", "fma_flops_per_second"]

LINK_CODES = {"linear": 0, "quadratic": 1, "relu": 2}


def _setup(lib):
    ptr, i, dbl = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    lib.attnlab_rgd.argtypes = [i, i, i, i, i, ptr, ptr, ptr, dbl, dbl, i, i, ptr, ptr, ptr]
    lib.attnlab_rgd.restype = ctypes.c_int
    lib.attnlab_rgd_lanes.argtypes, lib.attnlab_rgd_lanes.restype = [], ctypes.c_int
    lib.attnlab_rgd_fma_flops.argtypes = [ctypes.c_long, ctypes.POINTER(ctypes.c_float)]
    lib.attnlab_rgd_fma_flops.restype = ctypes.c_double


_KERNEL = _build.Kernel(Path(__file__).with_name("_rgd_native.c"), _setup)
available = _KERNEL.available
unavailable_reason = _KERNEL.unavailable_reason


def lanes() -> int:
    """The samples per vector of this machine's build: 16 (AVX-512F) or 8 (AVX2). The two group the float32 partial
    sums of the gradient differently, so the width is part of the implementation a run records."""
    return int(_KERNEL.require().attnlab_rgd_lanes())


def flops(n: int, L: int, d: int, K: int) -> int:
    """Floating-point operations of the two token products of one step of K runs (what the FMA bound measures):
    ``2 (scores and gradient) x 2 (multiply and add) x n L x 2K x d``."""
    return 4 * n * L * 2 * K * d


def fma_flops_per_second(n_iter: int = 10_000_000) -> float:
    """The CPU's float32 multiply-add bound at the kernel's vector width and thread count: floating-point operations
    per second of a tight loop of independent vector FMAs on every OpenMP thread (the bound of
    ``bench/softmax_rgd.py``)."""
    lib = _KERNEL.require()
    sink = ctypes.c_float()
    return float(lib.attnlab_rgd_fma_flops(int(n_iter), ctypes.byref(sink)))


def tokens(X) -> np.ndarray:
    """Tokens ``X`` (R, n, L, d) as the kernel reads them: float32, C-contiguous, in the sample-lane layout
    (R, ceil(n / VL), L, d, VL) with VL = :func:`lanes`, where block b holds samples VL b..VL b + VL - 1, one per lane;
    the samples beyond n are zero."""
    X = np.asarray(X, np.float32)
    R, n, L, d = X.shape
    vl = lanes()
    nb = -(-n // vl)
    if n % vl:
        X = np.concatenate([X, np.zeros((R, vl * nb - n, L, d), np.float32)], axis=1)
    return np.ascontiguousarray(X.reshape(R, nb, vl, L, d).transpose(0, 1, 3, 4, 2))


def run(Xp, Y, links, W0, lam: float, step_size: float, n_logs: int, log_every: int):
    """``n_logs * log_every`` RGD steps of K runs per repeat.

    ``Xp`` (R, ceil(n / VL), L, d, VL) from :func:`tokens`; ``Y`` (R, K, n) labels; ``links`` K names from
    :data:`LINK_CODES`; ``W0`` (R, 2K, d) float64 rows ``[u_1..u_K, v_1..v_K]``. Returns the iterates after every
    ``log_every`` steps, (R, n_logs, 2K, d) float64, and the losses ``n^-1 sum_i r_i^2`` at them, (R, n_logs, K).
    ``n_logs = 1, log_every = 0`` gives the losses at ``W0``.
    """
    lib = _KERNEL.require()
    vl = lanes()
    if Xp.ndim != 5 or Xp.shape[-1] != vl or Xp.dtype != np.float32 or not Xp.flags.c_contiguous:
        raise ValueError("tokens must come from rgd_native.tokens")
    R, nb, L, d, _ = Xp.shape
    W = np.array(W0, np.float64, order="C", copy=True)
    K = len(links)
    n = np.shape(Y)[-1]
    if n_logs < 1 or log_every < 0 or (log_every == 0 and n_logs != 1):
        raise ValueError(f"need n_logs >= 1 and log_every >= 1 (or n_logs = 1, log_every = 0), got {n_logs}, "
                         f"{log_every}")
    if W.shape != (R, 2 * K, d) or np.shape(Y) != (R, K, n) or -(-n // vl) != nb:
        raise ValueError(f"inconsistent shapes: tokens {Xp.shape}, labels {np.shape(Y)}, parameters {W.shape}, "
                         f"{K} links")
    codes = np.array([LINK_CODES[link] for link in links], np.int32)
    Yp = np.zeros((R, K, vl * nb), np.float32)
    Yp[..., :n] = Y
    Wlog = np.empty((R, n_logs, 2 * K, d))
    loss = np.empty((R, n_logs, K))
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    status = lib.attnlab_rgd(R, n, L, d, K, p(Xp), p(Yp), p(codes), float(lam), float(step_size), n_logs, log_every,
                             p(W), p(Wlog), p(loss))
    if status != 0:
        raise RuntimeError(f"native RGD kernel failed (status {status})")
    return Wlog, loss
