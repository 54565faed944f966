r"""Riemannian gradient descent on the empirical risk of softmax attention (Dohmatob, NeurIPS 2025, eq. 29; Figure 2).

One fixed training sample ``(X_i, y_i)_{i <= n}`` in R^d (:func:`attnlab.dohmatob.data.sample_dohmatob`) and the loss
``R_hat(u, v) = n^-1 sum_i (f(X_i; u, v) - y_i)^2``. Each step is the projected update of Marion's PGD, with step
size ``s`` (``step_size``)::

    u <- (u - s P_u grad_u R_hat) / |.|,     v <- (v - s P_v grad_v R_hat) / |.|,     P_x = I - x x^T,

simultaneous in (u, v). Runs are vmapped over repeats (each with its own teacher and data) and, inside a repeat, over
starting points sharing that repeat's data (so the token matrix is read once per step for all of them); steps are a
``lax.scan``, chunked into a few compiled segments for progress reports.

Test risk: ``E(f - y)^2 - eps^2`` estimated on held-out samples drawn in the frame ``(u*, v*, e1, e2)`` of the current
iterate (:func:`attnlab.dohmatob.data.sample_dohmatob_in_frame`), one fixed draw of frame coordinates per repeat reused at
every logged step (common random numbers). At each step this is exactly a fresh test sample of the same law as a
fixed test set in R^d (the ``dohmatob-rgd`` preset evaluates an actual R^d test set as a cross-check).

Two implementations of the steps, one chosen per call (:func:`resolve_implementation`): ``"jax"``, a compiled
``lax.scan`` (any dtype, any link, any backend), and ``"native"``, the C kernel of :mod:`attnlab.dohmatob.rgd_native`
(float32 tokens, named links, CPU with AVX2 and FMA), which reads each token once per step for the scores and the
gradient together; ``bench/softmax_rgd.py`` measures both.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.dohmatob import rgd_native
from attnlab.dohmatob.model import get_link, softmax_weights
from attnlab.errors import AttnlabError
from attnlab.slr.overlaps import DohmatobOverlaps, frame_coordinates

_FULL = jax.lax.Precision.HIGHEST  # float32 products in float32 (a GPU's default for them is TF32, ~1e-3 relative)

__all__ = ["IMPLEMENTATIONS", "Implementation", "empirical_loss", "rgd_step", "RGDLog", "resolve_implementation",
           "run_rgd", "run_rgd_reference", "init_with_overlap", "frame_predict", "frame_predict_planes"]

Implementation = Literal["auto", "native", "jax"]
IMPLEMENTATIONS: tuple[str, ...] = ("auto", "native", "jax")


def empirical_loss(u, v, X, y, lam, link="linear"):
    """``n^-1 sum_i (f(X_i; u, v) - y_i)^2`` with ``f = sum_l softmax(lam X u)_l sigma(X_l . v)``."""
    sigma = get_link(link)
    f = jnp.sum(softmax_weights(lam * (X @ u)) * sigma(X @ v), axis=-1)
    return jnp.mean((f - y) ** 2)


def _project_step(x, g, step_size):
    x_new = x - step_size * (g - (x @ g) * x)
    return x_new / jnp.linalg.norm(x_new)


def rgd_step(u, v, X, y, lam, step_size, link="linear"):
    """One simultaneous projected-gradient step (eq. 29) on the empirical loss:
    ``u <- (u - s P_u grad_u R_hat) / |.|``, ``v <- (v - s P_v grad_v R_hat) / |.|``, ``s = step_size``."""
    gu, gv = jax.grad(empirical_loss, argnums=(0, 1))(u, v, X, y, lam, link)
    return _project_step(u, gu, step_size), _project_step(v, gv, step_size)


class RGDLog(NamedTuple):
    """Logged iterates ``u``, ``v`` (repeats, n_logs + 1, K, d) and the training loss (repeats, n_logs + 1, K)."""

    u: jax.Array
    v: jax.Array
    train_loss: jax.Array


def _joint_losses(U, V, X, Y, lam, links):
    """Losses of K runs sharing the tokens ``X`` (n, L, d): ``U, V`` (K, d), labels ``Y`` (K, n), one link per run.

    A single product ``X @ [U; V]^T`` serves all K runs (autodiff reference for :func:`_joint_value_and_grad`).
    """
    K = U.shape[0]
    A = X @ jnp.concatenate([U, V], axis=0).T  # (n, L, 2K)
    w = softmax_weights(lam * A[..., :K], axis=-2)
    g = jnp.stack([get_link(links[k])(A[..., K + k]) for k in range(K)], axis=-1)
    f = jnp.sum(w * g, axis=-2)  # (n, K)
    return jnp.mean((f - Y.T) ** 2, axis=0)


def _joint_value_and_grad(W, XL, Y, lam, links):
    r"""Losses and Euclidean gradients of K runs sharing the tokens, in closed form (two matmuls over the tokens).

    ``W`` (2K, d) holds the rows ``[u_1..u_K, v_1..v_K]``; ``XL`` (L n, d) the tokens flattened token-major (row
    ``l n + i`` is token l of sample i), ``Y`` (K, n) the labels. The scores are computed in the "tall" orientation
    ``XL @ W^T`` (L n, 2K), the gradient as ``C @ XL``: one copy of the tokens serves both products. The scores are then
    turned run-major, ``(2K, L, n)``: the softmax over the L tokens reduces over the middle axis, elementwise over
    contiguous rows of n samples. With ``a = X u``, ``b = X v`` (L, n), ``w = softmax(lam a)`` over the L tokens,
    ``g = sigma(b)``, ``f = sum_l w_l g_l`` and ``r = f - y``, the loss ``n^-1 sum_i r_i^2`` has

        d/da_li = (2/n) r_i lam w_li (g_li - f_i),        d/db_li = (2/n) r_i w_li sigma'(b_li),

    so ``grad_u = X^T (d/da)`` and ``grad_v = X^T (d/db)`` (checked against ``jax.grad`` in the tests). ``sigma'`` is
    taken by ``jax.jvp``, so any elementwise link works. The token products and this per-token arithmetic run in the
    dtype of ``XL``; the parameters come in and the gradients go out in the dtype of ``W``. Returns the losses (K,)
    and the gradients (2K, d).
    """
    n, K = Y.shape[1], Y.shape[0]
    L = XL.shape[0] // n
    dt = XL.dtype
    A = jnp.matmul(XL, W.astype(dt).T, precision=_FULL).T.reshape(2 * K, L, n)  # no TF32 on GPUs
    a = lam * A[:K]
    w = jnp.exp(a - jnp.max(a, axis=1, keepdims=True))
    w = w / jnp.sum(w, axis=1, keepdims=True)
    g, dg = [], []
    for k in range(K):
        gk, dgk = jax.jvp(get_link(links[k]), (A[K + k],), (jnp.ones_like(A[K + k]),))
        g.append(gk)
        dg.append(dgk)
    g, dg = jnp.stack(g), jnp.stack(dg)
    f = jnp.sum(w * g, axis=1)  # (K, n)
    r = f - Y.astype(dt)
    c = (2.0 / n) * r[:, None] * w  # (K, L, n)
    C = jnp.concatenate([lam * c * (g - f[:, None]), c * dg]).reshape(2 * K, L * n)
    G = jnp.matmul(C, XL, precision=_FULL).astype(W.dtype)  # (2K, d)
    return jnp.mean(r.astype(W.dtype) ** 2, axis=-1), G


def _project_rows(W, G, step_size):
    """``w <- (w - step_size (g - (w.g) w)) / |.|`` for every row."""
    W_new = W - step_size * (G - jnp.sum(W * G, axis=-1, keepdims=True) * W)
    return W_new / jnp.linalg.norm(W_new, axis=-1, keepdims=True)


@functools.lru_cache(maxsize=32)
def _segment_fn(links: tuple, log_every: int, n_logs: int):
    def one_repeat(W, XL, Y, lam, step_size):
        def step(W, _):
            _, G = _joint_value_and_grad(W, XL, Y, lam, links)
            return _project_rows(W, G, step_size), None

        def log(W, _):
            W, _ = jax.lax.scan(step, W, None, length=log_every)
            return W, (W, _joint_value_and_grad(W, XL, Y, lam, links)[0])

        return jax.lax.scan(log, W, None, length=n_logs)

    # on a CPU the repeats run one after the other (a repeat's tokens stay in cache for the whole segment of steps);
    # on a GPU they run together (vmapped), which fills the device
    if jax.default_backend() == "cpu":
        return jax.jit(lambda W, XL, Y, lam, step_size: jax.lax.map(lambda a: one_repeat(*a, lam, step_size),
                                                                    (W, XL, Y)))
    return jax.jit(lambda W, XL, Y, lam, step_size: jax.vmap(lambda *a: one_repeat(*a, lam, step_size))(W, XL, Y))


def _native_obstacle(links, token_dtype) -> str | None:
    """Why the C kernel cannot run these steps here, or None when it can."""
    if jnp.dtype(token_dtype).name != "float32":
        return f"it needs float32 tokens (token_dtype is {jnp.dtype(token_dtype).name})"
    if not all(isinstance(link, str) and link in rgd_native.LINK_CODES for link in links):
        return f"it needs named links among {sorted(rgd_native.LINK_CODES)}"
    if jax.default_backend() != "cpu":
        return f"it runs on the CPU backend only (JAX's backend is {jax.default_backend()})"
    if not rgd_native.available():
        return rgd_native.unavailable_reason() or "the C kernel is unavailable"
    return None


def resolve_implementation(implementation: str, links, token_dtype) -> str:
    """The implementation that runs RGD steps of ``links`` with ``token_dtype`` tokens: ``"native"`` (the C kernel)
    or ``"jax"``. ``"auto"`` is native where the kernel applies (float32 tokens, named links, CPU backend) and is
    available (compiled, not disabled by ``ATTNLAB_NATIVE=0``), else jax; ``"native"`` raises
    :class:`~attnlab.errors.AttnlabError` (one line, the reason) where it cannot run."""
    if implementation not in IMPLEMENTATIONS:
        raise AttnlabError(f"unknown implementation {implementation!r}: expected one of {', '.join(IMPLEMENTATIONS)}")
    if implementation == "jax":
        return "jax"
    obstacle = _native_obstacle(tuple(links), token_dtype)
    if implementation == "native" and obstacle is not None:
        raise AttnlabError(f"implementation='native' cannot run: {obstacle}")
    return "native" if obstacle is None else "jax"


def run_rgd(u0, v0, X, Y, lam, step_size, n_steps: int, log_every: int, links=("linear",),
            progress: Callable | None = None, n_segments: int = 10, token_dtype=None,
            implementation: str = "auto") -> RGDLog:
    """RGD of K runs per repeat: ``u0, v0`` (repeats, K, d), data ``X`` (repeats, n, L, d) shared by the K runs of a
    repeat, labels ``Y`` (repeats, K, n), ``links`` a tuple of K links (names or callables).

    ``token_dtype`` (default: the dtype of ``X``) is the precision of the two token products per step and of the
    per-token arithmetic between them (softmax, link, residual); the iterates, their projection and the logged
    losses stay in the dtype of ``u0``. float32 halves the bytes of tokens read per step and doubles the lanes per
    vector; its effect on the iterates is bounded in ``tests/dohmatob/test_rgd.py``.

    ``implementation``: ``"jax"`` runs the steps as a compiled ``lax.scan``; ``"native"`` runs them in the C kernel
    of :mod:`attnlab.dohmatob.rgd_native` (float32 tokens, named links, CPU with AVX2 and FMA: scores, softmax and
    gradient in one pass over the tokens of each block while they are in cache, where XLA reads the tokens from
    memory for each of its two products; measured by ``bench/softmax_rgd.py``); ``"auto"`` is resolved by
    :func:`resolve_implementation`.

    Returns the iterates at steps ``0, log_every, ..., n_steps`` on axis 1: ``u, v`` (repeats, n_logs + 1, K, d) and
    the training loss (repeats, n_logs + 1, K).
    """
    links = tuple(links)
    for link in links:
        get_link(link)
    if len(links) != u0.shape[1]:
        raise ValueError(f"{len(links)} links for {u0.shape[1]} runs per repeat")
    if n_steps % log_every:
        raise ValueError(f"log_every ({log_every}) must divide n_steps ({n_steps})")
    n_logs = n_steps // log_every
    n_segments = max(1, min(n_segments, n_logs))
    while n_logs % n_segments:
        n_segments -= 1
    token_dtype = jnp.dtype(token_dtype or X.dtype)
    native = resolve_implementation(implementation, links, token_dtype) == "native"
    K = u0.shape[1]
    if native:
        W = jnp.concatenate([u0, v0], axis=1)  # (R, 2K, d)
        Xp, Yn, Wn = rgd_native.tokens(X), np.asarray(Y), np.asarray(W, np.float64)
        loss0 = jnp.asarray(rgd_native.run(Xp, Yn, links, Wn, float(lam), float(step_size), 1, 0)[1][:, 0], u0.dtype)
    else:
        W, loss0, XL = _start(u0, v0, X, Y, lam, links, token_dtype)
        seg = _segment_fn(links, log_every, n_logs // n_segments)
    us, vs, ls = [u0[:, None]], [v0[:, None]], [loss0[:, None]]
    for i in range(n_segments):
        if native:
            lw, ll = rgd_native.run(Xp, Yn, links, Wn, float(lam), float(step_size), n_logs // n_segments,
                                    log_every)
            Wn = lw[:, -1]
            lw, ll = jnp.asarray(lw, W.dtype), jnp.asarray(ll, loss0.dtype)
        else:
            W, (lw, ll) = seg(W, XL, Y, lam, step_size)
        us.append(lw[:, :, :K])
        vs.append(lw[:, :, K:])
        ls.append(ll)
        if progress is not None:
            progress(i + 1, n_segments)
    return RGDLog(jnp.concatenate(us, 1), jnp.concatenate(vs, 1), jnp.concatenate(ls, 1))


@functools.partial(jax.jit, static_argnames=("links", "token_dtype"))
def _start(u0, v0, X, Y, lam, links, token_dtype):
    """The rows ``W = [u0; v0]`` (R, 2K, d), the losses at step 0 (R, K) and the tokens in ``token_dtype``, token-major
    (R, L n, d), in one program."""
    R, n, L, d = X.shape
    loss0 = jax.vmap(_joint_losses, in_axes=(0, 0, 0, 0, None, None))(u0, v0, X, Y, lam, links)
    XL = jnp.swapaxes(X.astype(token_dtype), 1, 2).reshape(R, L * n, d)
    return jnp.concatenate([u0, v0], axis=1), loss0, XL


_rgd_step_jit = jax.jit(rgd_step, static_argnames=("link",))


def run_rgd_reference(u0, v0, X, y, lam, step_size, n_steps: int, link="linear"):
    """Plain reference for the benchmark: one run, a Python loop over steps of a jitted step (compiled once per
    link and shape; the data are arguments, not constants baked into the program)."""
    u, v = u0, v0
    for _ in range(n_steps):
        u, v = _rgd_step_jit(u, v, X, y, lam, step_size, link=link)
    return jax.block_until_ready((u, v))


def init_with_overlap(key, u_star, mu0, d: int):
    """``u = mu0 u* + sqrt(1 - mu0^2) w`` with w uniform on the unit sphere of the complement of u*."""
    w = jax.random.normal(key, (d,))
    w = w - (w @ u_star) * u_star
    w = w / jnp.linalg.norm(w)
    return mu0 * u_star + jnp.sqrt(1.0 - mu0**2) * w


def frame_predict(Z, o: DohmatobOverlaps, lam, link="linear"):
    """Predictions ``f = sum_l softmax(lam Z u4)_l sigma(Z_l . v4)`` on frame coordinates ``Z`` (n, L, 4) of the
    (u, v) with overlaps ``o`` (u4, v4 from :func:`attnlab.slr.overlaps.frame_coordinates`)."""
    u4, v4 = frame_coordinates(o.to_marion())
    return jnp.sum(softmax_weights(lam * (Z @ u4)) * get_link(link)(Z @ v4), axis=-1)


def frame_predict_planes(Zs, o: DohmatobOverlaps, lam, link="linear"):
    """:func:`frame_predict` on the frame coordinates given as four planes ``Zs[k] = Z[..., k]`` (n, L), the scores
    ``a = lam sum_k u_k Zs[k]`` elementwise. Splitting Z into planes once and evaluating many (u, v) on them (a
    held-out set at every logged iterate) replaces the (n, L, 4) products by elementwise multiply-adds on contiguous
    planes. The softmax takes one exponential per token: ``f = sum_l e_l g_l / sum_l e_l``, ``e = exp(a - max_l a)``
    (every e <= 1 and the largest is 1, so the ratio is finite for any finite scores)."""
    u4, v4 = frame_coordinates(o.to_marion())
    a = lam * (Zs[0] * u4[0] + Zs[1] * u4[1] + Zs[2] * u4[2] + Zs[3] * u4[3])
    b = Zs[0] * v4[0] + Zs[1] * v4[1] + Zs[2] * v4[2] + Zs[3] * v4[3]
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return jnp.sum(e * get_link(link)(b), axis=-1) / jnp.sum(e, axis=-1)
