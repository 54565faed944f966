r"""Predictors for single-location regression (Marion et al., ICLR 2025; the linear baseline of Prop. 3).

* erf-attention (Marion et al.): ``T_lambda(X; k, v) = sum_l erf(lambda X_l . k) (X_l . v) = erf(lambda X k)^T (X v)``;
* the oracle ``T_lambda(X; k*, v*)``;
* the best linear predictor ``sum_l beta_l . X_l`` with ``beta_l = gamma^2 / (gamma^2 + L - 1) v*`` (random J0);
* the Bayes predictor ``E[y | X] = sum_l P(J0 = l | X) X_l . v*``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import erf

__all__ = ["LAMBDA_MAX", "erf_attention", "oracle_predictor", "linear_baseline_predictor", "bayes_posterior",
           "bayes_predictor"]


LAMBDA_MAX = 1e4
"""The largest attention scale lambda a preset accepts: beyond it ``erf(lambda X_l . k)`` equals ``sign(X_l . k)`` to
float64 round-off (``|erf(x)| = 1`` for ``|x| > 6``) for all but a fraction 5e-4 of the noise tokens
(``|X_l . k| < 6e-4``, ``X_l . k ~ N(0, 1)``): larger values change nothing but bring the closed form's
``lambda^2`` terms towards overflow."""


def erf_attention(X, k, v, lam):
    """``T_lambda(X; k, v) = sum_l erf(lambda X_l . k) (X_l . v)`` for X of shape (..., L, d)."""
    return jnp.sum(erf(lam * (X @ k)) * (X @ v), axis=-1)


def oracle_predictor(X, k_star, v_star, lam):
    """The oracle ``T_lambda(X; k*, v*)``."""
    return erf_attention(X, k_star, v_star, lam)


def linear_baseline_predictor(X, v_star, gamma):
    """The best linear predictor under a uniformly random J0: ``gamma^2 / (gamma^2 + L - 1) sum_l X_l . v*``."""
    L = X.shape[-2]
    return gamma**2 / (gamma**2 + L - 1) * jnp.sum(X @ v_star, axis=-1)


def bayes_posterior(X, k_star, gamma):
    """``P(J0 = l | X)``: softmax over l of the log likelihood ratio of N(sqrt(d/2) k*, gamma^2 I) against N(0, I).

    ``log LR_l = -|X_l - m|^2 / (2 gamma^2) + |X_l|^2 / 2`` (the common ``-d log gamma`` cancels).
    """
    d = X.shape[-1]
    m = jnp.sqrt(d / 2.0) * k_star
    return bayes_posterior_from_statistics(jnp.sum(X * X, axis=-1), X @ k_star, m @ m, d, gamma)


def bayes_posterior_from_statistics(sq, score, mean_sq, d, gamma):
    """:func:`bayes_posterior` from what it depends on: each token's squared norm ``sq = |X_l|^2`` and score
    ``X_l . k*`` (last axis: the tokens), with ``mean_sq = |m|^2 = (d/2) |k*|^2``:
    ``log LR_l = -(|X_l|^2 - 2 sqrt(d/2) X_l . k* + |m|^2) / (2 gamma^2) + |X_l|^2 / 2``."""
    log_lr = -(sq - 2.0 * jnp.sqrt(d / 2.0) * score + mean_sq) / (2.0 * gamma**2) + sq / 2.0
    return jax.nn.softmax(log_lr, axis=-1)


def bayes_predictor(X, k_star, v_star, gamma):
    """Bayes predictor ``E[y | X] = sum_l P(J0 = l | X) X_l . v*``."""
    return jnp.sum(bayes_posterior(X, k_star, gamma) * (X @ v_star), axis=-1)
