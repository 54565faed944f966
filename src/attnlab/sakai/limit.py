r"""The infinite-width law of one multi-head attention layer (n -> infinity at fixed s, H) and its H -> infinity limit.

Sakai, Karakida, Imaizumi (2025), arXiv:2506.00846 (abstract: "Gaussian conditional on random similarity scores");
official theory samplers ``simulate_theoretical``.

* Input Gram: ``Sigma_ij = E[psi(Z_i) psi(Z_j)]``, Z_i iid N(0, 1): ``I`` for clip/identity and
  ``(1/2 - 1/(2 pi)) I + 1/(2 pi) 11^T`` for ReLU (uncentred).
* Scores (2.2): per head an s x s Gaussian ``p`` with ``Cov(p_ij, p_kl) = Sigma_ik Sigma_jl``; ``p = L N L^T`` with
  ``L L^T = Sigma`` and N iid N(0, 1). Values (2.3): ``z ~ N(0, Sigma)``; heads independent.
* Output (2.4): ``y = H^{-1/2} sum_a softmax_rows(p^a) z^a``; given the scores ``y ~ N(0, C)``,
  ``C = (1/H) sum_a S^a Sigma S^{a T}``. For token 0: ``y_0 = sqrt(v) eps``, ``v = (1/H) sum_a s_a^T Sigma s_a``,
  ``s_a = softmax(p^a_{0,:})``, ``p^a_{0,:} ~ N(0, Sigma_00 Sigma)``.
* Infinite heads (2.5): ``y_0 ~ N(0, E v)``; ``E v = E[s^T Sigma s]`` does not depend on H.
* Low rank (2.7): the same law with the same H (n_H -> infinity).
* Moments (2.6): ``E y_0^2 = E v`` and excess kurtosis ``3 Var(v)/E[v]^2 = 3 Var(w)/(H E[w]^2)``, w the per-head
  mixing variable; computed here by tensor Gauss-Hermite quadrature (:func:`limit_moments`).
"""

from __future__ import annotations

import functools
import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np

from attnlab import _validate as check
from attnlab import programs
from attnlab._random import normal
from attnlab.sakai.model import check_model
from attnlab.sakai.sampler import _limit_gram, chunk_size, first_token_variance

__all__ = ["input_gram", "sample_limit_first", "sample_limit_tokens", "limit_moments", "relu_logit_variance"]


def input_gram(activation: str, s: int) -> np.ndarray:
    """The limit input Gram Sigma (s x s)."""
    check_model(n_tokens=s, activation=activation)
    return _limit_gram(activation, s)  # clip at C = 100: E[clip(Z)^2] = 1 - O(1e-2000)


def relu_logit_variance() -> float:
    """Variance of the effective iid logits for ReLU inputs, ``Sigma_00 (1/2 - 1/(2 pi))`` = 0.1704."""
    return 0.5 * (0.5 - 0.5 / math.pi)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5))
def _limit_first(key, n_heads, n_tokens, activation, n_samples, n_seeds):
    L = jnp.linalg.cholesky(jnp.asarray(input_gram(activation, n_tokens)))
    size = chunk_size(n_samples, n_seeds * 4 * n_heads * n_tokens)
    keys = jax.random.split(key, (-(-n_samples // size), n_seeds))

    def one(k):
        kv, ke = jax.random.split(k)
        ones = jnp.ones((size, n_heads))
        v = first_token_variance(kv, jnp.broadcast_to(L, (size,) + L.shape), ones, ones)
        return jnp.sqrt(v) * normal(ke, (size,)), v

    out = jax.lax.map(jax.vmap(one), keys)
    return tuple(jnp.moveaxis(x, 0, 1).reshape(n_seeds, -1)[:, :n_samples] for x in out)


def sample_limit_first(key, *, n_heads: int, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                       n_seeds: int = 1):
    """Draws ``(y_0, v)`` of the infinite-width law, each (n_seeds, n_samples) (``n_heads = inf`` is not allowed:
    use ``N(0, limit_moments(...)['second_moment'])``)."""
    check_model(n_heads=n_heads, n_tokens=n_tokens, activation=activation, n_samples=n_samples)
    check_model(n_samples=n_seeds)
    return _limit_first(key, n_heads, n_tokens, activation, n_samples, n_seeds)


@functools.partial(programs.jit, static_argnums=(1, 2, 3, 4, 5))
def _limit_tokens(key, n_heads, n_tokens, activation, n_samples, n_out):
    L = jnp.linalg.cholesky(jnp.asarray(input_gram(activation, n_tokens)))
    kn, kz = jax.random.split(key)
    p = L @ normal(kn, (n_samples, n_heads, n_tokens, n_tokens)) @ L.T
    F = jax.nn.softmax(p, axis=-1) @ L
    Y = jnp.sum(F @ normal(kz, (n_samples, n_heads, n_tokens, n_out)), 1) / math.sqrt(n_heads)
    return Y, jnp.mean(F @ jnp.swapaxes(F, -1, -2), 1)


def sample_limit_tokens(key, *, n_heads: int, n_tokens: int = 4, activation: str = "clip", n_samples: int,
                        n_out: int = 1):
    """Joint limit draws of all s tokens: ``(Y, C)`` with Y (n_samples, s, n_out), C (n_samples, s, s)."""
    check_model(n_heads=n_heads, n_tokens=n_tokens, activation=activation, n_samples=n_samples)
    check.count("n_out", n_out)
    return _limit_tokens(key, n_heads, n_tokens, activation, n_samples, n_out)


def limit_moments(n_tokens: int = 4, activation: str = "clip", n_heads=1, n_nodes: int = 20) -> dict[str, float]:
    r"""Limit moments of ``y_0`` by tensor Gauss-Hermite quadrature over the s logits of one head.

    ``w = s^T Sigma s`` with ``s = softmax(sqrt(Sigma_00) L nu)``, ``nu ~ N(0, I_s)``; ``E y_0^2 = E w`` (any H),
    ``Var v = Var(w)/H`` and the excess kurtosis of ``y_0 = sqrt(v) eps`` is ``3 Var(v)/E[v]^2`` (0 for H = inf).
    The integrand is smooth, so ``n_nodes^s`` nodes converge quickly (s <= 5 supported: the grid has n_nodes^s points).
    """
    check_model(n_tokens=n_tokens, activation=activation)
    if not (isinstance(n_heads, float) and n_heads == math.inf):
        check.count("n_heads", n_heads)
    check.count("n_nodes", n_nodes)
    if n_tokens > 5:
        raise ValueError(f"limit_moments uses a tensor grid and supports n_tokens <= 5; got {n_tokens}")
    x, wts = np.polynomial.hermite_e.hermegauss(n_nodes)
    wts = wts / wts.sum()
    Sigma = input_gram(activation, n_tokens)
    L = np.linalg.cholesky(Sigma)
    grid = np.array(list(itertools.product(range(n_nodes), repeat=n_tokens)))
    nu, weight = x[grid], np.prod(wts[grid], axis=1)
    logits = math.sqrt(Sigma[0, 0]) * nu @ L.T
    logits -= logits.max(1, keepdims=True)
    sm = np.exp(logits)
    sm /= sm.sum(1, keepdims=True)
    w = np.einsum("ki,ij,kj->k", sm, Sigma, sm)
    mean, var_w = float(weight @ w), float(weight @ (w - weight @ w) ** 2)
    H = float(n_heads)
    return {"second_moment": mean, "head_variance": var_w, "head_fourth_central": float(weight @ (w - mean) ** 4),
            "excess_kurtosis": 0.0 if math.isinf(H) else 3.0 * var_w / (H * mean**2)}
