r"""Training dynamics for erf-attention on SLR (Marion et al., ICLR 2025: projected GD, Definition 1; online SGD).

Projected (Riemannian) gradient descent on the sphere with step size ``s`` (``step_size``), simultaneous updates at
the old point::

    k~ = k - s (g_k - (k . g_k) k),   k' = k~ / |k~|,       v~ = v - s (g_v - (v . g_v) v),   v' = v~ / |v~|

where ``g_k, g_v`` are Euclidean gradients of the population risk (PGD) or of a fresh mini-batch loss (online SGD).

Three simulators:

* **full-vector** PGD and SGD in R^d, written the direct way (reference implementations);
* **reduced PGD**: the exact recursion on the five overlaps (:class:`attnlab.slr.overlaps.Overlaps`). Since R
  depends on (k, v) only through the overlaps, ``g_k = R_kappa k* + R_eta v* + R_rho v`` and
  ``g_v = R_nu v* + R_theta k* + R_rho k``; every new overlap is an inner product of such combinations, so one step
  costs O(1), whatever d;
* **reduced SGD**: the same Markov chain on the overlaps as full-vector SGD, exact in law. The data law is invariant
  under rotations that fix k* and v*, so the overlaps form a Markov chain. One step draws the tokens' coordinates in
  the frame ``(k*, v*, e1, e2)`` spanned by the current state (4 per token) and, for the ``d - 4`` remaining
  coordinates, only the 2x2 Gram matrix of the two gradient components there, which is Wishart(d - 4, Sigma) given
  the in-frame data. The cost per step does not grow with d.

The lambda schedule is ``lambda_t = lambda0 / (1 + r t)``, r = 1e-4 in the official code, t the index of the step.

Logging convention: unlike the official code (whose logged risk is one step behind the overlaps), every
logged quantity here is evaluated at the same iterate, with the lambda of the next step to be taken.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import erf

from attnlab import programs
from attnlab.marion.predictors import erf_attention
from attnlab.marion.risk import erf_prime, population_excess_risk, risk_R
from attnlab.slr.data import init_sphere, orthonormal_frame, sample_slr, sample_slr_in_frame
from attnlab.slr.overlaps import Overlaps, frame_coordinates, overlaps

__all__ = [
    "SCHEDULE_RATE",
    "lambda_at",
    "overlaps",
    "distance_to_manifold",
    "init_sphere",
    "init_manifold",
    "vectors_from_overlaps",
    "retract_overlaps",
    "pgd_step_full",
    "pgd_step_reduced",
    "sgd_step_full",
    "sgd_step_reduced",
    "sgd_step_reduced_from_noise",
    "draw_sgd_noise",
    "SGDNoise",
    "SLRParams",
    "run_pgd_reduced",
    "run_pgd_full",
    "run_sgd_reduced",
    "run_sgd_full",
]

SCHEDULE_RATE = 1e-4


class SLRParams(NamedTuple):
    """Problem and optimiser constants: dimension d, sequence length L, signal std gamma, label noise eps,
    the step size, initial scale lambda0, whether the schedule ``lambda0 / (1 + r t)`` is on and its rate ``r``
    (``schedule_rate``, the official 1e-4 by default). Build it with keywords:
    ``SLRParams(d=400, L=10, gamma=0.5**0.5, eps=0.0, step_size=4e-3, lambda0=0.1, schedule=False)``."""

    d: int
    L: int
    gamma: float
    eps: float
    step_size: float
    lambda0: float
    schedule: bool
    schedule_rate: float = SCHEDULE_RATE


def lambda_at(t, lambda0, schedule: bool, rate=SCHEDULE_RATE):
    """``lambda_t = lambda0 / (1 + rate t)`` if ``schedule`` else ``lambda0`` (official schedule: rate 1e-4).

    In the time ``step_size * t`` of the gradient flow the schedule is ``lambda0 / (1 + (rate / step_size) time)``:
    scaling the step size and the rate together keeps the flow and its schedule, with fewer, larger steps.
    """
    t = jnp.asarray(t, dtype=jnp.float64)
    return jnp.where(schedule, lambda0 / (1.0 + rate * t), lambda0 + 0.0 * t)


def distance_to_manifold(o: Overlaps):
    """Constraint residual ``sqrt(theta^2 + eta^2 + rho^2)``: the logged "distance to M"
    (M = {theta = eta = rho = 0}, invariant under PGD)."""
    return jnp.sqrt(o.theta**2 + o.eta**2 + o.rho**2)


def init_manifold(key, k_star, v_star):
    """A point of M (official ``initialize_on_manifold``): k orthogonalised against v*; v orthogonalised against k*
    and against the unit vector of ``k - (k.k*) k*``; then ``eta = theta = rho = 0`` up to round-off."""
    d = k_star.shape[-1]
    kk, kv = jax.random.split(key)
    k = jax.random.normal(kk, (d,))
    k = k - (k @ v_star) * v_star
    k = k / jnp.linalg.norm(k)
    v = jax.random.normal(kv, (d,))
    v = v - (v @ k_star) * k_star
    u = k - (k @ k_star) * k_star
    u = u / jnp.linalg.norm(u)
    v = v - (v @ u) * u
    return k, v / jnp.linalg.norm(v)


@partial(programs.jit, static_argnames="d")
def vectors_from_overlaps(key, o: Overlaps, d: int):
    """Vectors ``(k_star, v_star, k, v)`` in R^d with the given overlaps, in a uniformly random orthonormal frame
    (one compiled program per d)."""
    E = orthonormal_frame(key, d, 4)
    k4, v4 = frame_coordinates(o)
    return E[0], E[1], k4 @ E, v4 @ E


def retract_overlaps(o: Overlaps, step_size, k_gk, v_gv, gk_kstar, gk_vstar, gv_kstar, gv_vstar, k_gv, gk_v, gk2, gv2,
                     gk_gv):
    """New overlaps after the projected step and normalisation, from inner products of the gradients.

    With ``s = step_size``, ``a = 1 + s k.g_k`` and ``b = 1 + s v.g_v``: ``k~ = a k - s g_k``, ``v~ = b v - s g_v``,
    ``|k~|^2 = 1 + s^2 (|g_k|^2 - (k.g_k)^2)`` and ``k~.v~ = a b rho - a s k.g_v - b s g_k.v + s^2 g_k.g_v``.
    """
    a = 1.0 + step_size * k_gk
    b = 1.0 + step_size * v_gv
    nk = jnp.sqrt(1.0 + step_size**2 * (gk2 - k_gk**2))
    nv = jnp.sqrt(1.0 + step_size**2 * (gv2 - v_gv**2))
    kappa = (a * o.kappa - step_size * gk_kstar) / nk
    eta = (a * o.eta - step_size * gk_vstar) / nk
    nu = (b * o.nu - step_size * gv_vstar) / nv
    theta = (b * o.theta - step_size * gv_kstar) / nv
    rho = (a * b * o.rho - a * step_size * k_gv - b * step_size * gk_v + step_size**2 * gk_gv) / (nk * nv)
    return Overlaps(kappa, nu, theta, eta, rho)


def _projected_update(x, g, step_size):
    x_new = x - step_size * (g - (x @ g) * x)
    return x_new / jnp.linalg.norm(x_new)


def pgd_step_full(k, v, k_star, v_star, lam, step_size, gamma, d, L):
    """One full-vector PGD step on the population risk (Definition 1); gradients by autodiff through the overlaps."""

    def R(k, v):
        return risk_R(overlaps(k, v, k_star, v_star), lam, gamma, d, L)

    g_k, g_v = jax.grad(R, argnums=(0, 1))(k, v)
    return _projected_update(k, g_k, step_size), _projected_update(v, g_v, step_size)


def pgd_step_reduced(o: Overlaps, lam, step_size, gamma, d, L) -> Overlaps:
    """One PGD step as the exact recursion on the five overlaps (exact in float64 up to round-off)."""
    g = jax.grad(risk_R)(o, lam, gamma, d, L)
    Rk, Rn, Rt, Re, Rr = g.kappa, g.nu, g.theta, g.eta, g.rho
    kappa, nu, theta, eta, rho = o.kappa, o.nu, o.theta, o.eta, o.rho
    return retract_overlaps(
        o,
        step_size,
        k_gk=Rk * kappa + Re * eta + Rr * rho,
        v_gv=Rn * nu + Rt * theta + Rr * rho,
        gk_kstar=Rk + Rr * theta,
        gk_vstar=Re + Rr * nu,
        gv_kstar=Rt + Rr * kappa,
        gv_vstar=Rn + Rr * eta,
        k_gv=Rn * eta + Rt * kappa + Rr,
        gk_v=Rk * theta + Re * nu + Rr,
        gk2=Rk**2 + Re**2 + Rr**2 + 2.0 * Rk * Rr * theta + 2.0 * Re * Rr * nu,
        gv2=Rn**2 + Rt**2 + Rr**2 + 2.0 * Rn * Rr * eta + 2.0 * Rt * Rr * kappa,
        gk_gv=Rk * Rt + Rk * Rr * kappa + Re * Rn + Re * Rr * eta + Rr * Rn * nu + Rr * Rt * theta + Rr**2 * rho,
    )


def _batch_loss_grads(hk, hv, y, lam):
    """Loss ``mean_b (T_b - y_b)^2`` and the coefficients c, e with ``g_k = sum c_bl X_bl``, ``g_v = sum e_bl X_bl``."""
    B = y.shape[0]
    act = erf(lam * hk)
    r = jnp.sum(act * hv, axis=-1) - y
    c = (2.0 / B) * r[:, None] * lam * erf_prime(lam * hk) * hv
    e = (2.0 / B) * r[:, None] * act
    return jnp.mean(r**2), c, e


def sgd_step_full(key, k, v, k_star, v_star, lam, step_size, gamma, eps, batch_size: int, L: int):
    """One online-SGD step in R^d on a fresh batch (the official ``sgd_step``). Returns ``(k, v, batch_loss)``."""
    X, y, _ = sample_slr(key, k_star, v_star, batch_size, L, gamma, eps)

    def loss(k, v):
        return jnp.mean((erf_attention(X, k, v, lam) - y) ** 2)

    value, (g_k, g_v) = jax.value_and_grad(loss, argnums=(0, 1))(k, v)
    return _projected_update(k, g_k, step_size), _projected_update(v, g_v, step_size), value


class SGDNoise(NamedTuple):
    """Randomness of one reduced-SGD step: the batch in the frame and the Bartlett factors of the Wishart(d-4, I_2)
    Gram matrix ``W = A A^T``, ``A = [[a11, 0], [a21, a22]]``, ``a11^2 ~ chi2(d-4)``, ``a22^2 ~ chi2(d-5)``,
    ``a21 ~ N(0, 1)``."""

    Z: jax.Array
    y: jax.Array
    scale: jax.Array
    a11_sq: jax.Array
    a22_sq: jax.Array
    a21: jax.Array


def draw_sgd_noise(key, batch_size: int, L: int, gamma, eps, d: int, n_steps: int | None = None) -> SGDNoise:
    """Draw the randomness of one reduced-SGD step, or of ``n_steps`` steps stacked on a leading axis.

    Drawing a block of steps with one call per random quantity keeps the compiled RNG graph small and fast.
    """
    lead = () if n_steps is None else (n_steps,)
    n = batch_size if n_steps is None else n_steps * batch_size
    kz, k1, k2, k3 = jax.random.split(key, 4)
    Z, y, scale = sample_slr_in_frame(kz, n, L, gamma, eps, d)
    m = d - 4
    a11_sq = 2.0 * jax.random.gamma(k1, m / 2.0, lead)
    a22_sq = jnp.where(m > 1, 2.0 * jax.random.gamma(k2, jnp.maximum(m - 1, 1) / 2.0, lead), 0.0)
    return SGDNoise(Z.reshape(*lead, batch_size, L, 4), y.reshape(*lead, batch_size),
                    scale.reshape(*lead, batch_size, L), a11_sq, a22_sq, jax.random.normal(k3, lead))


def sgd_step_reduced_from_noise(noise: SGDNoise, o: Overlaps, lam, step_size):
    """One online-SGD step as a Markov chain on the overlaps, exact in law (:mod:`attnlab.marion.dynamics`).

    The gradient components outside the frame are ``g_k^perp = sum c_bl s_bl w_bl``, ``g_v^perp = sum e_bl s_bl w_bl``
    with ``w_bl ~ N(0, I_{d-4})`` iid; their Gram matrix is ``C W C^T`` with ``C`` the Cholesky factor of
    ``Sigma = [[sum c^2 s^2, sum c e s^2], [., sum e^2 s^2]]`` and ``W ~ Wishart(d-4, I_2)`` (Bartlett).
    Returns ``(overlaps, batch_loss)``.
    """
    Z, y, scale = noise.Z, noise.y, noise.scale
    k4, v4 = frame_coordinates(o)
    loss, c, e = _batch_loss_grads(Z @ k4, Z @ v4, y, lam)
    gk = jnp.einsum("bl,blj->j", c, Z)
    gv = jnp.einsum("bl,blj->j", e, Z)
    s2 = scale**2
    S11, S12, S22 = jnp.sum(c * c * s2), jnp.sum(c * e * s2), jnp.sum(e * e * s2)
    C11 = jnp.sqrt(S11)
    C21 = jnp.where(C11 > 0, S12 / jnp.where(C11 > 0, C11, 1.0), 0.0)
    C22 = jnp.sqrt(jnp.maximum(S22 - C21**2, 0.0))
    W11 = noise.a11_sq
    W12 = jnp.sqrt(noise.a11_sq) * noise.a21
    W22 = noise.a21**2 + noise.a22_sq
    G11 = C11**2 * W11
    G12 = C11 * (C21 * W11 + C22 * W12)
    G22 = C21**2 * W11 + 2.0 * C21 * C22 * W12 + C22**2 * W22
    new = retract_overlaps(
        o,
        step_size,
        k_gk=k4 @ gk,
        v_gv=v4 @ gv,
        gk_kstar=gk[0],
        gk_vstar=gk[1],
        gv_kstar=gv[0],
        gv_vstar=gv[1],
        k_gv=k4 @ gv,
        gk_v=gk @ v4,
        gk2=gk @ gk + G11,
        gv2=gv @ gv + G22,
        gk_gv=gk @ gv + G12,
    )
    return new, loss


def sgd_step_reduced(key, o: Overlaps, lam, step_size, gamma, eps, batch_size: int, L: int, d: int):
    """One reduced online-SGD step from a key (requires d >= 5). Returns ``(overlaps, batch_loss)``."""
    return sgd_step_reduced_from_noise(draw_sgd_noise(key, batch_size, L, gamma, eps, d), o, lam, step_size)


def _in_frame_test_excess_risk(test_set, o: Overlaps, lam, eps):
    """Held-out estimate of ``E[(T - y)^2] - eps^2`` on a test set drawn in the frame by :func:`sample_slr_in_frame`.

    The test set is drawn once per repeat and reused at every logged step, like the official fixed test set. Its
    standard coordinates are independent of the training noise, hence of the current overlaps, so at each step the
    estimate has exactly the law of an ``n_test``-sample held-out estimate in R^d.
    """
    Z, y, _ = test_set
    k4, v4 = frame_coordinates(o)
    T = jnp.sum(erf(lam * (Z @ k4)) * (Z @ v4), axis=-1)
    return jnp.mean((T - y) ** 2) - eps**2


class _Log(NamedTuple):
    overlaps: Overlaps
    excess_risk: jax.Array
    lam: jax.Array


def _log_reduced(o, t, p: SLRParams):
    lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
    return _Log(o, population_excess_risk(o, lam, p.gamma, p.d, p.L), lam)


def _segments(run_segment: Callable, state, n_logs: int, n_segments: int, progress):
    """Call ``run_segment(state, segment_index) -> (state, logs)`` ``n_segments`` times; returns the final state
    and the list of the segments' logs (:func:`_join_logs` stacks them).

    The segments split the logged trajectory so a caller can show progress between compiled calls; the step
    loop itself stays inside ``lax.scan``.
    """
    outs = []
    for i in range(n_segments):
        state, logs = run_segment(state, i)
        outs.append(logs)
        if progress is not None:
            jax.block_until_ready(logs)
            progress(i + 1, n_segments)
    return state, outs


@jax.jit
def _join_logs(first, outs):
    """The initial log (no leading axis) followed by the segments' logs, along the leading axis: one program
    instead of an eager concatenation per array."""
    return jax.tree.map(lambda a, *xs: jnp.concatenate([a[None], *xs], axis=0), first, *outs)


def _segment_count(n_logs: int, requested: int) -> int:
    n = max(1, min(requested, n_logs))
    while n_logs % n:
        n -= 1
    return n


def _traced(p: SLRParams) -> SLRParams:
    """The parameters as arrays, so compiled code is reused across values (sweeps recompile only for new shapes)."""
    return jax.tree.map(jnp.asarray, p)


@partial(programs.jit, static_argnames=("log_every", "per_seg"))
def _pgd_reduced_segment(o, i, p: SLRParams, log_every: int, per_seg: int):
    def one_step(o, t):
        lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
        return pgd_step_reduced(o, lam, p.step_size, p.gamma, p.d, p.L), None

    def one_log(o, t0):
        o, _ = jax.lax.scan(one_step, o, t0 + jnp.arange(log_every))
        return o, _log_reduced(o, t0 + log_every, p)

    t0s = (i * per_seg + jnp.arange(per_seg)) * log_every
    return jax.lax.scan(jax.vmap(one_log, in_axes=(0, None)), o, t0s)


def run_pgd_reduced(o0: Overlaps, p: SLRParams, n_steps: int, log_every: int, progress=None, n_segments: int = 20):
    """Reduced PGD from overlaps ``o0`` (leading axis: repeats), vmapped over repeats, ``lax.scan`` over steps.

    Returns a ``_Log`` with arrays of shape (n_steps // log_every + 1, n_repeats): the overlaps, the excess risk
    ``R + (L-1) zeta(0, lambda_t)`` and lambda_t at steps ``0, log_every, ..., n_steps``.
    """
    n_logs = n_steps // log_every
    n_seg = _segment_count(n_logs, n_segments)
    per_seg = n_logs // n_seg
    pt = _traced(p)
    first = _first_logs(o0, pt)
    _, outs = _segments(lambda o, i: _pgd_reduced_segment(o, i, pt, log_every, per_seg), o0, n_logs, n_seg, progress)
    return _join_logs(first, outs)


@programs.jit
def _first_logs(o0, p: SLRParams):
    """The log at step 0 of every repeat (one program)."""
    return jax.vmap(_log_reduced, in_axes=(0, None, None))(o0, 0, p)


@partial(programs.jit, static_argnames=("n_logs", "log_every"))
def _pgd_full(k, v, k_star, v_star, p: SLRParams, n_logs: int, log_every: int):
    def one_step(kv, t):
        lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
        return pgd_step_full(*kv, k_star, v_star, lam, p.step_size, p.gamma, p.d, p.L), None

    def one_log(kv, t0):
        kv, _ = jax.lax.scan(one_step, kv, t0 + jnp.arange(log_every))
        return kv, overlaps(*kv, k_star, v_star)

    kv, logs = jax.lax.scan(one_log, (k, v), jnp.arange(n_logs) * log_every)
    o0 = overlaps(k, v, k_star, v_star)
    return kv, jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), o0, logs)


def run_pgd_full(k, v, k_star, v_star, p: SLRParams, n_steps: int, log_every: int):
    """Full-vector PGD in R^d for one repeat (the reference for :func:`run_pgd_reduced`).

    Returns the overlaps at steps ``0, log_every, ..., n_steps`` (shape (n_logs + 1,) each) and the final (k, v).
    """
    (k1, v1), logs = _pgd_full(k, v, k_star, v_star, _traced(p), n_steps // log_every, log_every)
    return logs, (k1, v1)


def _sgd_test_risk(test_set, o, t, p: SLRParams):
    return _in_frame_test_excess_risk(test_set, o, lambda_at(t, p.lambda0, p.schedule, p.schedule_rate), p.eps)


@partial(programs.jit, static_argnames=("L", "log_every", "per_seg", "batch_size"))
def _sgd_reduced_segment(o, i, train_keys, test_sets, p: SLRParams, L: int, log_every: int, per_seg: int,
                         batch_size: int):
    def one_step(o, nt):
        noise, t = nt
        lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
        return sgd_step_reduced_from_noise(noise, o, lam, p.step_size)[0], None

    def one_log(o, key, test_set, t0):
        # All the randomness of a logging interval in one draw: fewer, larger RNG calls.
        noise = draw_sgd_noise(jax.random.fold_in(key, t0), batch_size, L, p.gamma, p.eps, p.d, log_every)
        o, _ = jax.lax.scan(one_step, o, (noise, t0 + jnp.arange(log_every)))
        t1 = t0 + log_every
        return o, (_log_reduced(o, t1, p), _sgd_test_risk(test_set, o, t1, p))

    def body(o, t0):
        return jax.vmap(one_log, in_axes=(0, 0, 0, None))(o, train_keys, test_sets, t0)

    return jax.lax.scan(body, o, (i * per_seg + jnp.arange(per_seg)) * log_every)


def run_sgd_reduced(key, o0: Overlaps, p: SLRParams, n_steps: int, log_every: int, batch_size: int, n_test: int,
                    progress=None, n_segments: int = 20):
    """Reduced (exact-in-law) online SGD from overlaps ``o0`` (leading axis: repeats; ``key`` one per repeat).

    Returns ``(_Log, test_excess_risk)``; the held-out estimate uses a test set of ``n_test`` samples per repeat,
    never used for training (see :func:`_in_frame_test_excess_risk`).
    """
    n_logs = n_steps // log_every
    n_seg = _segment_count(n_logs, n_segments)
    per_seg = n_logs // n_seg
    pt = _traced(p)
    train_keys, test_sets, first = _sgd_reduced_start(key, o0, pt, p.L, n_test)

    def segment(o, i):
        return _sgd_reduced_segment(o, i, train_keys, test_sets, pt, p.L, log_every, per_seg, batch_size)

    _, outs = _segments(segment, o0, n_logs, n_seg, progress)
    return _join_logs(first, outs)


@partial(programs.jit, static_argnames=("L", "n_test"))
def _sgd_reduced_start(key, o0, p: SLRParams, L: int, n_test: int):
    """Per repeat: the training keys, the held-out test set drawn in the frame, and the logs at step 0 (the
    overlaps' and the test set's), in one program."""
    train_keys, test_keys = jax.vmap(lambda k: tuple(jax.random.split(k)))(key)
    test_sets = jax.vmap(lambda k: sample_slr_in_frame(k, n_test, L, p.gamma, p.eps, p.d))(test_keys)
    first = jax.vmap(_log_reduced, in_axes=(0, None, None))(o0, 0, p)
    first_test = jax.vmap(_sgd_test_risk, in_axes=(0, 0, None, None))(test_sets, o0, 0, p)
    return train_keys, test_sets, (first, first_test)


@partial(jax.jit, static_argnames=("L", "n_logs", "log_every", "batch_size", "n_test"))
def _sgd_full(key, k, v, k_star, v_star, p: SLRParams, L: int, n_logs: int, log_every: int, batch_size: int,
              n_test: int):
    k_test, k_train = jax.random.split(key)
    X_te, y_te, _ = sample_slr(k_test, k_star, v_star, n_test, L, p.gamma, p.eps)

    def test(kv, t):
        lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
        return jnp.mean((erf_attention(X_te, *kv, lam) - y_te) ** 2) - p.eps**2

    def one_step(kv, t):
        lam = lambda_at(t, p.lambda0, p.schedule, p.schedule_rate)
        k, v, _ = sgd_step_full(jax.random.fold_in(k_train, t), *kv, k_star, v_star, lam, p.step_size, p.gamma, p.eps,
                                batch_size, L)
        return (k, v), None

    def one_log(kv, t0):
        kv, _ = jax.lax.scan(one_step, kv, t0 + jnp.arange(log_every))
        t1 = t0 + log_every
        return kv, (overlaps(*kv, k_star, v_star), test(kv, t1))

    _, (logs, tests) = jax.lax.scan(one_log, (k, v), jnp.arange(n_logs) * log_every)
    o0 = overlaps(k, v, k_star, v_star)
    logs = jax.tree.map(lambda a, b: jnp.concatenate([a[None], b]), o0, logs)
    return logs, jnp.concatenate([test((k, v), 0)[None], tests])


def run_sgd_full(key, k, v, k_star, v_star, p: SLRParams, n_steps: int, log_every: int, batch_size: int,
                 n_test: int):
    """Full-vector online SGD for one repeat with a fixed held-out test set of ``n_test`` samples (official protocol).

    Returns ``(overlaps at logged steps, test excess risk at logged steps)``.
    """
    return _sgd_full(key, k, v, k_star, v_star, _traced(p), p.L, n_steps // log_every, log_every, batch_size, n_test)
