"""Softmax attention, links, Dohmatob's sampler and its dictionary to Marion's (spec B1, B2, C)."""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.dohmatob.data import sample_dohmatob, sample_dohmatob_in_frame
from attnlab.dohmatob.meanfield import DohmatobModel
from attnlab.dohmatob.model import check_beta, check_gamma, get_link, softmax_attention
from attnlab.dohmatob.rgd import frame_predict
from attnlab.slr.data import sample_slr, sample_teacher
from attnlab.slr.overlaps import overlaps


def test_softmax_finite_at_large_beta():
    d, L = 400, 20
    X = 3.0 * jax.random.normal(jax.random.key(0), (50, L, d))
    u = jnp.ones(d) / math.sqrt(d)
    f = softmax_attention(X, u, u, 100.0)  # logits up to ~1e4: naive exp overflows
    assert np.all(np.isfinite(np.asarray(f)))
    assert np.all(np.isfinite(np.asarray(jax.grad(lambda u: jnp.sum(softmax_attention(X, u, u, 100.0)))(u))))
    # argmax limit: the weights are one-hot at beta = 100 here
    logits = X @ u
    hard = jnp.take_along_axis(X @ u, jnp.argmax(logits, -1)[:, None], -1)[:, 0]
    np.testing.assert_allclose(f, hard, atol=1e-8)


def test_softmax_matches_naive_formula_at_small_beta():
    X = jax.random.normal(jax.random.key(1), (7, 5, 9))
    u, v = jax.random.normal(jax.random.key(2), (2, 9))
    lam = 0.3 * 3.0
    w = np.exp(lam * np.asarray(X @ u))
    w /= w.sum(-1, keepdims=True)
    for link, fn in [("linear", lambda t: t), ("quadratic", lambda t: t**2), ("relu", lambda t: np.maximum(t, 0))]:
        np.testing.assert_allclose(softmax_attention(X, u, v, 0.3, link), (w * fn(np.asarray(X @ v))).sum(-1), rtol=1e-12)
    np.testing.assert_allclose(softmax_attention(X, u, v, 0.3, jnp.tanh), (w * np.tanh(np.asarray(X @ v))).sum(-1),
                               rtol=1e-12)


@pytest.mark.parametrize("gamma", [0.0, 1.0, -0.5, 1.5])
def test_bad_gamma_rejected(gamma):
    with pytest.raises(ValueError, match="gamma"):
        check_gamma(gamma)
    with pytest.raises(ValueError, match="gamma"):
        DohmatobModel(100, 20, 1.0, gamma)
    with pytest.raises(ValueError, match="gamma"):
        sample_dohmatob(jax.random.key(0), jnp.eye(4)[0], jnp.eye(4)[1], 3, 2, gamma)


@pytest.mark.parametrize("beta", [0.0, -1.0, float("inf")])
def test_bad_beta_rejected(beta):
    with pytest.raises(ValueError, match="beta"):
        check_beta(beta)
    with pytest.raises(ValueError, match="beta"):
        DohmatobModel(100, 20, beta, 0.5)
    with pytest.raises(ValueError, match="beta"):
        softmax_attention(jnp.ones((2, 3, 4)), jnp.ones(4), jnp.ones(4), beta)


def test_unknown_link_rejected():
    with pytest.raises(ValueError, match="unknown link 'tanh'"):
        get_link("tanh")
    with pytest.raises(ValueError, match="unknown link"):
        DohmatobModel(100, 20, 1.0, 0.5, link="sigmoid")
    with pytest.raises(ValueError, match="L must be"):
        DohmatobModel(100, 1, 1.0, 0.5)


def test_dohmatob_sampler_is_marions_at_gamma_one_over_sqrt2():
    """Spec C: c sqrt(d) u* = sqrt(d/2) k* when gamma = 1/sqrt(2); same key, same draws, same batch."""
    d, L, g = 30, 6, 1 / math.sqrt(2)
    us, vs = sample_teacher(jax.random.key(3), d)
    a = sample_dohmatob(jax.random.key(4), us, vs, 100, L, g, 0.1)
    b = sample_slr(jax.random.key(4), us, vs, 100, L, g, 0.1)
    np.testing.assert_allclose(a.X, b.X, atol=1e-12)
    np.testing.assert_allclose(a.y, b.y, atol=1e-12)
    np.testing.assert_array_equal(a.J0, b.J0)


def test_sampler_moments_and_link():
    d, L, g = 16, 4, 0.6
    us, vs = sample_teacher(jax.random.key(5), d)
    b = sample_dohmatob(jax.random.key(6), us, vs, 40_000, L, g, 0.0, "relu")
    sig = b.X[jnp.arange(b.X.shape[0]), b.J0]
    n = sig.shape[0]
    assert abs(float(jnp.mean(sig @ us)) - math.sqrt(1 - g**2) * math.sqrt(d)) < 5 * g / math.sqrt(n)
    assert abs(float(jnp.std(sig @ vs)) - g) < 5 * g / math.sqrt(2 * n)
    np.testing.assert_allclose(b.y, jnp.maximum(sig @ vs, 0.0), atol=1e-12)
    # every token has E|x|^2 = d (c^2 + gamma^2 = 1, spec B1 [I])
    assert abs(float(jnp.mean(jnp.sum(sig**2, -1))) - d) < 0.05 * d


@pytest.mark.slow
def test_in_frame_sampler_has_the_law_of_the_rd_sampler():
    """Risk of softmax attention at random overlaps: R^d sampler vs in-frame sampler, within 5 SE."""
    d, L, g, eps, beta = 24, 6, 0.7, 0.1, 0.4
    key = jax.random.key(7)
    us, vs = sample_teacher(key, d)
    u = jax.random.normal(jax.random.key(8), (d,))
    v = jax.random.normal(jax.random.key(9), (d,)) + 2 * vs + us
    u, v = u / jnp.linalg.norm(u), v / jnp.linalg.norm(v)
    o = overlaps(u, v, us, vs).to_dohmatob()
    n = 40_000

    @partial(jax.jit, static_argnums=0)  # one program per link, not one per primitive
    def losses(link):
        b = sample_dohmatob(jax.random.key(10), us, vs, n, L, g, eps, link)
        Z, y = sample_dohmatob_in_frame(jax.random.key(11), n, L, g, eps, d, link)
        l1 = (softmax_attention(b.X, u, v, beta, link) - b.y) ** 2
        return l1, (frame_predict(Z, o, beta * math.sqrt(d), link) - y) ** 2

    for link in ("linear", "relu"):
        l1, l2 = losses(link)
        se = math.sqrt(float(jnp.var(l1) + jnp.var(l2)) / n)
        assert abs(float(jnp.mean(l1) - jnp.mean(l2))) < 5 * se, link
