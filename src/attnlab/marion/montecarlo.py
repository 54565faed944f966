r"""Monte Carlo estimators for SLR risks, drawn from the d-dimensional sampler :func:`attnlab.slr.data.sample_slr`.

Each returns ``(mean, standard_error)`` (:func:`attnlab.slr.montecarlo.mc_mean`, re-exported here) so
that a closed form can be compared at a tolerance derived from the SE.
Samples are drawn in chunks (a ``lax.map`` over chunk keys) to bound memory at large d. The estimators are jitted
with the sizes static and everything else traced, so repeated calls (sweeps, checks) reuse the compiled code.
"""

from __future__ import annotations

from functools import partial

import jax

from attnlab import programs
from attnlab.marion.predictors import bayes_predictor, erf_attention, linear_baseline_predictor
from attnlab.slr.data import sample_slr, sample_slr_in_frame
from attnlab.slr.montecarlo import mc_mean, mc_mean_to_se
from attnlab.slr.overlaps import frame_coordinates

__all__ = ["mc_mean", "mc_mean_to_se", "mc_excess_risk", "mc_excess_risk_to_se", "mc_excess_risk_in_frame",
           "mc_excess_risk_in_frame_to_se", "mc_bayes_risk", "mc_linear_baseline_risk"]


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
