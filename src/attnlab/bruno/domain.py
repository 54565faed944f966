"""The domains of the functions that :mod:`attnlab.bruno` exports: one check per function, of the same name, run on
the arguments before the function (:func:`attnlab._validate.public`); a one-line ValueError names the first argument
outside the domain.

Bruno et al.'s particle model: tokens ``x`` (N, d) with N >= 1 and d >= 2 (a batch (R, N, d) where the integrators
take one), nonzero (they are projected onto the sphere); ``Q, K, V`` finite d x d matrices; beta > 0 finite; step
sizes, times and tolerances positive and finite; sizes integers >= 1; the normalisation ``"sa"`` or ``"usa"``.
"""

from __future__ import annotations

import numpy as np

from attnlab import _validate as check
from attnlab.bruno.attention import METHODS
from attnlab.bruno.integrate import ORDER, Model

__all__ = ["attention", "attention_dense", "log_normalizer", "make_model", "normalize", "step", "simulate",
           "simulate_adaptive", "uniform_sphere", "wrapped_normal_mixture", "log_energy", "order_parameter",
           "alignment_closed_form", "heat_mixture_s2", "tokens", "matrices", "particle_model"]

_DTYPES = (None, "float32", "float64")


def tokens(name, x, *, batch: bool = False) -> int:
    """``x`` of shape (N, d) (or (R, N, d) with ``batch``), N >= 1, d >= 2, finite: returns d."""
    shape = np.shape(x)
    if len(shape) != 2 and not (batch and len(shape) == 3):
        want = "(N, d) or (R, N, d)" if batch else "(N, d)"
        raise ValueError(f"{name} must have shape {want}; got shape {shape}")
    if shape[-2] < 1 or (batch and len(shape) == 3 and shape[0] < 1):
        raise ValueError(f"{name} must hold at least one token; got shape {shape}")
    if shape[-1] < 2:
        raise ValueError(f"{name} must live in dimension d >= 2; got shape {shape}")
    check.real(name, x)
    return shape[-1]


def matrices(d, sequence=False, **named) -> None:
    """Each named matrix finite of shape (d, d), d the tokens' dimension (nested lists too, with ``sequence``)."""
    for name, M in named.items():
        if np.shape(M) != (d, d):
            raise ValueError(f"{name} must be a {d} x {d} matrix to act on tokens of dimension {d}; got shape "
                             f"{np.shape(M)}")
        check.real(name, M, sequence=sequence)


def _beta(beta) -> None:
    check.positive("beta", beta, scalar=True)


def _blocks(**blocks) -> None:
    for name, b in blocks.items():
        if b is not None:
            check.count(name, b)


def _dtype(name, dtype) -> None:
    if dtype is None:
        return
    try:
        kind = np.dtype(dtype).name
    except TypeError:
        kind = None
    if kind not in ("float32", "float64"):
        raise ValueError(f"{name} must be None, float32 or float64; got {dtype!r}")


def attention(*, x, Q, K, V, beta, normalization, block_q, block_k, dtype, method, **_) -> None:
    matrices(tokens("x", x), Q=Q, K=K, V=V)
    _beta(beta)
    check.choice("normalization", normalization, ("sa", "usa"))
    _blocks(block_q=block_q, block_k=block_k)
    _dtype("dtype", dtype)
    check.choice("method", method, METHODS)


def attention_dense(*, x, Q, K, V, beta, normalization, **_) -> None:
    matrices(tokens("x", x), Q=Q, K=K, V=V)
    _beta(beta)
    check.choice("normalization", normalization, ("sa", "usa"))


def log_normalizer(*, x, Q, K, beta, block_q, block_k, dtype, method, **_) -> None:
    matrices(tokens("x", x), Q=Q, K=K)
    _beta(beta)
    _blocks(block_q=block_q, block_k=block_k)
    _dtype("dtype", dtype)
    check.choice("method", method, METHODS)


def make_model(*, d, Q, K, V, beta, options, **_) -> None:
    d = check.count("d", d, minimum=2)
    matrices(d, sequence=True, **{name: M for name, M in (("Q", Q), ("K", K), ("V", V)) if M is not None})
    _beta(beta)
    unknown = sorted(set(options) - set(Model._fields))
    if unknown:
        raise ValueError(f"unknown model option {unknown[0]!r}; the options are "
                         f"{', '.join(f for f in Model._fields if f not in ('Q', 'K', 'V', 'beta'))}")
    _options(**options)


def _options(*, normalization="sa", project=False, block_q=None, block_k=None, kernel_dtype=None, dense=False,
             kernel_method="auto", circle_order=0, **_) -> None:
    check.choice("normalization", normalization, ("sa", "usa"))
    for name, flag in (("project", project), ("dense", dense)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ValueError(f"{name} must be a boolean; got {flag!r}")
    _blocks(block_q=block_q, block_k=block_k)
    if kernel_dtype not in _DTYPES:
        raise ValueError(f"kernel_dtype must be None, 'float32' or 'float64'; got {kernel_dtype!r}")
    check.choice("kernel_method", kernel_method, METHODS + ("circle",))
    check.count("circle_order", circle_order, minimum=0)  # 0: make_model computes it


def particle_model(m, d=None) -> None:
    """``m`` a valid :class:`~attnlab.bruno.integrate.Model` (for tokens of dimension ``d``, when given)."""
    if not isinstance(m, Model):
        raise ValueError(f"model must be an attnlab.bruno.Model (from make_model); got {type(m).__name__}")
    dim = np.shape(m.Q)[0] if np.ndim(m.Q) == 2 else None
    if d is not None and dim is not None and dim != d:
        raise ValueError(f"the tokens have dimension {d} but the model's matrices are {dim} x {dim}")
    matrices(d if d is not None else dim, **{"model.Q": m.Q, "model.K": m.K, "model.V": m.V})
    _beta(m.beta)
    _options(**m._asdict())
    if m.kernel_method == "circle" and m.circle_order < 1:
        raise ValueError("a model with kernel_method 'circle' needs circle_order >= 1 (make_model sets it)")


def normalize(*, x, **_) -> None:
    if np.ndim(x) < 1:
        raise ValueError(f"x must hold vectors on its last axis; got a scalar {x!r}")
    check.real("x", x)
    if check.is_concrete(x) and np.size(x) and not np.all(np.linalg.norm(np.asarray(x, np.float64), axis=-1) > 0):
        raise ValueError("every row of x must be nonzero to be projected onto the sphere")


def step(*, x, model: Model, dt, scheme, **_) -> None:
    particle_model(model, tokens("x", x))
    check.positive("dt", dt, scalar=True)
    check.choice("scheme", scheme, tuple(ORDER))


def _times(times) -> None:
    t = np.asarray(check.real("times", times, sequence=True), np.float64)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError("times must be a nonempty, strictly increasing sequence of positive numbers")


def simulate(*, x0, model: Model, times, dt, scheme, **_) -> None:
    particle_model(model, tokens("x0", x0, batch=True))
    _times(times)
    check.positive("dt", dt, sequence=True)
    if np.ndim(dt) not in (0, 1) or (np.ndim(dt) == 1 and np.shape(dt) != np.shape(times)):
        raise ValueError(f"dt must be one step size or one per time ({np.shape(times)}); got shape {np.shape(dt)}")
    check.choice("scheme", scheme, tuple(ORDER))


def simulate_adaptive(*, x0, model: Model, times, tol, dt0, dt_max, max_steps, **_) -> None:
    particle_model(model, tokens("x0", x0, batch=True))
    _times(times)
    check.positive("tol", tol, scalar=True)
    if dt0 is not None:
        check.positive("dt0", dt0, scalar=True)
    check.positive("dt_max", dt_max, allow_inf=True, scalar=True)
    check.count("max_steps", max_steps)


def uniform_sphere(*, n, d, **_) -> None:
    check.count("n", n)
    check.count("d", d, minimum=2)


def wrapped_normal_mixture(*, n, means, weights, variances, **_) -> None:
    check.count("n", n)
    if np.ndim(means) > 1 or np.size(means) < 1:
        raise ValueError(f"means must be one angle or a 1-D sequence of angles; got shape {np.shape(means)}")
    check.real("means", means, sequence=True)
    if weights is not None:
        check.real("weights", weights, sequence=True)
    check.nonnegative("variances", variances, sequence=True)


def log_energy(*, x, B, beta, dtype, circle_order=0, **_) -> None:
    matrices(tokens("x", x), B=B)
    _beta(beta)
    _dtype("dtype", dtype)
    _circle(circle_order, B, np.shape(x)[-1])


def order_parameter(*, x, beta, circle_order=0, **_) -> None:
    tokens("x", x)
    _beta(beta)
    _circle(circle_order, np.eye(2), np.shape(x)[-1])


def _circle(order, B, d) -> None:
    """``circle_order`` (0: off) is an order of the Fourier sums, which need tokens on the circle and B = c I."""
    from attnlab.bruno.circle import require_circle

    if check.count("circle_order", order, minimum=0):
        if d != 2:
            raise ValueError(f"circle_order needs tokens on the circle (d = 2); got d = {d}")
        require_circle(np.eye(2), B)


def alignment_closed_form(*, x0, V, t, **_) -> None:
    matrices(tokens("x0", x0), V=V)
    normalize(x=x0)
    check.real("t", t, scalar=True)


def heat_mixture_s2(*, x, means, weights, taus, **_) -> None:
    if np.shape(x)[-1:] != (3,):
        raise ValueError(f"x must hold points of S^2 on its last axis (..., 3); got shape {np.shape(x)}")
    check.real("x", x, sequence=True)
    if np.size(means) % 3 or np.size(means) == 0:
        raise ValueError(f"means must be points of R^3, shape (M, 3); got shape {np.shape(means)}")
    normalize(x=np.reshape(np.asarray(means, np.float64), (-1, 3)))
    M = np.size(means) // 3
    if weights is not None:
        check.shape("weights", np.ravel(weights), (M,))
        check.nonnegative("weights", weights, sequence=True)
        if not np.isclose(np.sum(weights), 1.0):
            raise ValueError(f"weights must sum to 1; got {float(np.sum(weights)):g}")
    check.positive("taus", taus, sequence=True)
    if np.ndim(taus) and np.size(taus) not in (1, M):
        raise ValueError(f"taus must be one heat time or one per mean ({M}); got shape {np.shape(taus)}")
