"""Bayes-optimal state evolution for spiked-SLR (any nu) and max-SLR (nu = inf), and its test error."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import programs
from attnlab._random import jax_normal, split
from attnlab.duranthon.data import check_model, sample_scores
from attnlab.duranthon.replica.anderson import fixed_point
from attnlab.duranthon.replica.samples import FrozenSamples
from attnlab.registry import mean_se

__all__ = ["solve_bayes_optimal", "BOResult", "bayes_optimal_test_error", "bayes_optimal_excess",
           "log_argmax_probs"]


@jax.jit
def _bo_fields(q, noise_var, samples: FrozenSamples):
    """Teacher-centric fields ``omega_a = q_a h*_a + sqrt(q_a - q_a^2) xi_a`` (n, L) and the label variance given
    omega^v, ``Delta + 1 - q_v``, of the Bayes-optimal channels (Nishimori: m = q, V = 1 - q)."""
    q_k, q_v = q
    om_k = q_k * samples.chi + jnp.sqrt(jnp.maximum(q_k - q_k**2, 0.0)) * samples.xi_k
    om_v = q_v * samples.zeta + jnp.sqrt(jnp.maximum(q_v - q_v**2, 0.0)) * samples.xi_v
    return om_k, om_v, noise_var + 1.0 - q_v


@programs.jit
def _bo_hats(q, alpha, sqrt_nu, noise_var, samples: FrozenSamples):
    r"""q_hat_a = alpha E[sum_l (g^a_l)^2] over the frozen samples (teacher-centric: omega = q h* + sqrt(q - q^2) xi),
    one compiled program (eager, each operation of an iteration would be one)."""
    om_k, om_v, s2 = _bo_fields(q, noise_var, samples)
    logit = sqrt_nu * om_k - (samples.y[:, None] - om_v) ** 2 / (2 * s2)
    pi = jnp.where(samples.mask, jax.nn.softmax(jnp.where(samples.mask, logit, -jnp.inf), axis=-1), 0.0)
    g_k2 = sqrt_nu**2 * jnp.sum(pi**2, -1)
    g_v2 = jnp.sum(jnp.where(samples.mask, pi * (samples.y[:, None] - om_v) / s2, 0.0) ** 2, -1)
    return alpha * jnp.stack([jnp.mean(g_k2), jnp.mean(g_v2)])


BO_GH_NODES = 48  # Gauss-Hermite nodes of the argmax probabilities (the integrand is smooth on the unit scale)
_GH_T, _GH_W = np.polynomial.hermite_e.hermegauss(BO_GH_NODES)
_GH_LOGW = np.log(_GH_W / math.sqrt(2 * math.pi))


@jax.jit
def log_argmax_probs(omega_k, mask, V_k):
    r"""``log P(argmax_l (omega_l + sqrt(V_k) t_l) = eps)`` for every token eps (t standard normal, masked tokens
    excluded): the one-dimensional integral ``int phi(t) prod_{l != eps} Phi(t + (omega_eps - omega_l)/sqrt(V_k)) dt``
    by Gauss-Hermite quadrature in log space (``log_ndtr``). ``omega_k``, ``mask`` (L,); -inf on masked tokens."""
    L = omega_k.shape[-1]
    sV = jnp.sqrt(jnp.maximum(V_k, 1e-300))
    d = (omega_k[:, None] - omega_k[None, :]) / sV  # (eps, l)
    lp = jax.scipy.special.log_ndtr(jnp.asarray(_GH_T)[:, None, None] + d[None])
    lp = jnp.where(mask[None, None, :] & ~jnp.eye(L, dtype=bool)[None], lp, 0.0)
    logp = jax.scipy.special.logsumexp(jnp.sum(lp, -1) + jnp.asarray(_GH_LOGW)[:, None], axis=0)
    return jnp.where(mask, logp, -jnp.inf)


_log_argmax_probs_batch = jax.jit(jax.vmap(log_argmax_probs, in_axes=(0, 0, None)))


def _bo_channel_max(q, noise_var, samples: FrozenSamples):
    """Per-sample g^k, g^v (n, L) of the max-SLR (nu = inf) Bayes channel at overlaps q (see
    :func:`solve_bayes_optimal`)."""
    om_k, om_v, s2 = _bo_fields(q, noise_var, samples)
    V_k = 1.0 - q[0]

    def one(ok, ov, y, mask):
        def log_z(o):  # log Z_out up to a constant, and the location logits (log pi~ + log N)
            logits = jnp.where(mask, log_argmax_probs(o, mask, V_k) - (y - ov) ** 2 / (2 * s2), -jnp.inf)
            return jax.scipy.special.logsumexp(logits), logits

        g_k, logits = jax.grad(log_z, has_aux=True)(ok)
        g_v = jnp.where(mask, jax.nn.softmax(logits) * (y - ov) / s2, 0.0)
        return jnp.where(mask, g_k, 0.0), g_v

    return jax.vmap(one)(om_k, om_v, samples.y, samples.mask)


@programs.jit
def _bo_hats_max(q, alpha, noise_var, samples: FrozenSamples):
    g_k, g_v = _bo_channel_max(q, noise_var, samples)
    return alpha * jnp.stack([jnp.mean(jnp.sum(g_k**2, -1)), jnp.mean(jnp.sum(g_v**2, -1))])


def _check_bo_model(model: str, nu) -> float:
    """The models with Bayes-optimal equations here: spiked-SLR (any nu) and max-SLR at nu = inf."""
    if model not in ("spiked", "max"):
        raise ValueError(f"model must be 'spiked' or 'max', got {model!r}")
    nu = check_model(model, nu)
    if model == "max" and not math.isinf(nu):
        raise ValueError("the Bayes-optimal max-SLR equations are implemented for nu = inf only (argmax location)")
    return nu


class BOValue(NamedTuple):
    order: np.ndarray
    hats: np.ndarray

    @property
    def valid(self) -> bool:
        return bool(np.all(np.isfinite(self.order)))


class BOResult(NamedTuple):
    """Bayes-optimal fixed point (q_k, q_v) (= m_k, m_v by Nishimori) and its convergence report."""

    q_k: float
    q_v: float
    residual: float
    n_iter: int
    converged: bool
    status: str
    branch: str = ""
    alpha: float = math.nan


def solve_bayes_optimal(alpha: float, nu: float, samples: FrozenSamples, noise_std: float = 0.0, init=(0.5, 0.5),
                        damping: float = 0.3, tol: float = 1e-10, max_iter: int = 500, method: str = "anderson",
                        branch: str = "", model: str = "spiked") -> BOResult:
    r"""Bayes-optimal state evolution for spiked-SLR, and max-SLR at nu = inf (equations derived here, not taken
    from the paper; teacher prior
    N(0, I_D) on k* and v*).

    The likelihood of a sample relative to the Gaussian base measure of the tokens is
    ``P_out(y | h) = (1/L) sum_eps g_nu(eps, h^k) N(y; h^v_eps, Delta)`` with ``h = X [k*, v*]/sqrt(D)``, a
    two-index sequence model; with the Nishimori identities (M = Q, V = 1 - Q) and the Gaussian prior::

        q_a = q_hat_a / (1 + q_hat_a),   q_hat_a = alpha E[ sum_l (g^a_l)^2 ],   g = grad_omega log Z_out(y, omega, V)
        omega_l = q h*_l + sqrt(q - q^2) xi_l              (teacher fields h* = (chi*, zeta*) from the data law)
        Z_out = (1/L) sum_eps exp(sqrt(nu) omega^k_eps - nu q_k/2) N(y; omega^v_eps, Delta + 1 - q_v)   (closed form)
        g^k_l = sqrt(nu) pi_l,   g^v_l = pi_l (y - omega^v_l)/(Delta + 1 - q_v),
        pi_l ∝ exp(sqrt(nu) omega^k_l) N(y; omega^v_l, Delta + 1 - q_v)         (posterior of the location)

    The q_hat formula ``alpha E[g g^T]`` follows from the heat equation for Z_out and Stein's lemma, and does not
    need ``int P_out dy = 1`` (which fails here: the tilt makes k* weakly visible, sum_l g^k_l = sqrt(nu), so
    q_hat_k >= alpha nu/L > 0 and there is no q = 0 fixed point). Iterated on the frozen ``samples`` (their
    ``y`` must carry the label noise ``noise_std``) by :func:`fixed_point`. References for the general sequence
    multi-index equations: Cui, arXiv 2409.13904 (2025); Troiani et al., arXiv 2502.00901 (2025); for the GLM form
    Barbier, Krzakala, Macris, Miolane, Zdeborova, PNAS 116, 5451 (2019).

    ``model="max"`` (nu = inf: the location is the argmax of the key fields; ``samples`` from max-SLR): the same
    equations with ``P_out(y | h) = sum_eps 1[eps = argmax_l h^k_l] N(y; h^v_eps, Delta)``, a proper likelihood::

        Z_out = sum_eps pi~_eps(omega^k) N(y; omega^v_eps, Delta + 1 - q_v),
        pi~_eps = P(argmax_l (omega^k_l + sqrt(1 - q_k) t_l) = eps)     (1-D Gauss-Hermite, log_argmax_probs)
        g^k = grad_{omega^k} log Z_out (autodiff),   g^v_l = w_l (y - omega^v_l)/(Delta + 1 - q_v),   w ∝ pi~ N

    Checked in the tests: the argmax probabilities against Monte Carlo, and the Nishimori identity
    ``E[sum_l (g^a_l)^2] = -E[sum_l dg^a_l/domega^a_l]`` (it holds here since int P_out dy = 1). Finite nu on
    max-SLR would need an L-dimensional integral per sample and is not implemented."""
    nu = _check_bo_model(model, nu)
    if not alpha > 0 or not math.isfinite(alpha):
        raise ValueError(f"sample ratio alpha must be finite and > 0, got {alpha}")
    noise_var = float(noise_std) ** 2

    def F(q):
        if model == "max":
            h = np.asarray(_bo_hats_max(np.asarray(q, dtype=np.float64), alpha, noise_var, samples))
        else:
            h = np.asarray(_bo_hats(np.asarray(q, dtype=np.float64), alpha, math.sqrt(nu), noise_var, samples))
        return BOValue(h / (1.0 + h), h)

    def feasible(q):
        q = np.asarray(q, dtype=np.float64)
        return np.clip(q, 0.0, 1.0 - 1e-15) if np.all(np.isfinite(q)) else None

    q0 = feasible(init)
    if q0 is None:
        raise ValueError(f"initial overlaps must be finite, got {init}")
    q, _, res, n, status = fixed_point(F, q0, feasible, damping, tol, max_iter, method, memory=5)
    return BOResult(float(q[0]), float(q[1]), res, n, status == "converged", status, branch, float(alpha))


def bayes_optimal_test_error(key, nu: float, L, q_k: float, q_v: float, n: int, noise_std: float = 0.0,
                             model: str = "spiked"):
    r"""Bayes-optimal test error at the fixed point, by Monte Carlo on fresh samples: (mean, SE)::

        E_BO = 1 + Delta - q_v E[ |softmax(sqrt(nu) omega^k)|^2 ],   omega^k = q_k chi* + sqrt(q_k - q_k^2) xi

    (the BO predictor is sum_l softmax(sqrt(nu) omega^k)_l omega^v_l; its error is E y^2 - E yhat^2 by Nishimori, and
    omega^v is independent of omega^k with variance q_v). At q = 1 this is the population Bayes risk (Prop. 4.2).
    ``model="max"`` (nu = inf): softmax(sqrt(nu) omega^k) becomes the argmax probabilities pi~(omega^k) of
    :func:`solve_bayes_optimal`."""
    vals, _ = _bo_test_values(key, nu, L, q_k, q_v, n, noise_std, model)
    return mean_se(vals)


def bayes_optimal_excess(key, nu: float, L, q_k: float, q_v: float, n: int, model: str = "spiked"):
    r"""The Bayes-optimal test error at the fixed point minus the population Bayes risk, ``E_BO - E_Bayes``, by Monte
    Carlo on common samples: (mean, SE of the paired differences). Per sample, ``|softmax(c_nu chi*)|^2 -
    q_v |softmax(sqrt(nu) omega^k)|^2`` (the two risks of :func:`bayes_optimal_test_error` and
    :func:`attnlab.duranthon.population.bayes_risk_mc` on the same draw; at nu = inf on max-SLR the Bayes risk is 0).
    The two risks are strongly correlated, so the SE of the difference is far below either risk's own SE: the
    inequality E_BO >= E_Bayes is resolved at sample sizes where the two unpaired estimates are not."""
    vals, s = _bo_test_values(key, nu, L, q_k, q_v, n, 0.0, model)
    vals = np.asarray(vals)
    if model == "max":  # nu = inf: the location is read off chi* exactly
        return mean_se(vals)
    # the Bayes risk's per-sample value in NumPy (eager JAX would compile a program per operation in every process)
    from scipy.special import softmax

    mask = np.asarray(s.mask)
    pb = np.where(mask, softmax(np.where(mask, math.sqrt(nu) * np.asarray(s.chi), -np.inf), axis=-1), 0.0)
    return mean_se(vals - (1.0 - np.sum(pb * pb, -1)))


def _bo_test_values(key, nu, L, q_k, q_v, n, noise_std, model):
    """Per-sample values of the Bayes-optimal test error and the scores they were drawn on."""
    nu = _check_bo_model(model, nu)
    if not (0 <= q_k <= 1 and 0 <= q_v <= 1):
        raise ValueError(f"Bayes-optimal overlaps lie in [0, 1], got {q_k}, {q_v}")
    ks, kx = split(key)
    s = sample_scores(ks, model, nu, L, n)
    s_k = math.sqrt(max(q_k - q_k**2, 0.0))
    if model == "max":
        om = q_k * s.chi + s_k * jax_normal(kx, s.chi.shape)
        p = jnp.where(s.mask, jnp.exp(_log_argmax_probs_batch(om, s.mask, 1.0 - q_k)), 0.0)
        return 1.0 + noise_std**2 - q_v * jnp.sum(p * p, -1), s
    return _bo_spiked_values(kx, s.chi, s.mask, q_k, s_k, math.sqrt(nu), 1.0 + noise_std**2, q_v), s


@programs.jit
def _bo_spiked_values(key, chi, mask, q_k, s_k, sqrt_nu, second_moment, q_v):
    """``E y^2 - q_v |softmax(sqrt(nu) omega^k)|^2`` per sample, ``omega^k = q_k chi* + s_k xi`` (one compiled
    program; eager, each operation would be one)."""
    om = q_k * chi + s_k * jax.random.normal(key, chi.shape)
    p = jnp.where(mask, jax.nn.softmax(jnp.where(mask, sqrt_nu * om, -jnp.inf), axis=-1), 0.0)
    return second_moment - q_v * jnp.sum(p * p, -1)
