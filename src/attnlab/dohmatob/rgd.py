r"""Riemannian gradient descent on the empirical risk of softmax attention (Dohmatob, spec B6 eq. 29, B7).

One fixed training sample ``(X_i, y_i)_{i <= n}`` in R^d (:func:`attnlab.slr.data.sample_dohmatob`) and the loss
``R_hat(u, v) = n^-1 sum_i (f(X_i; u, v) - y_i)^2``. Each step is the projected update of Marion's PGD::

    u <- (u - s P_u grad_u R_hat) / |.|,     v <- (v - s P_v grad_v R_hat) / |.|,     P_x = I - x x^T,

simultaneous in (u, v). Runs are vmapped over repeats (each with its own teacher and data) and, inside a repeat, over
starting points sharing that repeat's data (so the token matrix is read once per step for all of them); steps are a
``lax.scan``, chunked into a few compiled segments for progress reports.

Test risk: ``E(f - y)^2 - eps^2`` estimated on held-out samples drawn in the frame ``(u*, v*, e1, e2)`` of the current
iterate (:func:`attnlab.slr.data.sample_dohmatob_in_frame`), one fixed draw of frame coordinates per repeat reused at
every logged step (common random numbers). At each step this is exactly a fresh test sample of the same law as a
fixed test set in R^d; :func:`rd_test_risk` evaluates an actual R^d test set as a cross-check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.dohmatob import rgd_native
from attnlab.dohmatob.model import get_link, softmax_weights

__all__ = ["empirical_loss", "rgd_step", "RGDLog", "run_rgd", "run_rgd_reference", "init_with_overlap",
           "frame_coordinates_jnp", "frame_predict", "frame_predict_planes", "overlaps5"]


def empirical_loss(u, v, X, y, lam, link="linear"):
    """``n^-1 sum_i (f(X_i; u, v) - y_i)^2`` with ``f = sum_l softmax(lam X u)_l sigma(X_l . v)``."""
    sigma = get_link(link)
    f = jnp.sum(softmax_weights(lam * (X @ u)) * sigma(X @ v), axis=-1)
    return jnp.mean((f - y) ** 2)


def _project_step(x, g, s):
    x_new = x - s * (g - (x @ g) * x)
    return x_new / jnp.linalg.norm(x_new)


def rgd_step(u, v, X, y, lam, s, link="linear"):
    """One simultaneous projected-gradient step on the empirical loss."""
    gu, gv = jax.grad(empirical_loss, argnums=(0, 1))(u, v, X, y, lam, link)
    return _project_step(u, gu, s), _project_step(v, gv, s)


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
    A = (XL @ W.astype(dt).T).T.reshape(2 * K, L, n)
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
    G = (C @ XL).astype(W.dtype)  # (2K, d)
    return jnp.mean(r.astype(W.dtype) ** 2, axis=-1), G


def _project_rows(W, G, s):
    """``w <- (w - s (g - (w.g) w)) / |.|`` for every row."""
    W_new = W - s * (G - jnp.sum(W * G, axis=-1, keepdims=True) * W)
    return W_new / jnp.linalg.norm(W_new, axis=-1, keepdims=True)


@functools.lru_cache(maxsize=32)
def _segment_fn(links: tuple, log_every: int, n_logs: int):
    def one_repeat(W, XL, Y, lam, s):
        def step(W, _):
            _, G = _joint_value_and_grad(W, XL, Y, lam, links)
            return _project_rows(W, G, s), None

        def log(W, _):
            W, _ = jax.lax.scan(step, W, None, length=log_every)
            return W, (W, _joint_value_and_grad(W, XL, Y, lam, links)[0])

        return jax.lax.scan(log, W, None, length=n_logs)

    # repeats one after the other (not vmapped): a repeat's tokens stay in cache for the whole segment of steps
    return jax.jit(lambda W, XL, Y, lam, s: jax.lax.map(lambda a: one_repeat(*a, lam, s), (W, XL, Y)))


def _native_applies(links, token_dtype) -> bool:
    return (jnp.dtype(token_dtype).name == "float32" and jax.default_backend() == "cpu"
            and all(isinstance(link, str) and link in rgd_native.LINK_CODES for link in links)
            and rgd_native.available())


def run_rgd(u0, v0, X, Y, lam, s, n_steps: int, log_every: int, links=("linear",), progress: Callable | None = None,
            n_segments: int = 10, token_dtype=None, method: str = "auto") -> RGDLog:
    """RGD of K runs per repeat: ``u0, v0`` (repeats, K, d), data ``X`` (repeats, n, L, d) shared by the K runs of a
    repeat, labels ``Y`` (repeats, K, n), ``links`` a tuple of K links (names or callables).

    ``token_dtype`` (default: the dtype of ``X``) is the precision of the two token products per step and of the
    per-token arithmetic between them (softmax, link, residual); the iterates, their projection and the logged
    losses stay in the dtype of ``u0``. float32 cuts the step time by about 2.5x here and its effect on the iterates
    is bounded in the tests.

    ``method``: ``"xla"`` runs the steps as a compiled ``lax.scan``; ``"native"`` runs them in the C kernel of
    :mod:`attnlab.dohmatob.rgd_native` (float32 tokens, named links, CPU; about 3.5x faster than ``"xla"`` in float32 at
    Figure-2 size on the 2-core Zen 1 machine); ``"auto"`` (default) takes ``"native"`` where it applies and is
    available.

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
    if method not in ("auto", "xla", "native"):
        raise ValueError(f"unknown method {method!r}: expected 'auto', 'xla' or 'native'")
    token_dtype = jnp.dtype(token_dtype or X.dtype)
    native = method == "native" or (method == "auto" and _native_applies(links, token_dtype))
    if method == "native" and not _native_applies(links, token_dtype):
        raise ValueError("method='native' needs float32 tokens, named links, the CPU backend and the compiled kernel"
                         f" ({rgd_native.unavailable_reason() or 'available'})")
    R, n, L, d = X.shape
    K = u0.shape[1]
    W = jnp.concatenate([u0, v0], axis=1)  # (R, 2K, d)
    if native:
        Xp, Yn, Wn = rgd_native.tokens(X), np.asarray(Y), np.asarray(W, np.float64)
        loss0 = jnp.asarray(rgd_native.run(Xp, Yn, links, Wn, float(lam), float(s), 1, 0)[1][:, 0], u0.dtype)
    else:
        loss0 = jax.vmap(_joint_losses, in_axes=(0, 0, 0, 0, None, None))(u0, v0, X, Y, lam, links)
        seg = _segment_fn(links, log_every, n_logs // n_segments)
        XL = jnp.swapaxes(jnp.asarray(X, dtype=token_dtype), 1, 2).reshape(R, L * n, d)  # token-major
    us, vs, ls = [u0[:, None]], [v0[:, None]], [loss0[:, None]]
    for i in range(n_segments):
        if native:
            lw, ll = rgd_native.run(Xp, Yn, links, Wn, float(lam), float(s), n_logs // n_segments, log_every)
            Wn = lw[:, -1]
            lw, ll = jnp.asarray(lw, W.dtype), jnp.asarray(ll, loss0.dtype)
        else:
            W, (lw, ll) = seg(W, XL, Y, lam, s)
        us.append(lw[:, :, :K])
        vs.append(lw[:, :, K:])
        ls.append(ll)
        if progress is not None:
            progress(i + 1, n_segments)
    return RGDLog(jnp.concatenate(us, 1), jnp.concatenate(vs, 1), jnp.concatenate(ls, 1))


_rgd_step_jit = jax.jit(rgd_step, static_argnames=("link",))


def run_rgd_reference(u0, v0, X, y, lam, s, n_steps: int, link="linear"):
    """Plain reference for the benchmark: one run, a Python loop over steps of a jitted step (compiled once per
    link and shape; the data are arguments, not constants baked into the program)."""
    u, v = u0, v0
    for _ in range(n_steps):
        u, v = _rgd_step_jit(u, v, X, y, lam, s, link=link)
    return jax.block_until_ready((u, v))


def init_with_overlap(key, u_star, mu0, d: int):
    """``u = mu0 u* + sqrt(1 - mu0^2) w`` with w uniform on the unit sphere of the complement of u*."""
    w = jax.random.normal(key, (d,))
    w = w - (w @ u_star) * u_star
    w = w / jnp.linalg.norm(w)
    return mu0 * u_star + jnp.sqrt(1.0 - mu0**2) * w


def overlaps5(u, v, u_star, v_star):
    """Dohmatob's overlaps stacked on the last axis: ``(mu, nu, eta, zeta, rho) = (u.u*, v.v*, u.v*, v.u*, u.v)``."""
    return jnp.stack([u @ u_star, v @ v_star, u @ v_star, v @ u_star, jnp.sum(u * v, axis=-1)], axis=-1)


def frame_coordinates_jnp(o):
    """u, v in the frame ``(u*, v*, e1, e2)`` from overlaps ``o = (mu, nu, eta, zeta, rho)`` (last axis), JAX."""
    mu, nu, eta, zeta, rho = (o[..., i] for i in range(5))
    tiny = 1e-300
    p = jnp.sqrt(jnp.maximum(1.0 - mu**2 - eta**2, 0.0))
    q1 = jnp.where(p > tiny, (rho - mu * zeta - eta * nu) / jnp.maximum(p, tiny), 0.0)
    q2 = jnp.sqrt(jnp.maximum(1.0 - zeta**2 - nu**2 - q1**2, 0.0))
    zero = jnp.zeros_like(p)
    return jnp.stack([mu, eta, p, zero], axis=-1), jnp.stack([zeta, nu, q1, q2], axis=-1)


def frame_predict(Z, o, lam, link="linear"):
    """Predictions on frame coordinates ``Z`` (n, L, 4) of the (u, v) with overlaps ``o`` (5,)."""
    u4, v4 = frame_coordinates_jnp(o)
    return jnp.sum(softmax_weights(lam * (Z @ u4)) * get_link(link)(Z @ v4), axis=-1)


def frame_predict_planes(Zs, o, lam, link="linear"):
    """:func:`frame_predict` on the frame coordinates given as four planes ``Zs[k] = Z[..., k]`` (n, L), the scores
    ``a = lam sum_k u_k Zs[k]`` elementwise. Splitting Z into planes once and evaluating many (u, v) on them (a
    held-out set at every logged iterate) is about 1.3x faster than the (n, L, 4) products. The softmax takes one
    exponential per token: ``f = sum_l e_l g_l / sum_l e_l``, ``e = exp(a - max_l a)`` (every e <= 1 and the largest
    is 1, so the ratio is finite for any finite scores)."""
    u4, v4 = frame_coordinates_jnp(o)
    a = lam * (Zs[0] * u4[0] + Zs[1] * u4[1] + Zs[2] * u4[2] + Zs[3] * u4[3])
    b = Zs[0] * v4[0] + Zs[1] * v4[1] + Zs[2] * v4[2] + Zs[3] * v4[3]
    e = jnp.exp(a - jnp.max(a, axis=-1, keepdims=True))
    return jnp.sum(e * get_link(link)(b), axis=-1) / jnp.sum(e, axis=-1)
