r"""The empirical-risk landscape of softmax attention under plain gradient methods (Duranthon et al., App. A.2).

The objective is the paper's empirical risk, eq. (15), divided by N (the same minimisers)::

    l(k, v) = (1/N) sum_mu 1/2 (y_mu - f(X_mu))^2 + lambda/(2N) (|k|^2 + |v|^2),
    f(X) = sigma(X k/sqrt(D))^T (X v/sqrt(D)).

**Time scale.** The loss depends on (k, v) mostly through the overlaps ``m = k.k*/D``, ``q = k.k/D``, ..., whose
gradient-flow velocity under ``dw/dt = -grad l`` is ``O(1/D)``; the updates below take ``w <- w - eta D grad l(w)``,
so that one unit of ``t = eta x steps`` moves the overlaps by ``O(1)`` whatever D (the high-dimensional time).

**Algorithms** (float64; every run of one data set in one ``vmap``, the steps in ``lax.scan``):

* :func:`gradient_descent` -- full-batch GD, logging the seven overlaps (:class:`attnlab.duranthon.erm.ERMOverlaps`)
  and the objective;
* :func:`minibatch_sgd` -- SGD with minibatches of ``B`` samples drawn with replacement from the training set (the
  same step rule with the minibatch's mean loss), followed by :func:`gradient_descent` to the minimum of the basin
  it ended in;
* :func:`classify_minima` -- runs of one data set ending at the same point (distance below a tolerance) share a
  minimum; each run is ``informed`` (the minimum reached from the informed start, whose overlaps the replica
  prediction describes), ``lower`` or ``higher`` (another minimum, below or above it in objective) or
  ``unconverged``;
* :func:`manifold_drift` -- the invariance of M (App. A.2.2). On M (``m_kv* = m_vk* = q_kv = 0``) the population
  risk is even in the three cross overlaps (the data law is invariant under ``zeta* -> -zeta*`` with ``y -> -y``,
  the loss under ``(v, y) -> (-v, -y)``), so their gradient-flow velocities vanish there. The velocities are
  population means of per-sample terms, ``d m_kv*/dt = -E[(f - y) d_k f . v*]/D`` (and likewise ``d m_vk*/dt``
  along ``k*`` and ``d q_kv/dt`` along ``(v, k)``); estimated on fresh sequences they are zero within their standard
  errors on M and not off it. At finite N the empirical gradient carries the training set's ``O(1/sqrt(N))``
  fluctuation, so GD trajectories started on M leave it by that much (logged, not a theorem).
"""

from __future__ import annotations

import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab.duranthon.activations import Activation

__all__ = ["OVERLAP_NAMES", "empirical_objective", "Trajectory", "STOP_EVERY", "gradient_descent", "minibatch_sgd",
           "overlaps", "MINIMUM_CLASSES", "classify_minima", "held_out_errors", "manifold_drift"]

OVERLAP_NAMES = ("m_k", "q_k", "m_v", "q_v", "m_kv", "m_vk", "q_kv")
"""The seven overlaps, all divided by D: ``k.k*, k.k, v.v*, v.v, k.v*, v.k*, k.v``."""

MINIMUM_CLASSES = ("informed", "lower", "higher", "unconverged")
"""The class of a run's end point (:func:`classify_minima`), in this order (integer codes 0..3)."""


def _predict(act: Activation, k, v, X, mask):
    D = X.shape[-1]
    return jnp.sum(act(X @ k / math.sqrt(D), mask) * (X @ v / math.sqrt(D)), axis=-1)


def empirical_objective(act: Activation, w, X, mask, y, lam):
    """``(1/N) sum_mu 1/2 (y_mu - f(X_mu))^2 + lambda/(2N)(|k|^2 + |v|^2)`` at ``w = (k, v)`` (eq. (15) over N)."""
    D = X.shape[-1]
    f = _predict(act, w[:D], w[D:], X, mask)
    return 0.5 * jnp.mean((y - f) ** 2) + 0.5 * lam * (w @ w) / X.shape[0]


def overlaps(W, k_star, v_star):
    """The seven overlaps (:data:`OVERLAP_NAMES`) of runs ``W`` (..., 2D) with the teacher: (..., 7)."""
    D = k_star.shape[-1]
    k, v = W[..., :D], W[..., D:]
    return jnp.stack([k @ k_star, jnp.sum(k * k, -1), v @ v_star, jnp.sum(v * v, -1), k @ v_star, v @ k_star,
                      jnp.sum(k * v, -1)], axis=-1) / D


class Trajectory(NamedTuple):
    """Runs of one data set: end points ``W`` (runs, 2D), the overlaps (logs + 1, runs, 7) and the objective
    (logs + 1, runs) at ``t = 0, T/n_logs, ..., T``, and the gradient norm at the end in overlap units,
    ``|D grad l| / sqrt(D)`` (runs,)."""

    W: jax.Array
    overlaps: jax.Array
    objective: jax.Array
    grad_norm: jax.Array


STOP_EVERY = 50
"""Updates between two tests of :func:`gradient_descent`'s stopping rule."""


@partial(programs.jit, static_argnames=("act", "n_steps", "n_logs"))
def gradient_descent(act: Activation, W0, X, mask, y, lam, step_size, n_steps: int, n_logs: int, k_star, v_star,
                     stop_tol=0.0):
    """Full-batch GD ``w <- w - eta D grad l(w)`` from every start of ``W0`` (runs, 2D) for ``n_steps`` updates
    (a multiple of ``n_logs``): a :class:`Trajectory`.

    The runs stop together once every one has ``|D grad l| / sqrt(D) <= stop_tol`` (tested every
    :data:`STOP_EVERY` updates on the gradient of the last update; ``stop_tol = 0``: never): the later logs repeat
    the end point. Near a minimum with Hessian ``H`` the updates that remain would move a run by at most
    ``|D grad l| / lambda_min(D H)``, far below the distances :func:`classify_minima` resolves when ``stop_tol`` is
    far below its ``grad_tol``."""
    D = X.shape[-1]
    grad = jax.vmap(jax.grad(empirical_objective, argnums=1), in_axes=(None, 0, None, None, None, None))
    objective = jax.vmap(empirical_objective, in_axes=(None, 0, None, None, None, None))
    norms = lambda G: jnp.linalg.norm(D * G, axis=-1) / math.sqrt(D)  # noqa: E731
    per_log = n_steps // n_logs

    def update(_, state):
        W, _g = state
        G = grad(act, W, X, mask, y, lam)
        return W - step_size * D * G, norms(G)

    def segment(state, _):
        def moving(s):
            done, (W, g) = s
            return (done < per_log) & jnp.any(g > stop_tol)

        def chunk(s):
            done, state = s
            n = jnp.minimum(STOP_EVERY, per_log - done)
            return done + n, jax.lax.fori_loop(0, n, update, state)

        _, (W, g) = jax.lax.while_loop(moving, chunk, (jnp.int32(0), state))
        return (W, g), (overlaps(W, k_star, v_star), objective(act, W, X, mask, y, lam))

    W0 = jnp.asarray(W0)
    (W, _), (o, obj) = jax.lax.scan(segment, (W0, jnp.full(W0.shape[0], jnp.inf, W0.dtype)), None, length=n_logs)
    o = jnp.concatenate([overlaps(W0, k_star, v_star)[None], o])
    obj = jnp.concatenate([objective(act, W0, X, mask, y, lam)[None], obj])
    return Trajectory(W, o, obj, norms(grad(act, W, X, mask, y, lam)))


@partial(programs.jit, static_argnames=("act", "n_steps", "batch_size"))
def minibatch_sgd(act: Activation, keys, W0, X, mask, y, lam, step_size, n_steps: int, batch_size: int):
    """SGD ``w <- w - eta D grad l_B(w)`` with ``l_B`` the objective on ``batch_size`` training samples drawn with
    replacement at every update (one key per run): the end points (runs, 2D)."""
    D, N = X.shape[-1], X.shape[0]
    grad = jax.grad(empirical_objective, argnums=1)

    def one(key, w0):
        def step(w, k):
            idx = jax.random.randint(k, (batch_size,), 0, N)
            # the penalty is per training set: lambda/(2N) |w|^2, whatever the batch
            g = grad(act, w, X[idx], mask[idx], y[idx], 0.0) + lam * w / N
            return w - step_size * D * g, None

        w, _ = jax.lax.scan(step, w0, jax.random.split(key, n_steps))
        return w

    return jax.vmap(one)(keys, W0)


def classify_minima(W, objective, grad_norm, informed: int, grad_tol: float, point_tol: float):
    """Classes (:data:`MINIMUM_CLASSES` codes) and minimum labels of the end points ``W`` (runs, 2D) of one data set.

    A run is converged if its ``grad_norm`` is at most ``grad_tol``. Two converged runs share a minimum if
    ``|w_a - w_b| / sqrt(2D) <= point_tol`` (single linkage). Run ``informed`` is the run from the informed start: its
    minimum is class ``informed``; other minima are ``lower`` or ``higher`` by objective. Returns ``(classes,
    labels)``, labels numbering the minima (-1 for unconverged runs); if the informed run has not converged every
    converged run is ``lower``/``higher`` against its objective."""
    W, obj, g = np.asarray(W), np.asarray(objective), np.asarray(grad_norm)
    n, D2 = W.shape
    conv = g <= grad_tol
    labels = np.full(n, -1)
    dist = np.linalg.norm(W[:, None, :] - W[None, :, :], axis=-1) / math.sqrt(D2)
    n_min = 0
    for i in range(n):
        if not conv[i] or labels[i] >= 0:
            continue
        stack, labels[i] = [i], n_min
        while stack:
            j = stack.pop()
            for m in np.flatnonzero(conv & (labels < 0) & (dist[j] <= point_tol)):
                labels[m] = n_min
                stack.append(m)
        n_min += 1
    classes = np.full(n, MINIMUM_CLASSES.index("unconverged"))
    ref = obj[informed]
    for i in np.flatnonzero(conv):
        if conv[informed] and labels[i] == labels[informed]:
            classes[i] = MINIMUM_CLASSES.index("informed")
        else:
            classes[i] = MINIMUM_CLASSES.index("lower" if obj[i] < ref else "higher")
    return classes, labels


@partial(programs.jit, static_argnames=("act",))
def held_out_errors(act: Activation, W, X, mask, y):
    """Test error ``mean (y - f)^2`` of every run ``W`` (runs, 2D) on one test set, and its standard error."""
    D = X.shape[-1]
    sq = jax.vmap(lambda w: (y - _predict(act, w[:D], w[D:], X, mask)) ** 2)(W)
    return jnp.mean(sq, -1), jnp.std(sq, -1, ddof=1) / math.sqrt(y.shape[0])


@partial(programs.jit, static_argnames=("act",))
def manifold_drift(act: Activation, k, v, k_star, v_star, X, mask, y):
    """Gradient-flow velocities of the cross overlaps ``(m_kv*, m_vk*, q_kv)`` of the loss at (k, v), estimated on
    the sequences (X, y): means and standard errors of the per-sample terms ``-(f - y) d f[u]`` with the tangents
    ``u = (v*, 0)``, ``(0, k*)``, ``(v, k)`` (module docstring; in the time ``t`` of :func:`gradient_descent`).
    Returns (means (3,), standard errors (3,))."""
    zero = jnp.zeros_like(k)
    tangents = ((v_star, zero), (zero, k_star), (v, k))
    f = _predict(act, k, v, X, mask)
    terms = []
    for tk, tv in tangents:
        _, df = jax.jvp(lambda kk, vv: _predict(act, kk, vv, X, mask), (k, v), (tk, tv))
        terms.append(-(f - y) * df)
    terms = jnp.stack(terms)  # (3, n)
    return jnp.mean(terms, -1), jnp.std(terms, -1, ddof=1) / math.sqrt(y.shape[0])
