r"""In-context linear regression with one linear self-attention (LSA) layer: the optimal layer is one step of
preconditioned gradient descent on the prompt, and its in-context risk in closed form.

References: von Oswald et al., "Transformers learn in-context by gradient descent" (ICML 2023); Ahn, Cheng, Daneshmand,
Sra, "Transformers learn to implement preconditioned gradient descent for in-context learning" (NeurIPS 2023);
Zhang, Frei, Bartlett, "Trained transformers learn linear models in-context" (JMLR 2024), Thm. 4.1.

**Task.** A prompt holds n examples (x_i, y_i) and a query x_q, with x_i, x_q ~ N(0, Sigma) in R^d, a task vector
w ~ N(0, I_d) drawn afresh per prompt, and y_i = <w, x_i>; the target is y_q = <w, x_q>.

**Layer.** Under Zhang, Frei and Bartlett's initialisation, the LSA layer's prediction stays of the form

    y_hat = x_q^T Gamma h,    h = (1/n) sum_i y_i x_i = S w,    S = (1/n) sum_i x_i x_i^T,

with Gamma a d x d matrix (the product of the value and key-query blocks that gradient flow trains; the other
blocks stay at zero). y_hat is one step of gradient descent on the prompt's least squares from w_0 = 0,
preconditioned by Gamma: w_1 = Gamma (1/n) sum_i y_i x_i.

**Risk.** With y_hat - y_q = x_q^T (Gamma S - I) w, averaging over x_q, then w, then S (Gaussian fourth moments:
E[S A S] = (1 + 1/n) Sigma A Sigma + (tr(A Sigma) / n) Sigma for symmetric A) gives

    R(Gamma) = E(y_hat - y_q)^2 = tr(Gamma^T Sigma Gamma M) - 2 tr(Gamma Sigma^2) + tr(Sigma),
    M = (1 + 1/n) Sigma^2 + (tr(Sigma) / n) Sigma.

**Optimum.** grad R = 2 (Sigma Gamma M - Sigma^2) = 0 gives

    Gamma* = Sigma M^{-1} = ((1 + 1/n) Sigma + (tr(Sigma) / n) I)^{-1},    R* = tr(Sigma) - tr(Gamma* Sigma^2),

in the eigenbasis of Sigma (eigenvalues lambda_k, T = sum_k lambda_k): Gamma*_kk = 1 / ((1 + 1/n) lambda_k + T/n)
and R*(n) = sum_k lambda_k (T/n + lambda_k/n) / ((1 + 1/n) lambda_k + T/n).

**Plain one-step GD** (the negative control): the best multiple of the identity, Gamma = eta* I with
eta* = tr(Sigma^2) / tr(Sigma M), which differs from Gamma* unless Sigma is a multiple of I.

**Gradient descent on Gamma.** The population gradient is linear in Gamma, so the mean over seeds of stochastic
gradient descent on fresh prompts follows population gradient descent exactly:
Gamma_{t+1} = Gamma_t - 2 eta (Sigma Gamma_t M - Sigma^2), whose diagonal is
gamma_t = gamma* + (1 - 2 eta lambda M_kk)^t (gamma_0 - gamma*): the distance to Gamma* of the mean of the
iterates (or of their average over the last half of the run) is known in closed form.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from attnlab.extend import jit

__all__ = ["spectrum", "moment_matrix", "risk", "optimal_gamma", "optimal_risk", "plain_gd_eta", "population_gd",
           "train", "mc_risk"]


def spectrum(d: int, condition: float) -> np.ndarray:
    """Eigenvalues of Sigma: ``d`` values evenly spaced from 1 to ``condition``, scaled to mean 1 (tr Sigma = d)."""
    lam = np.linspace(1.0, condition, d)
    return lam * d / lam.sum()


def moment_matrix(lam: np.ndarray, n: int) -> np.ndarray:
    """The diagonal of M = (1 + 1/n) Sigma^2 + (tr(Sigma) / n) Sigma."""
    return (1 + 1 / n) * lam**2 + lam.sum() / n * lam


def risk(gamma: np.ndarray, lam: np.ndarray, n: int) -> np.ndarray:
    """R(Gamma) = tr(Gamma^T Sigma Gamma M) - 2 tr(Gamma Sigma^2) + tr(Sigma), for Gamma of shape (..., d, d)."""
    m = moment_matrix(lam, n)
    quad = np.einsum("...ij,i,...ij,j->...", gamma, lam, gamma, m)
    return quad - 2 * np.einsum("...ii,i->...", gamma, lam**2) + lam.sum()


def optimal_gamma(lam: np.ndarray, n: int) -> np.ndarray:
    """The diagonal of Gamma* = ((1 + 1/n) Sigma + (tr(Sigma) / n) I)^{-1}."""
    return 1 / ((1 + 1 / n) * lam + lam.sum() / n)


def optimal_risk(lam: np.ndarray, n) -> np.ndarray:
    """R*(n) = tr(Sigma) - tr(Gamma* Sigma^2), for one or many prompt lengths ``n``."""
    n = np.asarray(n, dtype=float)[..., None]
    return lam.sum() - np.sum(lam**2 / ((1 + 1 / n) * lam + lam.sum() / n), axis=-1)


def plain_gd_eta(lam: np.ndarray, n) -> np.ndarray:
    """eta* = tr(Sigma^2) / tr(Sigma M): the step of the best unpreconditioned one-step GD, Gamma = eta* I."""
    n = np.asarray(n, dtype=float)[..., None]
    m = (1 + 1 / n) * lam**2 + lam.sum() / n * lam
    return np.sum(lam**2) / np.sum(lam * m, axis=-1)


def population_gd(lam: np.ndarray, n: int, eta: float, steps: int, gamma0: float) -> np.ndarray:
    """The diagonal of population gradient descent on R from Gamma_0 = gamma0 I, averaged over its iterates
    t = T/2 + 1, ..., T (T = ``steps``; :func:`train` averages the same iterates): with r = 1 - 2 eta lambda_k M_kk,
    gamma* + (gamma_0 - gamma*) r^(t0 + 1) (1 - r^(T - t0)) / ((1 - r)(T - t0)), t0 = T // 2."""
    star, t0 = optimal_gamma(lam, n), steps // 2
    r = 1 - 2 * eta * lam * moment_matrix(lam, n)
    mean_power = r ** (t0 + 1) * (1 - r ** (steps - t0)) / ((1 - r) * (steps - t0))
    return star + mean_power * (gamma0 - star)


def _prompts(key, lam, n: int, batch: int):
    """``batch`` prompts: h = (1/n) sum_i y_i x_i, the query x_q and its target y_q (coordinates in Sigma's
    eigenbasis, so Sigma = diag(lam))."""
    kx, kw, kq = jax.random.split(key, 3)
    x = jax.random.normal(kx, (batch, n, lam.size)) * jnp.sqrt(lam)
    w = jax.random.normal(kw, (batch, lam.size))
    xq = jax.random.normal(kq, (batch, lam.size)) * jnp.sqrt(lam)
    y = jnp.einsum("bnd,bd->bn", x, w)
    return jnp.einsum("bn,bnd->bd", y, x) / n, xq, jnp.sum(xq * w, axis=1)


@partial(jit, static_argnames=("n", "steps", "batch"))
def train(keys, lam, *, n: int, steps: int, batch: int, eta: float, gamma0: float):
    """Stochastic gradient descent on the squared error of y_hat = x_q^T Gamma h, ``batch`` fresh prompts a step,
    from Gamma_0 = gamma0 I, one run per key (vmapped); returns each run's average of its iterates
    t = T/2 + 1, ..., T (Polyak-Ruppert: the same mean, a fraction of the noise), shape (repeats, d, d)."""
    t0 = steps // 2

    def one(key):
        def step(carry, tk):
            gamma, total = carry
            t, k = tk
            h, xq, yq = _prompts(k, lam, n, batch)
            err = jnp.einsum("bi,ij,bj->b", xq, gamma, h) - yq
            gamma = gamma - eta * 2 * jnp.einsum("b,bi,bj->ij", err, xq, h) / batch
            return (gamma, total + jnp.where(t >= t0, gamma, 0.0)), None

        start = gamma0 * jnp.eye(lam.size)
        (_, total), _ = jax.lax.scan(step, (start, jnp.zeros_like(start)),
                                     (jnp.arange(steps), jax.random.split(key, steps)))
        return total / (steps - t0)

    return jax.vmap(one)(keys)


@partial(jit, static_argnames=("n", "size"))
def mc_risk(keys, gammas, lam, *, n: int, size: int):
    """The mean squared error of each trained Gamma on ``size`` fresh prompts of length ``n`` (one key per Gamma)."""

    def one(key, gamma):
        h, xq, yq = _prompts(key, lam, n, size)
        err = jnp.einsum("bi,ij,bj->b", xq, gamma, h) - yq
        return jnp.mean(err**2)

    return jax.vmap(one)(keys, gammas)
