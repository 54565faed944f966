r"""Monte Carlo estimators for SLR risks, drawn from the d-dimensional sampler :func:`attnlab.slr.data.sample_slr`.

Each returns ``(mean, standard_error)`` (:func:`attnlab.slr.montecarlo.mc_mean`, re-exported here) so
that a closed form can be compared at a tolerance derived from the SE.
Samples are drawn in chunks (a ``lax.map`` over chunk keys) to bound memory at large d. The estimators are jitted
with the sizes static and everything else traced, so repeated calls (sweeps, checks) reuse the compiled code.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.scipy.special import erf

from attnlab import programs
from attnlab.marion.predictors import (
    bayes_posterior_from_statistics,
    bayes_predictor,
    erf_attention,
    linear_baseline_predictor,
)
from attnlab.slr.data import sample_slr, sample_slr_in_frame
from attnlab.slr.montecarlo import mc_mean, mc_mean_to_se
from attnlab.slr.overlaps import frame_coordinates

__all__ = ["mc_mean", "mc_mean_to_se", "mc_excess_risk", "mc_excess_risk_to_se", "mc_excess_risk_in_frame",
           "mc_excess_risk_in_frame_to_se", "mc_excess_risk_given_scores", "mc_excess_risk_given_scores_to_se",
           "mc_bayes_risk", "mc_bayes_risk_in_frame", "mc_linear_baseline_risk"]


def _excess_samples(k, v, k_star, v_star, lam, gamma, L: int, eps):
    def f(key, m):
        X, y, _ = sample_slr(key, k_star, v_star, m, L, gamma, eps)
        return (erf_attention(X, k, v, lam) - y) ** 2 - eps**2

    return f


@partial(jax.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk(key, k, v, k_star, v_star, lam, gamma, L: int, n: int, eps=0.0, chunk: int = 2000):
    """Monte Carlo ``E[(T_lambda(X; k, v) - y)^2] - eps^2`` with a uniformly random J0."""
    return mc_mean(key, _excess_samples(k, v, k_star, v_star, lam, gamma, L, eps), n, chunk)


@partial(programs.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk_to_se(key, k, v, k_star, v_star, lam, gamma, L: int, n: int, target_se, eps=0.0,
                         chunk: int = 2000):
    """:func:`mc_excess_risk` drawn until its standard error is at most ``target_se`` (or ``n`` samples), the
    samples of ``mc_excess_risk(key, ..., n)`` in order (:func:`attnlab.slr.montecarlo.mc_mean_to_se`); returns
    ``(mean, SE, count)``."""
    return mc_mean_to_se(key, _excess_samples(k, v, k_star, v_star, lam, gamma, L, eps), target_se, n, chunk)


@partial(programs.jit, static_argnames=("L", "n", "chunk"))
def mc_bayes_risk(key, k_star, v_star, gamma, L: int, n: int, eps=0.0, chunk: int = 2000):
    """Monte Carlo Bayes risk ``E[(E[y|X] - y)^2]`` (the Bayes predictor E[y|X]): at least eps^2, tending to it as J0 becomes
    identifiable."""

    def f(key, m):
        X, y, _ = sample_slr(key, k_star, v_star, m, L, gamma, eps)
        return (bayes_predictor(X, k_star, v_star, gamma) - y) ** 2

    return mc_mean(key, f, n, chunk)


@partial(programs.jit, static_argnames=("L", "n", "chunk"))
def mc_bayes_risk_in_frame(key, gamma, d, L: int, n: int, eps=0.0, chunk: int = 20_000):
    """:func:`mc_bayes_risk` with the tokens drawn by their coordinates in the frame ``(k*, v*, e1, e2)``
    (:func:`attnlab.slr.data.sample_slr_in_frame`) and the squared norm of each token's other ``d - 4``
    coordinates, ``s_l^2 chi^2_{d-4}`` (``s_l`` gamma for the signal token, 1 otherwise): the Bayes posterior needs only
    ``|X_l|^2`` and ``X_l . k*``, the prediction ``X_l . v*`` (:func:`bayes_posterior_from_statistics`), so this is
    the same law at ``4 L + L`` numbers per sequence instead of ``d L``."""

    def f(key, m):
        kz, kr = jax.random.split(key)
        Z, y, scale = sample_slr_in_frame(kz, m, L, gamma, eps, d)
        sq = jnp.sum(Z * Z, axis=-1) + scale**2 * jax.random.chisquare(kr, d - 4.0, (m, L))
        posterior = bayes_posterior_from_statistics(sq, Z[..., 0], d / 2.0, d, gamma)
        return (jnp.sum(posterior * Z[..., 1], axis=-1) - y) ** 2

    return mc_mean(key, f, n, chunk)


@partial(jax.jit, static_argnames=("L", "n", "chunk"))
def mc_linear_baseline_risk(key, k_star, v_star, gamma, L: int, n: int, eps=0.0, chunk: int = 2000):
    """Monte Carlo risk of the best linear predictor (Prop. 3)."""

    def f(key, m):
        X, y, _ = sample_slr(key, k_star, v_star, m, L, gamma, eps)
        return (linear_baseline_predictor(X, v_star, gamma) - y) ** 2

    return mc_mean(key, f, n, chunk)


def _excess_in_frame_samples(o, lam, gamma, d, L: int, eps):
    k4, v4 = frame_coordinates(o)

    def f(key, m):
        Z, y, _ = sample_slr_in_frame(key, m, L, gamma, eps, d)
        return (erf_attention(Z, k4, v4, lam) - y) ** 2 - eps**2

    return f


@partial(jax.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk_in_frame(key, o, lam, gamma, d, L: int, n: int, eps=0.0, chunk: int = 20_000):
    """Monte Carlo ``E[(T_lambda - y)^2] - eps^2`` at overlaps ``o``, the tokens drawn by their coordinates in the frame
    ``(k*, v*, e1, e2)`` (:func:`attnlab.slr.data.sample_slr_in_frame`, the law of the projection of
    :func:`attnlab.slr.data.sample_slr`): 4 L numbers per sequence instead of d L, so the cost does not depend on d."""
    return mc_mean(key, _excess_in_frame_samples(o, lam, gamma, d, L, eps), n, chunk)


@partial(programs.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk_in_frame_to_se(key, o, lam, gamma, d, L: int, n: int, target_se, eps=0.0, chunk: int = 20_000):
    """:func:`mc_excess_risk_in_frame` drawn until its standard error is at most ``target_se`` (or ``n``
    sequences), the sequences of ``mc_excess_risk_in_frame(key, ..., n)`` in order; returns ``(mean, SE, count)``."""
    return mc_mean_to_se(key, _excess_in_frame_samples(o, lam, gamma, d, L, eps), target_se, n, chunk)


def _excess_given_scores_samples(o, lam, gamma, d, L: int):
    a, b = frame_coordinates(o)
    mean_scale = jnp.sqrt(d / 2.0)
    aa, ab = a @ a, a @ b
    inv = jnp.where(aa > 0, 1.0 / jnp.where(aa > 0, aa, 1.0), 0.0)  # k = 0: no score carries information

    def f(key, m):
        kj, ku = jax.random.split(key)
        J0 = jax.random.randint(kj, (m,), 0, L)
        is_signal = jnp.arange(L)[None, :] == J0[:, None]
        scale = jnp.where(is_signal, gamma, 1.0)
        u_mean = jnp.where(is_signal, mean_scale * a[0], 0.0)
        u = u_mean + scale * jnp.sqrt(aa) * jax.random.normal(ku, (m, L))
        e = erf(lam * u)
        w_mean = jnp.where(is_signal, mean_scale * b[0], 0.0) + ab * inv * (u - u_mean)
        w_var = scale**2 * (b @ b - ab**2 * inv)
        y_mean = jnp.sum(jnp.where(is_signal, a[1] * inv * (u - u_mean), 0.0), axis=-1)
        y_var = gamma**2 * (1.0 - a[1] ** 2 * inv)
        wy_cov = gamma**2 * (b[1] - ab * a[1] * inv)
        e_signal = jnp.sum(jnp.where(is_signal, e, 0.0), axis=-1)
        return ((jnp.sum(e * w_mean, axis=-1) - y_mean) ** 2 + jnp.sum(e**2 * w_var, axis=-1)
                - 2.0 * e_signal * wy_cov + y_var)

    return f


@partial(jax.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk_given_scores(key, o, lam, gamma, d, L: int, n: int, chunk: int = 20_000):
    r"""Monte Carlo ``E[(T_lambda - y)^2] - eps^2`` at overlaps ``o`` over the attention scores ``u_l = X_l . k``
    only, the rest integrated exactly (Rao-Blackwell): an unbiased estimator of the same risk as
    :func:`mc_excess_risk_in_frame` with L numbers per sequence instead of 4 L and a smaller variance.

    In the frame ``(k*, v*, e1, e2)`` (:func:`attnlab.slr.data.sample_slr_in_frame`: the law of the projected SLR
    tokens) a token is ``Z_l = m_l + s_l G_l``, ``G_l ~ N(0, I_4)``,
    with ``m_l = sqrt(d/2) e_0``, ``s_l = gamma`` for the signal token ``l = J0`` and ``m_l = 0``, ``s_l = 1``
    otherwise; ``y = Z_{J0} . e_1 + eps xi``. Write ``a = k``, ``b = v`` in the frame (:func:`frame_coordinates`).
    Given the scores ``u_l = Z_l . a`` (Gaussian, drawn here), ``w_l = Z_l . b`` and ``y`` are Gaussian with

    * ``E[w_l | u] = m_l . b + (a . b)(u_l - m_l . a) / |a|^2``, ``Var = s_l^2 (|b|^2 - (a . b)^2 / |a|^2)``;
    * ``E[y | u] = a_1 (u_{J0} - m_{J0} . a) / |a|^2``, ``Var = gamma^2 (1 - a_1^2 / |a|^2) + eps^2``;
    * ``Cov(w_{J0}, y | u) = gamma^2 (b_1 - (a . b) a_1 / |a|^2)``, the other tokens independent of y.

    With ``e_l = erf(lambda u_l)`` and ``T = sum_l e_l w_l``, each sample is
    ``E[(T - y)^2 | u] - eps^2 = (sum_l e_l E[w_l|u] - E[y|u])^2 + sum_l e_l^2 Var(w_l|u)
    - 2 e_{J0} Cov(w_{J0}, y|u) + Var(y|u) - eps^2``, which does not depend on eps. Returns ``(mean, SE)``."""
    return mc_mean(key, _excess_given_scores_samples(o, lam, gamma, d, L), n, chunk)


@partial(programs.jit, static_argnames=("L", "n", "chunk"))
def mc_excess_risk_given_scores_to_se(key, o, lam, gamma, d, L: int, n: int, target_se, chunk: int = 20_000):
    """:func:`mc_excess_risk_given_scores` drawn until its standard error is at most ``target_se`` (or ``n``
    sequences), the sequences of ``mc_excess_risk_given_scores(key, ..., n)`` in order; returns
    ``(mean, SE, count)``."""
    return mc_mean_to_se(key, _excess_given_scores_samples(o, lam, gamma, d, L), target_se, n, chunk)
