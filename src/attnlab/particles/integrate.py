r"""The particle model on the sphere and sphere-preserving integrators (spec 1.1, 1.2, 5, 6.2).

Continuous-time model (SA, the paper's ODE; USA with ``normalization="usa"``)::

    dx_i/dt = F_i(X) := P_{x_i} A_i(X),     P_x y = y - <x, y> x,     A_i = sum_j w_ij V x_j   (see attention.py)

Schemes, each one step of size dt from X (N, d) on the sphere, ending with the renormalisation N(y) = y / |y|:

* ``"euler"``: the paper's discrete model (Eq. (1); one layer = one step, dt = 1/L):
  x_i <- N(x_i + dt A_i), *without* the tangent projection (``project=False``, as in the paper and GLPR's code) or
  with it (``project=True``). Both are first-order approximations of the ODE: the radial part c x_i only rescales
  the step by 1/(1 + c dt) (spec 3 [I]; the order test in tests/particles/test_integrate.py confirms order 1);
* ``"heun"`` (order 2) and ``"rk4"`` (order 4): the explicit Runge-Kutta method applied to the ambient field
  F(X) = A(X) - <x, A(X)> x, followed by N. The sphere is invariant under the ambient field
  (d|x|^2/dt = 2 <x, A> (1 - |x|^2)), so the ambient RK solution is within O(dt^{p+1}) of the exact one, which lies on
  the sphere, and the final renormalisation moves it by no more than that: the order p is kept. (Renormalising the
  intermediate stages instead would cost an order.)

``simulate`` advances to each of a list of snapshot times (e.g. logarithmically spaced, for horizons of e^{c beta})
with a fixed dt per segment, one compiled ``lax.fori_loop`` per segment, and calls ``progress`` in between.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.particles.attention import attention, attention_dense, check_qkv

__all__ = ["Model", "make_model", "normalize", "drift", "step", "simulate", "ORDER", "Scheme"]

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
    block_q: int = 1024
    block_k: int = 2048
    kernel_dtype: str | None = None
    dense: bool = False


def make_model(d: int, Q=None, K=None, V=None, beta: float = 1.0, **options) -> Model:
    """Validated :class:`Model`; Q, K, V default to the identity. Raises ValueError on bad input."""
    if d < 2:
        raise ValueError(f"tokens must live in dimension d >= 2 (got d = {d})")
    eye = np.eye(d)
    Q, K, V = (eye if M is None else np.asarray(M, dtype=float) for M in (Q, K, V))
    check_qkv(d, Q, K, V)
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (got {beta})")
    return Model(jnp.asarray(Q), jnp.asarray(K), jnp.asarray(V), float(beta), **options)


def normalize(x):
    """Project each row onto the unit sphere: x / |x|."""
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


def _attention(x, model: Model):
    if model.dense:
        return attention_dense(x, model.Q, model.K, model.V, model.beta, normalization=model.normalization)
    dtype = None if model.kernel_dtype is None else jnp.dtype(model.kernel_dtype)
    return attention(x, model.Q, model.K, model.V, model.beta, normalization=model.normalization,
                     block_q=model.block_q, block_k=model.block_k, dtype=dtype)


def drift(x, model: Model):
    """The ambient field F(X) = A(X) - <x, A(X)> x, equal to the SA/USA velocity P_x A on the sphere."""
    a = _attention(x, model)
    return a - jnp.sum(a * x, axis=-1, keepdims=True) * x


def step(x, model: Model, dt, scheme: Scheme = "euler"):
    """One step of ``scheme`` (module docstring) from x (N, d) on the sphere."""
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


@partial(jax.jit, static_argnames=("static", "scheme"))
def _advance(x, n, dt, Q, K, V, static: Model, scheme: str):
    """n steps; Q, K, V are traced (one compilation serves every matrix), the rest of the model is static."""
    m = static._replace(Q=Q, K=K, V=V)

    def step_fn(_, y):
        return step(y, m, dt, scheme)

    if x.ndim == 3:
        return jax.vmap(lambda y: jax.lax.fori_loop(0, n, step_fn, y))(x)
    return jax.lax.fori_loop(0, n, step_fn, x)


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
    x = jnp.asarray(x0)
    if x.shape[-2] < 1:
        raise ValueError(f"need at least one token (got N = {x.shape[-2]})")
    check_qkv(x.shape[-1], model.Q, model.K, model.V)
    static = model._replace(Q=None, K=None, V=None)
    mats = [jnp.asarray(M, dtype=x.dtype) for M in (model.Q, model.K, model.V)]
    snaps, obs, steps = [x], [observe(x) if observe else None], [0]
    t_prev = 0.0
    for k, (t, h) in enumerate(zip(times, dts)):
        span = t - t_prev
        n = int(np.ceil(span / h - 1e-9))
        h_eff = span / n  # equal steps that land exactly on t (h_eff <= h)
        x = _advance(x, n, h_eff, *mats, static, scheme)
        snaps.append(x)
        obs.append(observe(x) if observe else None)
        steps.append(steps[-1] + n)
        t_prev = t
        if progress is not None:
            progress(k + 1, len(times))
    observations = jax.tree.map(lambda *a: np.stack([np.asarray(v) for v in a]), *obs) if observe else None
    return np.stack([np.asarray(s) for s in snaps]), observations, np.asarray(steps)
