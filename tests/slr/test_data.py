"""The SLR sampler (spec A1) and its in-frame twin."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import scipy.stats as ss

from attnlab.marion.predictors import bayes_posterior
from attnlab.slr.data import sample_slr, sample_slr_in_frame, sample_teacher


def test_teacher_is_orthonormal(key):
    ks, vs = sample_teacher(key, 50)
    assert abs(float(ks @ ks) - 1) < 1e-14 and abs(float(vs @ vs) - 1) < 1e-14 and abs(float(ks @ vs)) < 1e-14


def test_signal_location_is_uniform_and_labels_follow_the_model(key):
    d, L, gamma, eps, n = 16, 5, 0.7, 0.1, 50_000
    ks, vs = sample_teacher(key, d)
    X, y, J0 = sample_slr(jax.random.fold_in(key, 1), ks, vs, n, L, gamma, eps)
    counts = np.bincount(np.asarray(J0), minlength=L)
    assert ss.chisquare(counts).pvalue > 1e-3
    signal = np.asarray(X)[np.arange(n), np.asarray(J0)]
    # mean sqrt(d/2) k*, covariance gamma^2 I: check along k*, v* and a fixed orthogonal direction
    along_k = signal @ np.asarray(ks)
    assert abs(along_k.mean() - math.sqrt(d / 2)) < 5 * gamma / math.sqrt(n)
    resid = np.asarray(y) - signal @ np.asarray(vs)
    assert abs(resid.std() - eps) < 5 * eps / math.sqrt(2 * n)
    assert ss.kstest((signal @ np.asarray(vs)) / gamma, "norm").pvalue > 1e-3
    noise_tokens = np.asarray(X)[np.arange(n), (np.asarray(J0) + 1) % L]
    assert ss.kstest(noise_tokens @ np.asarray(ks), "norm").pvalue > 1e-3


def test_in_frame_sampler_has_the_law_of_projections(key):
    d, L, gamma, eps, n = 9, 4, 0.6, 0.2, 40_000
    ks, vs = sample_teacher(key, d)
    X, y, _ = sample_slr(jax.random.fold_in(key, 1), ks, vs, n, L, gamma, eps)
    Z, y2, scale = sample_slr_in_frame(jax.random.fold_in(key, 2), n, L, gamma, eps, d)
    # first token's projection on k* and v*, and the labels, compared by two-sample KS
    for a, b in [(np.asarray(X[:, 0] @ ks), np.asarray(Z[:, 0, 0])), (np.asarray(X[:, 2] @ vs), np.asarray(Z[:, 2, 1])),
                 (np.asarray(y), np.asarray(y2))]:
        assert ss.ks_2samp(a, b).pvalue > 1e-3
    assert set(np.unique(np.asarray(scale)).round(12)) == {0.6, 1.0}


def test_sampler_is_deterministic(key):
    ks, vs = sample_teacher(key, 8)
    a = sample_slr(key, ks, vs, 10, 3, 0.7)
    b = sample_slr(key, ks, vs, 10, 3, 0.7)
    assert all(bool(jnp.all(x == y)) for x, y in zip(a, b))


def test_bayes_posterior_is_a_distribution_that_finds_the_signal(key):
    d = 200
    ks, vs = sample_teacher(key, d)
    X, _, J0 = sample_slr(jax.random.fold_in(key, 1), ks, vs, 500, 6, math.sqrt(0.5))
    post = np.asarray(bayes_posterior(X, ks, math.sqrt(0.5)))
    assert np.allclose(post.sum(-1), 1.0)
    assert np.mean(post.argmax(-1) == np.asarray(J0)) > 0.99
