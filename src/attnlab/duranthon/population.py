r"""Population level (alpha = infinity) of Duranthon et al. (2025): risk on M, Bayes risk, linear closed forms.

**Risk on M from four overlaps (derived here, verified against R^D).** With ``chi = m_k chi* + s_k a``,
``s_k = sqrt(q_k - m_k^2)`` and ``a`` i.i.d. N(0, 1)::

    E(m_k, q_k, m_v, q_v) = 1 + noise_std^2 - 2 m_v A + q_v B,     A = E[sigma(chi)_{eps*}],   B = E[|sigma(chi)|^2]

(a random L is averaged inside A and B: (k, v) are shared). Optimising the v-sector gives
``E_pop(sigma) = 1 + noise_std^2 - sup_{m_k, s_k} A^2/B``. A and B are Monte Carlo means over frozen samples of
:func:`attnlab.duranthon.data.sample_scores`; every returned risk carries its standard error, and optimised
risks are re-evaluated on fresh samples so that the optimisation does not bias them. The formula is checked against
the predictor evaluated on sequences in R^D (:func:`attnlab.duranthon.erm.fresh_test_error`) in the tests and in the presets.

**Bayes risk (Prop. 4.2).** ``E_Bayes = 1 + noise_std^2 - E|softmax(c_nu chi*)|^2`` with c_nu = sqrt(nu) (spiked),
nu (max); for L <= 2 by 1-D quadrature (``delta = chi_1 - chi_2 ~ N(sqrt(nu), 2)`` for spiked, ``N(0, 2)`` for
max-SLR: ``E_Bayes = E[1/(2 cosh^2(c_nu delta/2))]``), otherwise by Monte Carlo.

**Linear attention, exact (the paper's eq. (12) gives its large-nu form).** With ``sigma = 1 + kappa chi*`` (s_k = 0),
``A = 1 + kappa a_1`` and ``B = b_0 + 2 kappa b_1 + kappa^2 b_2`` are quadratic in u = (1, kappa), so ``sup A^2/B =
a^T Bm^{-1} a`` with a = (1, a_1), Bm = [[b_0, b_1], [b_1, b_2]] (generalised Rayleigh quotient; the optimal u is
Bm^{-1} a). Spiked: a_1 = b_1 = sqrt(nu), b_0 = E[L], b_2 = E[L] + nu. Max: a_1 = E[mu_L(nu)], b_1 = 0, b_0 = b_2 =
E[L], with ``mu_L(nu) = E[chi*_{eps*}] = nu (1 - E|softmax(nu chi)|^2)`` (Stein's lemma on i.i.d. chi) and ``mu_L(inf)
= E[max of L i.i.d. N(0,1)]``. For fixed L this reproduces ``L(L-1)/(L^2 + nu(L-1))`` (spiked) and ``1 - (1 +
mu_L^2)/L`` (max).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab._random import split
from attnlab.duranthon.activations import Activation, activation
from attnlab.duranthon.data import Scores, c_nu, check_model, length_law, sample_scores, sample_scores_and_normals
from attnlab.registry import mean_se

__all__ = ["softmax_pair_risk", "bayes_risk_quad", "bayes_risk_mc", "bayes_risk_is", "expected_max_gaussian", "mu_max",
           "linear_risk", "linear_spiked_fixed_L", "overlap_risk", "overlap_risk_gradient",
           "ab_statistics", "OptimalScale", "optimal_key_scale",
           "vectors_on_manifold", "centred_linear_spiked_asymptote"]


def _pair_bayes(c: float, shift: float) -> float:
    """E[1/(2 cosh^2(c delta/2))], delta ~ N(shift, 2) (the L = 2 Bayes risk), by adaptive quadrature."""
    import scipy.integrate

    if math.isinf(c):
        return 0.0
    if c == 0.0:
        return 0.5

    def f(t):
        d = shift + math.sqrt(2.0) * t
        x = abs(c * d / 2.0)
        return 2.0 * math.exp(-2.0 * x) / (1.0 + math.exp(-2.0 * x)) ** 2 * math.exp(-t * t / 2) / math.sqrt(2 * math.pi)

    t0 = -shift / math.sqrt(2.0)
    a = scipy.integrate.quad(f, -np.inf, t0, epsabs=0.0, epsrel=1e-11, limit=400)[0]
    b = scipy.integrate.quad(f, t0, np.inf, epsabs=0.0, epsrel=1e-11, limit=400)[0]
    return a + b


def softmax_pair_risk(kappa, model: str, nu) -> float:
    """Noiseless risk ``1 - A^2/B`` of softmax attention with key scale kappa (s_k = 0) at L = 2, by quadrature:
    ``sigma_{eps*} = sigmoid(kappa delta)`` and ``|sigma|^2 = 1 - 2 sigmoid(kappa delta) sigmoid(-kappa delta)`` with
    ``delta = chi*_{eps*} - chi*_other ~ N(sqrt(nu), 2)`` (spiked) [max-SLR needs the tilted law: not handled]."""
    import scipy.integrate

    nu = check_model(model, nu)
    if model != "spiked":
        raise ValueError("softmax_pair_risk handles spiked-SLR only")
    shift = math.sqrt(nu)

    def expect(g):
        f = lambda t: g(shift + math.sqrt(2.0) * t) * math.exp(-t * t / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        return scipy.integrate.quad(f, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-12, limit=400)[0]

    sig = lambda d: 0.5 * (1.0 + math.tanh(kappa * d / 2.0))  # noqa: E731
    A = expect(sig)
    B = 1.0 - 2.0 * expect(lambda d: sig(d) * (1.0 - sig(d)))
    return 1.0 - A * A / B


def bayes_risk_quad(model: str, nu, L, noise_std: float = 0.0) -> float:
    """Bayes risk by quadrature, for lengths in {1, 2} only (L = 1: the location is known, risk = noise)."""
    nu = check_model(model, nu)
    law = length_law(L)
    if law.L_max > 2:
        raise ValueError("bayes_risk_quad handles L in {1, 2}; use bayes_risk_mc for longer sequences")
    c = c_nu(model, nu)
    shift = math.sqrt(nu) if model == "spiked" else 0.0
    per_L = {1: 0.0, 2: _pair_bayes(c, shift)}
    return noise_std**2 + sum(p * per_L[v] for v, p in zip(law.values, law.probs))


@programs.jit
def _softmax_sq_norm(c, c_is_inf, chi, mask):
    p = jax.nn.softmax(jnp.where(mask, jnp.where(c_is_inf, 0.0, c) * chi, -jnp.inf), axis=-1)
    return jnp.where(c_is_inf, 1.0, jnp.sum(jnp.where(mask, p, 0.0) ** 2, axis=-1))


def bayes_risk_mc(key, model: str, nu, L, n: int, noise_std: float = 0.0):
    """Monte Carlo Bayes risk ``1 + noise^2 - E|softmax(c_nu chi*)|^2``; returns (mean, standard error)."""
    s = sample_scores(key, model, nu, L, n)
    c = c_nu(model, nu)
    w2 = np.asarray(_softmax_sq_norm(0.0 if math.isinf(c) else c, math.isinf(c), s.chi, s.mask))
    return mean_se(1.0 + noise_std**2 - w2)


@partial(programs.jit, static_argnames=("L", "n"))
def _bayes_is_values(key, sqrt_nu, L: int, n: int, defensive):
    """Weighted values ``w g`` of :func:`bayes_risk_is` for a fixed length L >= 2 (signal token at index 0)."""
    ku, kl, kz = jax.random.split(key, 3)
    a = sqrt_nu / 2.0
    nominal = jax.random.uniform(ku, (n,)) < defensive
    comp = jax.random.randint(kl, (n,), 1, L)  # the noise token pushed up to meet the signal one
    onehot = jnp.arange(L)[None, :] == comp[:, None]
    shift = jnp.where(nominal[:, None], 0.0, a * (onehot.astype(float) - (jnp.arange(L) == 0)[None, :]))
    z = jax.random.normal(kz, (n, L)) + shift
    # log q_l/p = a (z_l - z_0) - a^2 for l = 1..L-1; q/p = defensive + (1 - defensive)/(L - 1) sum_l q_l/p
    log_r = a * (z[:, 1:] - z[:, :1]) - a * a
    log_qp = jnp.logaddexp(jnp.log(defensive),
                           jnp.log1p(-defensive) - jnp.log(L - 1.0) + jax.scipy.special.logsumexp(log_r, axis=1))
    chi = z.at[:, 0].add(sqrt_nu)
    p = jax.nn.softmax(sqrt_nu * chi, axis=-1)
    g = 1.0 - jnp.sum(p**2, axis=-1)
    return jnp.exp(-log_qp) * g


def bayes_risk_is(key, nu, L, n: int, noise_std: float = 0.0, defensive: float = 0.1):
    r"""Bayes risk of spiked-SLR, ``1 + noise^2 - E|softmax(sqrt(nu) chi*)|^2``, by importance sampling: (mean, SE).

    At large nu the excess ``1 - |softmax|^2`` is of order e^{-nu/4}/sqrt(nu) and comes from the rare confusion
    events ``chi*_l ~ chi*_{eps*}``: plain Monte Carlo sees a handful of them. With the signal token
    at index 0 (``chi_0 = sqrt(nu) + z_0``, ``chi_l = z_l``, z standard normal), the proposal is the mixture
    ``q = d p + (1 - d)/(L - 1) sum_{l >= 1} q_l``, where ``q_l`` shifts ``z_0`` by ``-sqrt(nu)/2`` and ``z_l`` by
    ``+sqrt(nu)/2`` (so that ``chi_l - chi_0 ~ N(0, 2)``: the confusion is typical under q_l) and ``d`` =
    ``defensive`` keeps a share of nominal draws (bounded weights). Weights ``p/q`` in closed form,
    ``q_l/p = exp(sqrt(nu)/2 (z_l - z_0) - nu/4)``. Unbiased for any nu; tested against the L = 2 quadrature
    (:func:`bayes_risk_quad`) up to nu = 200 (risk ~1e-23) and against plain Monte Carlo at L = 3.
    ``L`` an int or a length law (lengths mixed by their probabilities, L = 1 contributing 0)."""
    nu = check_model("spiked", nu)
    if not 0.0 < defensive < 1.0:
        raise ValueError(f"defensive share must be in (0, 1), got {defensive}")
    if n < 2:
        raise ValueError(f"number of samples n must be >= 2, got {n}")
    law = length_law(L)
    mean, var = noise_std**2, 0.0
    for v, p in zip(law.values, law.probs):
        if v == 1 or p == 0.0:
            continue
        vals = _bayes_is_values(jax.random.fold_in(key, v), math.sqrt(nu), int(v), int(n), defensive)
        mean += p * float(jnp.mean(vals))
        var += (p * float(jnp.std(vals, ddof=1))) ** 2 / n
    return mean, math.sqrt(var)


_SQRT_2PI = np.sqrt(2 * np.pi)


def expected_max_gaussian(L: int) -> float:
    """E[max of L i.i.d. N(0, 1)] by quadrature (0, 1/sqrt(pi), 3/(2 sqrt(pi)), ...)."""
    import scipy.integrate
    import scipy.special

    if L == 1:
        return 0.0
    # the standard normal density and distribution function as scipy.stats.norm computes them (importing
    # scipy.stats, which builds every distribution's docstring, would slow every process that loads this paper)
    f = lambda x: x * L * (np.exp(-x**2 / 2.0) / _SQRT_2PI) * scipy.special.ndtr(x) ** (L - 1)  # noqa: E731
    return scipy.integrate.quad(f, -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12)[0]


def mu_max(nu, L: int, key=None, n: int = 400_000):
    """``mu_L(nu) = E[chi*_{eps*}]`` on max-SLR, with its standard error: exact for nu = inf or L <= 2, else Monte
    Carlo through ``nu (1 - E|softmax(nu chi)|^2)``."""
    nu = check_model("max", nu)
    if L == 1 or nu == 0.0:
        return 0.0, 0.0
    if math.isinf(nu):
        return expected_max_gaussian(L), 0.0
    if L == 2:
        return nu * _pair_bayes(nu, 0.0), 0.0
    if key is None:
        raise ValueError("mu_max needs a key for finite nu and L >= 3 (Monte Carlo)")
    mean, se = bayes_risk_mc(key, "max", nu, L, n)
    return nu * mean, nu * se


def linear_risk(model: str, nu, L, noise_std: float = 0.0, key=None, n: int = 400_000):
    """Optimal linear (1 + kappa chi) attention risk on M: (risk, standard error, optimal kappa). Exact except for
    max-SLR at finite nu with some L >= 3, where mu_L comes from Monte Carlo (SE propagated to first order)."""
    nu = check_model(model, nu)
    law = length_law(L)
    Lbar = law.mean
    if model == "spiked":
        a1, a1_se, b = math.sqrt(nu), 0.0, np.array([[Lbar, math.sqrt(nu)], [math.sqrt(nu), Lbar + nu]])
    else:
        mus = [mu_max(nu, v, None if key is None else jax.random.fold_in(key, v), n) for v in law.values]
        a1 = sum(p * m for p, (m, _) in zip(law.probs, mus))
        a1_se = math.sqrt(sum((p * s) ** 2 for p, (_, s) in zip(law.probs, mus)))
        b = np.array([[Lbar, 0.0], [0.0, Lbar]])
    a = np.array([1.0, a1])
    u = np.linalg.solve(b, a)
    sup = float(a @ u)
    # d sup / d a1 = 2 u[1]
    return 1.0 + noise_std**2 - sup, abs(2.0 * u[1]) * a1_se, float(u[1] / u[0])


def linear_spiked_fixed_L(nu, L: int) -> float:
    """The closed form ``L(L-1) / (L^2 + nu(L-1))`` (spiked-SLR, fixed L, noiseless)."""
    check_model("spiked", nu)
    return L * (L - 1) / (L * L + nu * (L - 1))


def centred_linear_spiked_asymptote(nu, L: int) -> float:
    """The large-nu asymptote of the centred linearisation on spiked-SLR: ``(L - 1)/nu``."""
    return (L - 1) / nu


def ab_statistics(act: Activation, scores: Scores, a, m_k, s_k):
    """Per-sample ``sigma(chi)_{eps*}`` and ``|sigma(chi)|^2`` with ``chi = m_k chi* + s_k a`` (both (n,))."""
    return _ab(dataclasses.replace(act, c=0.0), scores, a, m_k, s_k, act.c)


@partial(programs.jit, static_argnames=("act",))
def _ab(act: Activation, scores: Scores, a, m_k, s_k, c):
    chi = m_k * scores.chi + s_k * a
    w = act(chi, scores.mask, c)
    w_eps = jnp.take_along_axis(w, scores.eps[:, None], axis=-1)[:, 0]
    return w_eps, jnp.sum(w * w, axis=-1)


def _frozen(key, model, nu, L, n):
    s, (a,) = sample_scores_and_normals(key, model, nu, L, n, 1)
    return s, a


def overlap_risk(key, act: Activation, model: str, nu, L, m_k, q_k, m_v, q_v, n: int, noise_std: float = 0.0):
    """Risk on M from the four overlaps, ``1 + noise_std^2 - 2 m_v A + q_v B`` (module
    docstring), by Monte Carlo: (mean, standard error)."""
    if q_k < m_k**2 - 1e-12 or q_v < m_v**2 - 1e-12:
        raise ValueError(f"need q >= m^2 (Cauchy-Schwarz), got (m_k, q_k, m_v, q_v) = {(m_k, q_k, m_v, q_v)}")
    s, a = _frozen(key, model, nu, L, n)
    # the per-sample statistics come from one compiled program; their combination and reduction run in NumPy
    # (eager JAX would compile a small program for each of these operations in every new process)
    we, w2 = (np.asarray(x) for x in ab_statistics(act, s, a, m_k, math.sqrt(max(q_k - m_k**2, 0.0))))
    return mean_se(1.0 + noise_std**2 - 2.0 * float(m_v) * we + float(q_v) * w2)


def overlap_risk_gradient(key, act: Activation, model: str, nu, L, m_k, q_k, m_v, q_v, n: int,
                          noise_std: float = 0.0):
    """The risk on M of :func:`overlap_risk` (the same frozen samples for the same ``key`` and ``n``) and its gradient
    with respect to ``(m_k, q_k, m_v, q_v)``, by forward-mode differentiation of the Monte Carlo mean
    ``1 + noise_std^2 - 2 m_v A + q_v B`` with ``chi = m_k chi* + s_k a``, ``s_k = sqrt(q_k - m_k^2)``::

        dE/dm_v = -2 A,   dE/dq_v = B,   dE/dq_k = (dE/ds_k) / (2 s_k),   dE/dm_k = (dE/dm_k)|_{s_k} - m_k (dE/ds_k) / s_k

    Returns ``(E, gradient (4,))``; needs q_k > m_k^2 (s_k > 0)."""
    if not (q_k > m_k**2 and q_v >= m_v**2 - 1e-12):
        raise ValueError(f"the gradient needs q_k > m_k^2 and q_v >= m_v^2, got {(m_k, q_k, m_v, q_v)}")
    s, a = _frozen(key, model, nu, L, n)
    act0 = dataclasses.replace(act, c=0.0)

    def risk(p):
        we, w2 = _ab(act0, s, a, p[0], jnp.sqrt(p[1] - p[0] ** 2), act.c)
        return jnp.mean(1.0 + noise_std**2 - 2.0 * p[2] * we + p[3] * w2)

    p = jnp.asarray([m_k, q_k, m_v, q_v], dtype=jnp.float64)
    value, grad = jax.value_and_grad(risk)(p)
    return float(value), np.asarray(grad, dtype=np.float64)


class OptimalScale(NamedTuple):
    """Result of :func:`optimal_key_scale`: the optimal key scale ``kappa`` (= m_k, s_k = 0), the erf shift ``c``,
    the optimal value scale ``m_v = A/B``, the risk ``1 - A^2/B`` re-evaluated on fresh samples with its SE, whether
    kappa is at the search's upper end, and whether SciPy's optimiser reported convergence."""

    kappa: float
    c: float
    m_v: float
    risk: float
    se: float
    at_bound: bool
    converged: bool = True


def _ratio_risk(we, w2, noise_std):
    """1 + noise^2 - A^2/B with its delta-method standard error."""
    n = we.size
    A, B = float(jnp.mean(we)), float(jnp.mean(w2))
    cov = np.cov(np.stack([np.asarray(we), np.asarray(w2)])) / n
    g = np.array([2 * A / B, -(A * A) / (B * B)])
    return 1.0 + noise_std**2 - A * A / B, float(math.sqrt(max(g @ cov @ g, 0.0))), A / B


def optimal_key_scale(key, act: Activation, model: str, nu, L, n: int = 100_000, noise_std: float = 0.0,
                      kappa_max: float = 30.0, optimise_c: bool = True) -> OptimalScale:
    """Minimise ``1 - A^2/B`` over the key scale kappa in [0, kappa_max] (s_k = 0), and over the erf
    shift c when ``act`` is erf and ``optimise_c``; on frozen samples, then re-evaluated on fresh ones."""
    import scipy.optimize

    nu = check_model(model, nu)
    if kappa_max <= 0:
        raise ValueError(f"kappa_max must be > 0, got {kappa_max}")
    k_fit, k_eval = split(key)
    s, a = _frozen(k_fit, model, nu, L, n)

    def neg(kappa, act_):
        we, w2 = ab_statistics(act_, s, a, kappa, 0.0)
        val = -float(jnp.mean(we)) ** 2 / float(jnp.mean(w2))
        return val if math.isfinite(val) else math.inf

    def best_kappa(act_):
        grid = np.linspace(0.0, kappa_max, 31)
        vals = [neg(g, act_) for g in grid]
        i = int(np.argmin(vals))
        lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        r = scipy.optimize.minimize_scalar(lambda x: neg(x, act_), bounds=(lo, hi), method="bounded",
                                           options={"xatol": 1e-6})
        return float(r.x), bool(r.success)

    if act.name == "erf" and optimise_c:
        def neg2(x):
            return neg(x[0], activation("erf", x[1]))

        starts = [(kap, c0) for kap in (0.5, 1.5) for c0 in (-1.5, -0.5, 0.5)]
        x0 = min(starts, key=neg2)
        r = scipy.optimize.minimize(neg2, x0, method="Nelder-Mead", bounds=[(0.0, kappa_max), (-4.0, 4.0)],
                                    options={"xatol": 1e-5, "fatol": 1e-10, "maxiter": 200})
        act = activation("erf", float(r.x[1]))
        kappa, converged = float(r.x[0]), bool(r.success)
    else:
        kappa, converged = best_kappa(act)
    s2, a2 = _frozen(k_eval, model, nu, L, n)
    we, w2 = ab_statistics(act, s2, a2, kappa, 0.0)
    risk, se, m_v = _ratio_risk(we, w2, noise_std)
    return OptimalScale(kappa, act.c, m_v, risk, se, bool(kappa > 0.999 * kappa_max), converged)


def vectors_on_manifold(key, k_star, v_star, m_k, q_k, m_v, q_v):
    """Student (k, v) with overlaps (m_k, q_k, m_v, q_v) and zero cross terms (on M): ``k = m_k k* + s_k e1``,
    ``v = m_v v* + s_v e2`` with e1, e2 orthonormal, orthogonal to k*, v*, scaled to norm sqrt(D)."""
    return _on_manifold(key, k_star, v_star, m_k, math.sqrt(max(q_k - m_k**2, 0.0)), m_v,
                        math.sqrt(max(q_v - m_v**2, 0.0)))


@programs.jit
def _on_manifold(key, k_star, v_star, m_k, s_k, m_v, s_v):
    D = k_star.shape[-1]
    B = jnp.stack([k_star, v_star, *jax.random.normal(key, (2, D))], axis=1)
    Q, R = jnp.linalg.qr(B)
    Q = Q * jnp.sign(jnp.diag(R))
    e1, e2 = math.sqrt(D) * Q[:, 2], math.sqrt(D) * Q[:, 3]
    return m_k * k_star + s_k * e1, m_v * v_star + s_v * e2
