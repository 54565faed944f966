r"""The particle model on the sphere and sphere-preserving integrators.

Continuous-time model (SA, the paper's ODE; USA with ``normalization="usa"``)::

    dx_i/dt = F_i(X) := P_{x_i} A_i(X),     P_x y = y - <x, y> x,     A_i = sum_j w_ij V x_j   (attnlab.bruno.attention)

Schemes, each one step of size dt from X (N, d) on the sphere, ending with the renormalisation N(y) = y / |y|:

* ``"euler"``: the paper's discrete model (Eq. (1); one layer = one step, dt = 1/L):
  x_i <- N(x_i + dt A_i), *without* the tangent projection (``project=False``, as in the paper and GLPR's code) or
  with it (``project=True``). Both are first-order approximations of the ODE: the radial part c x_i only rescales
  the step by 1/(1 + c dt) (the order test in tests/bruno/test_integrate.py confirms order 1);
* ``"heun"`` (order 2) and ``"rk4"`` (order 4): the explicit Runge-Kutta method applied to the ambient field
  F(X) = A(X) - <x, A(X)> x, followed by N. The sphere is invariant under the ambient field
  (d|x|^2/dt = 2 <x, A> (1 - |x|^2)), so the ambient RK solution is within O(dt^{p+1}) of the exact one, which lies on
  the sphere, and the final renormalisation moves it by no more than that: the order p is kept. (Renormalising the
  intermediate stages instead would cost an order.)

``simulate`` advances to each of a list of snapshot times (e.g. logarithmically spaced, for horizons of e^{c beta})
with a fixed dt per segment, one compiled ``lax.fori_loop`` per segment, and calls ``progress`` in between.

``simulate_adaptive`` controls the step size instead (the pairing phase lives at times e^{c beta},
out of reach of a fixed dt). It uses the Bogacki-Shampine 3(2) pair (Bogacki & Shampine, Appl. Math. Lett. 2, 1989;
Hairer, Norsett & Wanner, Solving ODEs I, II.4 and II.5) of ``diffrax.Bosh3`` on the ambient field F, with a
``diffrax.PIDController`` set to the classic I controller: a step is accepted when err = max_i |e_i| < tol (absolute,
in the ambient coordinates of the unit-norm tokens; e the difference of the order-3 and embedded order-2 solutions),
the solution continues from the order-3 one (local extrapolation), and the next step is h min(5, max(0.2, 0.9
(tol / err)^{1/3})) (diffrax never shrinks h after an accepted step nor grows it after a rejected one), capped by
``dt_max``; each segment ends exactly on its snapshot time, which is renormalised (N(y) - y = O(tol): the sphere is
invariant under F) and starts the next segment. With error-per-step control and local extrapolation the global error
is proportional to tol (Hairer, Norsett & Wanner II.4, "tolerance proportionality"; exponent p / (q + 1) = 3 / 3).
``bench/dependencies.py`` (row ``bs32``) keeps the hand-written stepper that diffrax replaced (renormalising every
step) and compares the two on ``bruno-three-phases`` with ``integrator="bs32"``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.bruno import circle
from attnlab.bruno.attention import attention, attention_dense, check_qkv
from attnlab.runtime import LONG_RUNNING

__all__ = ["Model", "make_model", "normalize", "drift", "step", "simulate", "simulate_adaptive", "ORDER", "Scheme"]

Scheme = Literal["euler", "heun", "rk4"]
ORDER = {"euler": 1, "heun": 2, "rk4": 4}


class Model(NamedTuple):
    """Q, K, V (d x d), inverse temperature beta, and the kernel's options (static, hashable)."""

    Q: jax.Array
    K: jax.Array
    V: jax.Array
    beta: float
    normalization: str = "sa"
    project: bool = False
    block_q: int | None = None  # None: attention.default_blocks (by backend)
    block_k: int | None = None
    kernel_dtype: str | None = None
    dense: bool = False
    kernel_method: str = "auto"  # attention.METHODS: "auto" (C kernel in float32 on CPU, else jax), "jax", "shift",
    # "online"; or "circle": the exact Fourier sums of attnlab.bruno.circle (d = 2, Q^T K = c I, SA, Euler steps)
    circle_order: int = 0  # kernel_method "circle": the series' order (make_model: circle.circle_order(beta c))


def make_model(d: int, Q=None, K=None, V=None, beta: float = 1.0, **options) -> Model:
    """Validated :class:`Model`; Q, K, V default to the identity. Raises ValueError on bad input."""
    if d < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {d})")
    eye = np.eye(d)
    Q, K, V = (eye if M is None else np.asarray(M, dtype=float) for M in (Q, K, V))
    check_qkv(d, Q, K, V)
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (got {beta})")
    if options.get("kernel_method") == "circle":
        if options.get("normalization", "sa") != "sa":
            raise ValueError("kernel_method 'circle' needs the SA normalisation")
        options.setdefault("circle_order", circle.circle_order(beta * circle.require_circle(Q, K)))
    return Model(jnp.asarray(Q), jnp.asarray(K), jnp.asarray(V), float(beta), **options)


def normalize(x):
    """Project each row onto the unit sphere: x / |x|."""
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def _attention(x, model: Model):
    if model.kernel_method == "circle":
        return circle.attention_circle(x, model.Q, model.K, model.V, model.beta, order=model.circle_order)
    if model.dense:
        return attention_dense(x, model.Q, model.K, model.V, model.beta, normalization=model.normalization)
    dtype = None if model.kernel_dtype is None else jnp.dtype(model.kernel_dtype)
    return attention(x, model.Q, model.K, model.V, model.beta, normalization=model.normalization,
                     block_q=model.block_q, block_k=model.block_k, dtype=dtype, method=model.kernel_method)


def drift(x, model: Model):
    """The ambient field F(X) = A(X) - <x, A(X)> x, equal to the SA/USA velocity P_x A on the sphere."""
    a = _attention(x, model)
    return a - jnp.sum(a * x, axis=-1, keepdims=True) * x


def step(x, model: Model, dt, scheme: Scheme = "euler"):
    """One step of ``scheme`` (the schemes: :mod:`attnlab.bruno.integrate`) from x (N, d) on the sphere."""
    if model.kernel_method == "circle" and scheme != "euler":  # its stages would leave the circle
        raise ValueError(f"kernel_method 'circle' needs tokens on the circle: the euler scheme, not {scheme!r}")
    if scheme == "euler":
        return normalize(x + dt * (drift(x, model) if model.project else _attention(x, model)))
    if scheme == "heun":
        k1 = drift(x, model)
        k2 = drift(x + dt * k1, model)
        return normalize(x + 0.5 * dt * (k1 + k2))
    if scheme == "rk4":
        k1 = drift(x, model)
        k2 = drift(x + 0.5 * dt * k1, model)
        k3 = drift(x + 0.5 * dt * k2, model)
        k4 = drift(x + dt * k3, model)
        return normalize(x + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4))
    raise ValueError(f"unknown scheme {scheme!r} (choose from {sorted(ORDER)})")


@partial(jax.jit, static_argnames=("static", "scheme"), compiler_options=LONG_RUNNING)
def _advance(x, n, dt, Q, K, V, static: Model, scheme: str):
    """n steps; Q, K, V are traced (one compilation serves every matrix), the rest of the model is static."""
    m = static._replace(Q=Q, K=K, V=V)

    def step_fn(_, y):
        return step(y, m, dt, scheme)

    if x.ndim == 3:
        return jax.vmap(lambda y: jax.lax.fori_loop(0, n, step_fn, y))(x)
    return jax.lax.fori_loop(0, n, step_fn, x)


def _split_model(x0, model):
    """Validate the tokens and matrices; return the tokens, the model without matrices (static) and the matrices."""
    x = jnp.asarray(x0)
    if x.shape[-2] < 1:
        raise ValueError(f"need at least one token (got N = {x.shape[-2]})")
    check_qkv(x.shape[-1], model.Q, model.K, model.V)
    static = model._replace(Q=None, K=None, V=None)
    return x, static, [jnp.asarray(M, dtype=x.dtype) for M in (model.Q, model.K, model.V)]


def simulate(x0, model: Model, times: Sequence[float], dt: float | Sequence[float], *, scheme: Scheme = "euler",
             observe: Callable | None = None, progress: Callable | None = None):
    """Integrate from t = 0 to each of the increasing ``times``; return (snapshots, observations, steps_taken).

    ``x0`` is (N, d) or a batch (R, N, d) of independent runs (vmapped). ``dt`` is one step size or one per segment
    (segment k ends at times[k]); a segment takes n = ceil((t_k - t_{k-1}) / dt_k - 1e-9) equal steps of
    (t_k - t_{k-1}) / n <= dt_k, so that each snapshot falls exactly on t_k. ``observe(x) -> pytree`` is
    evaluated at t = 0 and at every snapshot (the returned observations have a leading axis of len(times) + 1).
    ``snapshots`` has the same
    leading axis and holds the positions.
    """
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0) or times[0] <= 0:
        raise ValueError("times must be a nonempty, strictly increasing sequence of positive numbers")
    dts = np.broadcast_to(np.asarray(dt, dtype=float), times.shape)
    if not np.all(dts > 0):
        raise ValueError(f"dt must be > 0 (got {dt})")
    x, static, mats = _split_model(x0, model)
    snaps, obs, steps = [x], [observe(x) if observe else None], [0]
    t_prev = 0.0
    for k, (t, h) in enumerate(zip(times, dts)):
        span = t - t_prev
        n = int(np.ceil(span / h - 1e-9))
        # equal steps that land exactly on t (h_eff <= h), in the tokens' dtype: a float64 step would promote
        # float32 tokens inside the loop, whose carry must keep its dtype
        h_eff = jnp.asarray(span / n, dtype=x.dtype)
        x = _advance(x, n, h_eff, *mats, static, scheme)
        snaps.append(x)
        obs.append(observe(x) if observe else None)
        steps.append(steps[-1] + n)
        t_prev = t
        if progress is not None:
            progress(k + 1, len(times))
    observations = jax.tree.map(lambda *a: np.stack([np.asarray(v) for v in a]), *obs) if observe else None
    return np.stack([np.asarray(s) for s in snaps]), observations, np.asarray(steps)


@partial(jax.jit, static_argnames=("static", "max_steps"), compiler_options=LONG_RUNNING)
def _adaptive_segment(x, t0, t1, h, Q, K, V, static: Model, tol, dt_max, max_steps: int):
    """One segment from t0 to t1 by ``diffrax.Bosh3`` under an I controller (:mod:`attnlab.bruno.integrate`), from x
    on the sphere (a batch (R, N, d) is vmapped, each run with its first trial step h[r]):
    ``(N(x(t1)), accepted, rejected, ok)``."""
    import diffrax  # imported when first traced: importing attnlab stays light

    m = static._replace(Q=Q, K=K, V=V)
    term = diffrax.ODETerm(lambda t, y, args: drift(y, m))
    ctrl = diffrax.PIDController(rtol=0.0, atol=tol, pcoeff=0.0, icoeff=1.0, factormin=0.2, factormax=5.0,
                                 safety=0.9, dtmax=dt_max, norm=lambda e: jnp.max(jnp.linalg.norm(e, axis=-1)))

    def one(x, h):
        sol = diffrax.diffeqsolve(term, diffrax.Bosh3(), t0, t1, h, x, saveat=diffrax.SaveAt(t1=True),
                                  stepsize_controller=ctrl, max_steps=max_steps, throw=False)
        return (normalize(sol.ys[-1]), sol.stats["num_accepted_steps"], sol.stats["num_rejected_steps"],
                sol.result == diffrax.RESULTS.successful)

    return jax.vmap(one)(x, h) if x.ndim == 3 else one(x, h)


def adaptive_inputs(x0, model: Model, times, tol, dt0, dt_max):
    """Validated inputs of an adaptive integration: ``(times, x, static, mats, dt0)``, the first trial step defaulting
    to 0.1 / (beta |V| |K^T Q|). Raises ValueError on bad times, tolerance or steps."""
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0) or times[0] <= 0:
        raise ValueError("times must be a nonempty, strictly increasing sequence of positive numbers")
    if not tol > 0:
        raise ValueError(f"tol must be > 0 (got {tol})")
    if not dt_max > 0 or (dt0 is not None and not dt0 > 0):
        raise ValueError("dt0 and dt_max must be > 0")
    x, static, mats = _split_model(x0, model)
    if dt0 is None:
        scale = model.beta * np.linalg.norm(np.asarray(model.V), 2) * np.linalg.norm(
            np.asarray(model.K).T @ np.asarray(model.Q), 2)
        dt0 = 0.1 / max(scale, 1e-12)
    return times, x, static, mats, dt0


def simulate_adaptive(x0, model: Model, times: Sequence[float], *, tol: float = 1e-6, dt0: float | None = None,
                      dt_max: float = np.inf, max_steps: int = 1_000_000, observe: Callable | None = None,
                      progress: Callable | None = None):
    """Integrate with the adaptive Bogacki-Shampine 3(2) pair (``diffrax.Bosh3``; the method and its error control:
    :mod:`attnlab.bruno.integrate`) to each of ``times``.

    Returns (snapshots, observations, steps) like :func:`simulate`, where ``steps`` (len(times) + 1, or
    (len(times) + 1, R) for a batch) counts accepted steps, plus ``rejected`` (same shape). ``tol`` is the absolute
    local error allowed per step (max over tokens of the Euclidean norm); ``dt0`` the first trial step (default
    0.1 / (beta |V| |K^T Q|), a third of the paper's explicit-Euler budget dt beta = 0.3); ``dt_max`` caps the step.
    Each segment is one ``diffeqsolve`` from the renormalised snapshot, its first trial step the mean accepted step
    of the segment before. Raises RuntimeError if a segment needs more than ``max_steps`` steps (accepted and
    rejected).
    """
    if model.kernel_method == "circle":  # the Bogacki-Shampine stages leave the circle
        raise ValueError("kernel_method 'circle' needs tokens on the circle: simulate with the euler scheme")
    times, x, static, mats, dt0 = adaptive_inputs(x0, model, times, tol, dt0, dt_max)
    batch = x.shape[:-2]
    h = jnp.full(batch, min(dt0, dt_max), x.dtype)
    zero = np.zeros(batch, dtype=int)
    snaps, obs, steps, rejected = [x], [observe(x) if observe else None], [zero], [zero]
    t_prev = 0.0
    for k, t_end in enumerate(times):
        x, acc, rej, ok = _adaptive_segment(x, jnp.asarray(t_prev, x.dtype), jnp.asarray(t_end, x.dtype), h, *mats,
                                            static, jnp.asarray(tol, x.dtype), jnp.asarray(dt_max, x.dtype),
                                            int(max_steps))
        if not np.all(np.asarray(ok)):
            raise RuntimeError(f"adaptive integration stalled before t = {t_end} after {max_steps} steps (tol {tol})")
        h = jnp.minimum((t_end - t_prev) / jnp.maximum(acc, 1), dt_max).astype(x.dtype)
        snaps.append(x)
        obs.append(observe(x) if observe else None)
        steps.append(steps[-1] + np.asarray(acc))
        rejected.append(rejected[-1] + np.asarray(rej))
        t_prev = float(t_end)
        if progress is not None:
            progress(k + 1, len(times))
    observations = jax.tree.map(lambda *a: np.stack([np.asarray(v) for v in a]), *obs) if observe else None
    return np.stack([np.asarray(s) for s in snaps]), observations, np.stack(steps), np.stack(rejected)
