r"""A C kernel for Riemannian gradient descent of softmax attention on an empirical risk (Dohmatob, spec B6 eq. 29, B7),
float32 token arithmetic on CPUs with AVX2 and FMA (used by :func:`attnlab.slr.empirical.run_rgd`).

The math is that of :func:`attnlab.slr.empirical._joint_value_and_grad`: K runs share the tokens of a repeat; run k
has ``a = lam X u``, ``b = X v``, ``w = softmax(a)`` over the L tokens, ``g = sigma(b)``, ``f = sum_l w_l g_l``,
``r = f - y`` and

    d/da_l = (2/n) r lam w_l (g_l - f),      d/db_l = (2/n) r w_l sigma'(b_l),      grad_u = X^T d/da,  grad_v = X^T d/db,

then ``w <- (w - s (g - (w.g) w)) / |.|`` for every row, in float64.

Why C: XLA on CPU runs each step as two separate token products (scores ``X [U V]^T`` and gradient ``C X``) with the
softmax in between, so the 8 MB of float32 tokens of a Figure-2 repeat (n L = 20,000 tokens, d = 100) go through
memory three times per step, and the tall-skinny products run at about 26 GFLOP/s on the 2-core Zen 1 machine (68 is
its float32 peak). Here a sample's 20 tokens are loaded once per step (the tokens of the sample 3 ahead are
prefetched meanwhile): their scores are formed in registers (4 tokens x 3 rows per tile), their softmax and residuals
in 8-lane vectors over the tokens (two runs interleaved), and the gradient of a block of 4 samples is accumulated
while their tokens are still in cache (3 rows x 32 coordinates per tile). A last chunk of at most 4 coordinates
(d = 100) takes 128-bit products, which cost half a 256-bit FMA on Zen 1. Scores and per-token arithmetic are
float32 (as ``token_dtype = float32`` in the JAX path); every 8 blocks the float32 gradient is added into a float64
accumulator (the JAX path sums all n L terms in float32), and the iterates, the projection and the losses are
float64. One repeat runs on one OpenMP thread from start to end, so the result does not depend on the thread count.

Measured at Figure-2 size (10 repeats, K = 6 runs, 2 threads, Zen 1 at 2 GHz, idle): 1.98-2.2 ms per repeat-step,
about 64-70% of the float32 FMA peak for the 2 x 20,000 x 12 x 100 multiply-adds of a step, against 6.3 ms for the
XLA float32 path; the `dohmatob-rgd` preset's 15,000 repeat-steps take 32-34 s.

Differences from the JAX float32 path are float32 round-off (the order of the sums and a polynomial exp2 with
relative error below 2e-7), bounded in ``tests/slr/test_rgd_native.py``.

Built and cached by :mod:`attnlab.native`; ``ATTNLAB_NATIVE=0`` disables it.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from attnlab import native as _build

__all__ = ["available", "unavailable_reason", "LINK_CODES", "run"]

LINK_CODES = {"linear": 0, "quadratic": 1, "relu": 2}
MAX_L = 32


def _setup(lib):
    ptr, i, dbl = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
    lib.attnlab_rgd.argtypes = [i, i, i, i, i, i, ptr, ptr, ptr, dbl, dbl, i, i, ptr, ptr, ptr]
    lib.attnlab_rgd.restype = ctypes.c_int


_KERNEL = _build.Kernel(Path(__file__).with_name("_rgd_native.c"), _setup)
available = _KERNEL.available
unavailable_reason = _KERNEL.unavailable_reason


def tokens(X) -> np.ndarray:
    """Tokens ``X`` (R, n, L, d) as the kernel reads them: float32, C-contiguous, d zero-padded to a multiple of 8."""
    X = np.asarray(X)
    d = X.shape[-1]
    dp = -(-d // 8) * 8
    out = np.zeros(X.shape[:-1] + (dp,), np.float32)
    out[..., :d] = X
    return out


def run(Xp, Y, links, W0, lam: float, s: float, n_logs: int, log_every: int):
    """``n_logs * log_every`` RGD steps of K runs per repeat.

    ``Xp`` (R, n, L, dp) from :func:`tokens`; ``Y`` (R, K, n) labels; ``links`` K names from :data:`LINK_CODES`;
    ``W0`` (R, 2K, d) float64 rows ``[u_1..u_K, v_1..v_K]``. Returns the iterates after every ``log_every`` steps,
    (R, n_logs, 2K, d) float64, and the losses ``n^-1 sum_i r_i^2`` at them, (R, n_logs, K). ``n_logs = 1,
    log_every = 0`` gives the losses at ``W0``.
    """
    lib = _KERNEL.require()
    R, n, L, dp = Xp.shape
    W = np.array(W0, np.float64, order="C", copy=True)
    d, K = W.shape[-1], len(links)
    if Xp.dtype != np.float32 or not Xp.flags.c_contiguous or dp % 8 or dp < d:
        raise ValueError("tokens must come from rgd_native.tokens")
    if n_logs < 1 or log_every < 0 or (log_every == 0 and n_logs != 1):
        raise ValueError(f"need n_logs >= 1 and log_every >= 1 (or n_logs = 1, log_every = 0), got {n_logs}, "
                         f"{log_every}")
    if W.shape != (R, 2 * K, d) or np.shape(Y) != (R, K, n) or not 1 <= L <= MAX_L:
        raise ValueError(f"inconsistent shapes: tokens {Xp.shape}, labels {np.shape(Y)}, parameters {W.shape}, "
                         f"{K} links (need L <= {MAX_L})")
    codes = np.array([LINK_CODES[link] for link in links], np.int32)
    Y = np.ascontiguousarray(Y, np.float32)
    Wlog = np.empty((R, n_logs, 2 * K, d))
    loss = np.empty((R, n_logs, K))
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    status = lib.attnlab_rgd(R, n, L, d, dp, K, p(Xp), p(Y), p(codes), float(lam), float(s), n_logs, log_every,
                             p(W), p(Wlog), p(loss))
    if status != 0:
        raise RuntimeError(f"native RGD kernel failed (status {status})")
    return Wlog, loss
