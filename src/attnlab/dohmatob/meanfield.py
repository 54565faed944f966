r"""Dohmatob's mean-field theory of softmax attention on SLR (NeurIPS 2025: App. C, Prop. 1, Cor. 1, Prop. 2).

**Random-energy-model constants** (reconstructed from App. C). With ``L - 1 = e^{alpha d}``::

    alpha = log(L - 1) / d,   beta_crit = sqrt(2 alpha),   r = min(beta, beta_crit),
    phi = alpha + beta^2 / 2 (beta <= beta_crit)  or  beta sqrt(2 alpha) (beta > beta_crit),   psi = phi / beta.

For d = 100, L = 20, beta = 1: alpha = 0.02944, beta_crit = psi = r = 0.2427 (tested).

**Localisation probability** ``p(mu) = 1 / (1 + exp(-(c mu - psi) beta d))`` and ``A(mu) = p (1 - p) c beta d =
p'(mu)`` (tested against autodiff).

**Mean-field risk** (Prop. 1, reconstructed; derivation re-done here). The mean-field predictor is
``f ~ p sigma(x_{l*} . v) + (1 - p) sigma(b)`` with ``b = rho r sqrt(d)``; with ``x_{l*} . v = a + gamma G1``,
``a = c zeta sqrt(d)`` and ``x_{l*} . v* = gamma G2``, corr(G1, G2) = nu, ``f - y = p S1 - S2`` where
``S1 = sigma(gamma G1 + a) - sigma(b)``, ``S2 = sigma(gamma G2) - sigma(b)``. Hence::

    R_bar = p^2 H1 - 2 p H2 + H0,   H1 = E S1^2 = H1(1, zeta, rho),  H2 = E S1 S2 = H2(nu, zeta, rho),  H0 = E S2^2.

For the linear link this is exactly Corollary 1, ``(p c zeta + (1 - p) rho r)^2 d + gamma^2 (p^2 - 2 p nu + 1)``
(tested). Closed forms: linear and quadratic by Gaussian moments; ReLU through ``E[(X + h)_+ Y_+] =
phi(0) (h Phi(h/s) + s phi(h/s)) + nu Phi2(h, 0; nu)`` (Stein's lemma, ``s = sqrt(1 - nu^2)``) with
``Phi2(h, 0; nu) = Phi(h)/2 + T(h, nu/s)`` (Owen's T) and a custom JVP whose derivatives (Price's theorem:
``d/dnu = Phi2(h, 0; nu)``) are exact at nu = +-1 too. Any other link: a 64 x 64 bivariate Gauss-Hermite rule
(exact for polynomial links of degree < 64, slowly convergent for kinked ones). The dual kernel
``sigma_bar_gamma(nu) = E sigma(gamma G1) sigma(gamma G2)`` is ``H2`` at ``a = b = 0``.

**Accuracy.** The mean field is accurate where p(mu) ~ 1 (secret token located); below the transition
``mu < psi / c`` it misses O(1) terms at d = 100 (reproduced by the Monte Carlo of this module in
``tests/dohmatob/test_meanfield.py``: at (mu, nu) = (0.2, 0.9) the mean field says 0.5, the exact risk is about 0.91).

**Finding (ReLU and M).** For the ReLU link ``dR_bar/dzeta`` at zeta = 0 equals
``2 gamma p (p phi(0) - E[G2_+ 1{G1 > 0}])``, not 0: the ReLU value's mean depends on zeta, so M is **not**
invariant under the mean-field flow for ReLU unless p in {0, 1} (it is invariant for the linear and quadratic links,
whose H's are even in a at b = 0). See :mod:`attnlab.dohmatob.flows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from attnlab import _validate as check
from attnlab import programs
from attnlab.dohmatob.model import check_beta, check_gamma, get_link, softmax_weights
from attnlab.slr.data import sample_tokens_in_frame
from attnlab.slr.montecarlo import mc_mean, mc_mean_to_se
from attnlab.slr.overlaps import DohmatobOverlaps, frame_coordinates
from attnlab.slr.owen import owens_t

__all__ = [
    "REMConstants",
    "rem_constants",
    "rem_constants_alpha",
    "DohmatobModel",
    "localisation_probability",
    "localisation_derivative",
    "owens_t_any",
    "bvn_cdf_h0",
    "relu_cross_moment",
    "kernel_terms",
    "dual_kernel",
    "mean_field_risk",
    "CLOSED_FORM_ULPS",
    "mean_field_risk_roundoff",
    "corollary1_risk",
    "check_realisable",
    "mc_risk",
    "mc_risk_batch",
    "mc_risk_batches",
    "mc_risk_batches_to_se",
    "mc_risk_gammas",
]

_PHI0 = 1.0 / math.sqrt(2.0 * math.pi)
_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(64)
_GH_W = _GH_W / math.sqrt(2.0 * math.pi)


class REMConstants(NamedTuple):
    """REM constants of the noise tokens (App. C): alpha, beta_crit, r, phi, psi."""

    alpha: float
    beta_crit: float
    r: float
    phi: float
    psi: float


@jax.jit
def rem_constants_alpha(alpha, beta):
    """REM constants from alpha and beta (vectorised, JAX): ``(alpha, beta_crit, r, phi, psi)``."""
    alpha = jnp.asarray(alpha, dtype=jnp.float64)
    beta = jnp.asarray(beta, dtype=jnp.float64)
    beta_crit = jnp.sqrt(2.0 * alpha)
    r = jnp.minimum(beta, beta_crit)
    phi = jnp.where(beta <= beta_crit, alpha + 0.5 * beta**2, beta * beta_crit)
    return REMConstants(alpha, beta_crit, r, phi, phi / beta)


def rem_constants(d: int, L: int, beta) -> REMConstants:
    """REM constants for sequence length L in dimension d: ``alpha = log(L - 1) / d`` (eq. 9, App. C). Domain:
    integers d >= 1 and L >= 2 (one secret token and at least one noise token), beta > 0."""
    d = check.count("d", d)
    L = check.count("L", L, minimum=2)
    beta = check_beta(beta)
    alpha = math.log(L - 1) / d
    beta_crit = math.sqrt(2.0 * alpha)
    phi = alpha + 0.5 * beta**2 if beta <= beta_crit else beta * beta_crit
    return REMConstants(alpha, beta_crit, min(beta, beta_crit), phi, phi / beta)


@dataclass(frozen=True)
class DohmatobModel:
    """Problem constants: dimension d, sequence length L, inverse temperature beta, signal std gamma in (0, 1), link.

    ``zero_r=True`` imposes Condition 3 (r = 0, the regime of the paper's flow analysis) instead of the REM value
    ``r = min(beta, beta_crit)``. Bad input raises ValueError with the offending value.
    """

    d: int
    L: int
    beta: float
    gamma: float
    link: object = "linear"
    zero_r: bool = False

    def __post_init__(self):
        check_gamma(self.gamma)
        get_link(self.link)
        rem_constants(self.d, self.L, self.beta)

    @property
    def c(self) -> float:
        return math.sqrt(1.0 - self.gamma**2)

    @property
    def rem(self) -> REMConstants:
        return rem_constants(self.d, self.L, self.beta)

    @property
    def psi(self) -> float:
        return self.rem.psi

    @property
    def r(self) -> float:
        return 0.0 if self.zero_r else self.rem.r

    @property
    def lam(self) -> float:
        return self.beta * math.sqrt(self.d)

    @property
    def transition_mu(self) -> float:
        """``psi / c``: p(mu) = 1/2 there."""
        return self.psi / self.c


@jax.custom_jvp
def _p_q(x):
    """``(sigmoid(x), sigmoid(-x))`` with derivatives ``+-p q`` computed from both factors, so that ``1 - p`` keeps
    its relative accuracy where p rounds to 1 (the mu-eigenvalues at mu = 1 are of order (1 - p)^2)."""
    return jax.nn.sigmoid(x), jax.nn.sigmoid(-x)


@_p_q.defjvp
def _p_q_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    p, q = _p_q(x)
    return (p, q), (p * q * dx, -p * q * dx)


def localisation_probability(mu, m: DohmatobModel):
    """``p(mu) = sigmoid((c mu - psi) beta d)`` (eq. 20)."""
    return _p_q((m.c * mu - m.psi) * m.beta * m.d)[0]


def localisation_derivative(mu, m: DohmatobModel):
    """``A(mu) = p (1 - p) c beta d = p'(mu)``."""
    p, q = _p_q((m.c * mu - m.psi) * m.beta * m.d)
    return p * q * m.c * m.beta * m.d


# ----------------------------------------------------------------------------------------------------------------
# Bivariate-normal pieces (ReLU)


def owens_t_any(h, a):
    """Owen's T for any real a: :func:`attnlab.slr.owen.owens_t` for |a| <= 1, and for |a| > 1 the identity
    ``T(h, a) = Phi(h)/2 + Phi(a h)/2 - Phi(h) Phi(a h) - T(a h, 1/a)`` (h >= 0; T is even in h, odd in a)."""
    h = jnp.abs(jnp.asarray(h, dtype=jnp.float64))
    a = jnp.asarray(a, dtype=jnp.float64)
    A = jnp.abs(a)
    big = A > 1.0
    A_small = jnp.where(big, 1.0, A)
    A_big = jnp.where(big, A, 2.0)
    t_small = owens_t(h, A_small)
    ah = A_big * h
    t_big = 0.5 * ndtr(h) + 0.5 * ndtr(ah) - ndtr(h) * ndtr(ah) - owens_t(ah, 1.0 / A_big)
    return jnp.sign(a) * jnp.where(big, t_big, t_small)


def bvn_cdf_h0(h, nu):
    """``Phi2(h, 0; nu) = P(X < h, Y < 0)`` for standard normals of correlation nu, exact at nu = +-1:
    ``Phi(h)/2 + T(h, nu / sqrt(1 - nu^2))``; ``Phi(min(h, 0))`` at nu = 1 and ``max(Phi(h) - 1/2, 0)`` at nu = -1."""
    h = jnp.asarray(h, dtype=jnp.float64)
    nu = jnp.asarray(nu, dtype=jnp.float64)
    inner = jnp.abs(nu) < 1.0
    nu_s = jnp.where(inner, nu, 0.0)
    s = jnp.sqrt(1.0 - nu_s**2)
    val = 0.5 * ndtr(h) + owens_t_any(h, nu_s / s)
    edge = jnp.where(nu > 0, ndtr(jnp.minimum(h, 0.0)), jnp.maximum(ndtr(h) - 0.5, 0.0))
    return jnp.where(inner, val, edge)


def _phi(x):
    return jnp.exp(-0.5 * x * x) * _PHI0


def _relu_cross_value(h, nu):
    inner = jnp.abs(nu) < 1.0
    nu_s = jnp.where(inner, nu, 0.0)
    s = jnp.sqrt(1.0 - nu_s**2)
    t = h * ndtr(h / s) + s * _phi(h / s)
    t = jnp.where(inner, t, jnp.maximum(h, 0.0))
    return _PHI0 * t + nu * bvn_cdf_h0(h, nu)


@jax.custom_jvp
def relu_cross_moment(h, nu):
    """``I(h, nu) = E[(X + h)_+ Y_+]``, (X, Y) standard normals of correlation nu (closed form, exact at |nu| = 1).

    Derivatives (custom JVP, valid at |nu| = 1 too): ``dI/dnu = Phi2(h, 0; nu)`` (Price's theorem) and
    ``dI/dh = E[1{X > -h} Y_+] = phi(0) Phi(h / s) + nu phi(h) Phi(-nu h / s)`` (Stein's lemma).
    """
    return _relu_cross_value(h, nu)


def _relu_cross_dh(h, nu):
    inner = jnp.abs(nu) < 1.0
    nu_s = jnp.where(inner, nu, 0.0)
    s = jnp.sqrt(1.0 - nu_s**2)
    val = _PHI0 * ndtr(h / s) + nu * _phi(h) * ndtr(-nu * h / s)
    step = lambda x: jnp.where(x > 0, 1.0, jnp.where(x < 0, 0.0, 0.5))  # noqa: E731
    edge = _PHI0 * step(h) + nu * _phi(h) * step(-nu * h)
    return jnp.where(inner, val, edge)


@relu_cross_moment.defjvp
def _relu_cross_jvp(primals, tangents):
    h, nu = primals
    dh, dnu = tangents
    return relu_cross_moment(h, nu), _relu_cross_dh(h, nu) * dh + bvn_cdf_h0(h, nu) * dnu


# ----------------------------------------------------------------------------------------------------------------
# Dual kernels


def kernel_terms(nu, a, b, gamma, link):
    """``(H1, H2, H0) = (E S1^2, E S1 S2, E S2^2)`` with ``S1 = sigma(gamma G1 + a) - sigma(b)``,
    ``S2 = sigma(gamma G2) - sigma(b)``, corr(G1, G2) = nu. Closed forms for "linear", "quadratic", "relu";
    bivariate Gauss-Hermite (64 x 64 nodes) for any other link."""
    g = gamma
    if link == "linear":
        return g**2 + (a - b) ** 2, g**2 * nu - b * (a - b), g**2 + b**2
    if link == "quadratic":
        b2 = b * b
        eu2 = g**2 + a**2
        eu4 = 3 * g**4 + 6 * g**2 * a**2 + a**4
        euv = g**4 * (1 + 2 * nu**2) + a**2 * g**2
        return eu4 - 2 * b2 * eu2 + b2**2, euv - b2 * (eu2 + g**2) + b2**2, 3 * g**4 - 2 * b2 * g**2 + b2**2
    if link == "relu":
        h = a / g
        b0 = jnp.maximum(b, 0.0)
        m1 = a * ndtr(h) + g * _phi(h)
        m2 = (a**2 + g**2) * ndtr(h) + a * g * _phi(h)
        cross = g**2 * relu_cross_moment(h, nu)
        return m2 - 2 * b0 * m1 + b0**2, cross - b0 * (m1 + g * _PHI0) + b0**2, g**2 / 2 - 2 * b0 * g * _PHI0 + b0**2
    sigma = get_link(link)
    x, w = jnp.asarray(_GH_X), jnp.asarray(_GH_W)
    sb = sigma(b)
    s1 = sigma(g * x + a) - sb
    s2 = sigma(g * x) - sb
    nu_s = jnp.clip(nu, -1.0, 1.0)
    s = jnp.sqrt(1.0 - nu_s**2)
    s2_nu = sigma(g * (nu_s * x[:, None] + s * x[None, :])) - sb
    H2 = jnp.sum(w[:, None] * w[None, :] * s1[:, None] * s2_nu)
    return jnp.sum(w * s1**2), H2, jnp.sum(w * s2**2)


def dual_kernel(nu, gamma, link):
    """``sigma_bar_gamma(nu) = E[sigma(gamma G1) sigma(gamma G2)]``, corr(G1, G2) = nu (the paper's dual kernel).
    Linear ``gamma^2 nu``; quadratic ``gamma^4 (1 + 2 nu^2)``; ReLU ``gamma^2 (sqrt(1 - nu^2) + nu arccos(-nu)) / 2pi``."""
    return kernel_terms(nu, 0.0, 0.0, gamma, link)[1]


def mean_field_risk(o: DohmatobOverlaps, m: DohmatobModel):
    """``R_bar = p^2 H1(1, zeta, rho) - 2 p H2(nu, zeta, rho) + H1(1, 0, rho)`` with ``p = p(mu)`` (Prop. 1, general
    link), the mean-field limit of ``R = E(f - y)^2 - eps^2`` (eq. 10). ``eta`` does not enter."""
    p, q = _p_q((m.c * o.mu - m.psi) * m.beta * m.d)
    a = m.c * o.zeta * math.sqrt(m.d)
    b = o.rho * m.r * math.sqrt(m.d)
    H1, H2, H0 = kernel_terms(o.nu, a, b, m.gamma, m.link)
    # the same polynomial in p, written in q = 1 - p where p > 1/2 (keeps (1 - p) accurate in value and derivatives)
    return jnp.where(p > 0.5, (H1 - 2 * H2 + H0) - 2 * q * (H1 - H2) + q**2 * H1, p**2 * H1 - 2 * p * H2 + H0)


CLOSED_FORM_ULPS = 32
"""Rounding errors, in units of float64's epsilon times the terms' size, allowed each closed-form kernel term and
their combination in :func:`mean_field_risk` (a few operations each; ``ndtr`` and ``erfc`` to a few ulps)."""


def mean_field_risk_roundoff(o: DohmatobOverlaps, m: DohmatobModel):
    """A bound on the float64 round-off of :func:`mean_field_risk`:
    ``k eps (p^2 H1 + 2 p sqrt(H1 H0) + H0)`` with ``k`` = :data:`CLOSED_FORM_ULPS` for the closed-form links and
    ``k + 2 * 64^2`` for the others (a sum of ``n`` products is exact to ``(n - 1) eps`` times the sum of their
    sizes), ``|H2| <= sqrt(H1 H0)`` by Cauchy-Schwarz. Where ``R_bar`` vanishes by algebra (the located points
    with ``sigma(gamma G1) = sigma(gamma G2)`` in law) its computed value is round-off of this size, whose sign
    and digits depend on the order XLA evaluates the terms in; a comparison with a Monte Carlo that resolves
    ``1e-19`` must allow for it. It bounds the error when each kernel term is itself accurate to a few ulps of its
    size, as on M (``a = b = 0``, every term a sum of positive parts)."""
    p, q = _p_q((m.c * o.mu - m.psi) * m.beta * m.d)
    a = m.c * o.zeta * math.sqrt(m.d)
    b = o.rho * m.r * math.sqrt(m.d)
    H1, _, H0 = kernel_terms(o.nu, a, b, m.gamma, m.link)
    k = CLOSED_FORM_ULPS + (0 if m.link in ("linear", "quadratic", "relu") else 2 * len(_GH_X) ** 2)
    H1, H0 = jnp.abs(H1), jnp.abs(H0)
    return k * jnp.finfo(jnp.float64).eps * (p**2 * H1 + 2 * p * jnp.sqrt(H1 * H0) + H0)


def corollary1_risk(o: DohmatobOverlaps, m: DohmatobModel):
    """Corollary 1 (linear link): ``R_bar = (p c zeta + (1 - p) rho r)^2 d + gamma^2 (p^2 - 2 p nu + 1)``,
    ``p = p(mu)``."""
    p = localisation_probability(o.mu, m)
    return (p * m.c * o.zeta + (1 - p) * o.rho * m.r) ** 2 * m.d + m.gamma**2 * (p**2 - 2 * p * o.nu + 1)


# ----------------------------------------------------------------------------------------------------------------
# Monte Carlo of the exact finite-d risk


def check_realisable(o: DohmatobOverlaps) -> None:
    """Raise ValueError unless the overlaps are those of unit vectors u, v with ``u* . v* = 0`` (every point of
    broadcast fields): the Gram matrix of (u*, v*, u, v) is positive semidefinite, i.e. ``mu^2 + eta^2 <= 1``,
    ``zeta^2 + nu^2 <= 1`` and ``(rho - mu zeta - eta nu)^2 <= (1 - mu^2 - eta^2)(1 - zeta^2 - nu^2)``
    (:func:`attnlab._validate.realisable`)."""
    check.realisable("o", o.mu, o.nu, o.zeta, o.eta, o.rho, letters=("mu", "nu", "zeta", "eta", "rho"))


def _predict(Z, o: DohmatobOverlaps, lam, link):
    u4, v4 = frame_coordinates(o.to_marion())
    return jnp.sum(softmax_weights(lam * (Z @ u4)) * get_link(link)(Z @ v4), axis=-1)


def _losses(key, size: int, o: DohmatobOverlaps, m: DohmatobModel, eps: float):
    """``size`` samples of ``(f(X; u, v) - y)^2 - eps^2`` at the overlaps ``o``, tokens drawn in the frame."""
    from attnlab.dohmatob.data import sample_dohmatob_in_frame

    Z, y = sample_dohmatob_in_frame(key, size, m.L, m.gamma, eps, m.d, m.link)
    return (_predict(Z, o, m.lam, m.link) - y) ** 2 - eps**2


def mc_risk(key, o: DohmatobOverlaps, m: DohmatobModel, n: int, eps: float = 0.0, chunk: int = 4000):
    """Monte Carlo of the exact risk ``E(f(X; u, v) - y)^2 - eps^2`` (eq. 10) of softmax attention at d = m.d (finite
    L, exact softmax) at the overlaps ``o``, drawn in the frame (:func:`attnlab.dohmatob.data.sample_dohmatob_in_frame`)
    in chunks of ``chunk`` sequences. Returns ``(mean, SE)``."""
    check_realisable(o)
    o = jax.tree.map(lambda x: jnp.asarray(x, jnp.float64), o)
    return mc_mean(key, lambda k, size: _losses(k, size, o, m, eps), n, chunk)


def _mc_risk_points(key, o: DohmatobOverlaps, m: DohmatobModel, n: int, eps: float):
    def one(key, oo):
        loss = _losses(key, n, oo, m, eps)
        return jnp.mean(loss), jnp.std(loss, ddof=1) / math.sqrt(n)

    return jax.lax.map(lambda a: one(*a), (jax.random.split(key, o.mu.shape[0]), o))


def _points(o: DohmatobOverlaps) -> DohmatobOverlaps:
    """The overlaps as float64 arrays of one common shape (k,) (scalars broadcast)."""
    return DohmatobOverlaps(*jnp.broadcast_arrays(*(jnp.asarray(x, dtype=jnp.float64) for x in o)))


def mc_risk_batch(key, o: DohmatobOverlaps, m: DohmatobModel, n: int, eps: float = 0.0):
    """Monte Carlo exact risk (as :func:`mc_risk`) at a batch of k points ``o`` (fields of shape (k,); scalars
    broadcast), one independent in-frame sample of n sequences per point (one compiled call, the points one after
    the other so a sample's (n, L, 4) tokens are the only large array). Returns ``(mean, SE)``, each of shape (k,)."""
    return _mc_risk_points_jit(key, _points(o), m, n, eps)


@partial(programs.jit, static_argnames=("m", "n", "eps"))
def _mc_risk_points_jit(key, o: DohmatobOverlaps, m: DohmatobModel, n: int, eps: float):
    return _mc_risk_points(key, o, m, n, eps)


def mc_risk_batches(keys, os, models, n: int, eps: float = 0.0):
    """:func:`mc_risk_batch` for several models (e.g. one per link) in one compiled call: ``keys``, ``os`` (each a
    :class:`~attnlab.slr.overlaps.DohmatobOverlaps` batch) and ``models`` are sequences of the same length; returns a
    list of ``(mean, SE)``."""
    return _mc_risk_batches(list(keys), [_points(o) for o in os], tuple(models), n, eps)


@partial(programs.jit, static_argnames=("models", "n", "eps"))
def _mc_risk_batches(keys, os, models, n: int, eps: float):
    return [_mc_risk_points(k, o, m, n, eps) for k, o, m in zip(keys, os, models)]


def mc_risk_batches_to_se(keys, os, models, target_se, n: int, eps: float = 0.0, chunk: int = 2000):
    """:func:`mc_risk_batches` drawn point by point only as far as each point's standard error needs
    (:func:`attnlab.slr.mc_mean_to_se`: chunks of ``chunk`` sequences until SE <= the point's ``target_se``, at most
    ``n``; ``inf`` draws the minimum of two chunks, 0 all ``n``). ``target_se`` is a sequence of arrays shaped like
    ``os``' points. One compiled call; returns a list of ``(mean, SE, count)``."""
    return _mc_risk_batches_to_se(list(keys), [_points(o) for o in os], [jnp.asarray(t, jnp.float64) for t in target_se],
                                  tuple(models), n, eps, chunk)


@partial(programs.jit, static_argnames=("models", "n", "eps", "chunk"))
def _mc_risk_batches_to_se(keys, os, target_se, models, n: int, eps: float, chunk: int):
    def points(key, o, target, m):
        def one(key, oo, t):
            return mc_mean_to_se(key, lambda k, size: _losses(k, size, oo, m, eps), t, n, chunk)

        return jax.lax.map(lambda a: one(*a), (jax.random.split(key, o.mu.shape[0]), o, target))

    return [points(k, o, t, m) for k, o, t, m in zip(keys, os, target_se, models)]


def mc_risk_gammas(keys, o: DohmatobOverlaps, gammas, d: int, L: int, beta: float, link, n: int):
    """:func:`mc_risk_batch` at one point ``o`` (scalars) for several signal stds ``gammas`` (k,) at once, each with its
    key of ``keys`` (k,): the same draws as ``mc_risk_batch(key, o, DohmatobModel(d, L, beta, gamma, link), n)`` for
    each ``(key, gamma)``, in one compiled program per (o, d, L, beta, link, n), gamma a traced value (a model per
    gamma would compile a program per gamma). Returns ``(mean, SE)``, each (k,)."""

    for g in np.atleast_1d(np.asarray(gammas, dtype=float)):
        check_gamma(float(g))
    get_link(link)
    return _mc_risk_gammas(keys, jnp.asarray(gammas, jnp.float64), tuple(float(x) for x in o), d, L, beta, link, n)


@partial(programs.jit, static_argnames=("o", "d", "L", "beta", "link", "n"))
def _mc_risk_gammas(keys, gammas, o: tuple, d: int, L: int, beta: float, link, n: int):
    from attnlab._random import normal

    sigma = get_link(link)
    lam = beta * math.sqrt(d)
    o = DohmatobOverlaps(*(jnp.asarray(x, jnp.float64) for x in o))

    def one(key, g):
        key = jax.random.split(key, 1)[0]  # mc_risk_batch's key of its first (only) point
        Z, y, _ = sample_tokens_in_frame(key, n, L, g, 0.0, jnp.sqrt(1.0 - g**2) * math.sqrt(d), sigma, normal)
        loss = (_predict(Z, o, lam, link) - y) ** 2
        return jnp.mean(loss), jnp.std(loss, ddof=1) / math.sqrt(n)

    return jax.lax.map(lambda a: one(*a), (keys, gammas))
