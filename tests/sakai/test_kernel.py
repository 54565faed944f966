"""The infinite-width kernels of attention (QMC) and the joint law over many sequences: against the one-sequence law of
attnlab.sakai.limit, Monte Carlo of the joint law, closed forms, and the exact finite-width sampler against brute-force
networks (KS at level 0.001, means at 5 SE)."""

import math

import jax
import numpy as np
import pytest
import scipy.stats as st

from attnlab import runtime
from attnlab.sakai import kernel as kn
from attnlab.sakai.joint import projection_excess_kurtosis, sample_joint_limit, sample_network
from attnlab.sakai.limit import limit_moments, sample_limit_tokens
from attnlab.sakai.reference import sample_reference_stack

ALPHA = 1e-3


@pytest.fixture(autouse=True)
def _x64():
    with runtime.x64():
        yield


def _tokens(m=3, s=4, d=6, seed=1):
    return np.asarray(jax.random.normal(jax.random.key(seed), (m, s, d)))


def _z(a, a_se, b, b_se):
    return np.abs(a - b) / np.sqrt(a_se**2 + b_se**2)


def test_one_sequence_matches_the_limit_law():
    """m = 1, Sigma = I: K'_00 = E|softmax(p_0)|^2 (quadrature 0.39197 at s = 4) and K'_01 = 1/s (independent rows)."""
    k = kn.attention_kernel(np.eye(4), key=jax.random.key(0), n_tokens=4, n_points=2048)
    q = limit_moments(4, "clip", 1)["second_moment"]
    assert abs(k.mean[0, 0] - q) <= 5 * k.se[0, 0] and k.se[0, 0] < 2e-3
    assert abs(k.mean[0, 1] - 0.25) <= 5 * k.se[0, 1]
    again = kn.attention_kernel(np.eye(4), key=jax.random.key(0), n_tokens=4, n_points=2048)
    np.testing.assert_array_equal(k.replicates, again.replicates)  # a key fixes the numbers
    # the joint sampler with m = 1 has the law of sample_limit_tokens (its random covariance C)
    _, C = sample_joint_limit(jax.random.key(1), np.eye(4), n_tokens=4, n_heads=2, n_samples=8000)
    _, C2 = sample_limit_tokens(jax.random.key(2), n_heads=2, n_tokens=4, activation="identity", n_samples=8000)
    for i, j in ((0, 0), (1, 2)):
        assert st.ks_2samp(np.asarray(C)[:, i, j], np.asarray(C2)[:, i, j]).pvalue > ALPHA


def test_kernel_is_the_mean_of_the_joint_law_for_every_H():
    """E C = E[S K S^T] whatever H: the QMC kernel against Monte Carlo of the joint law at H = 1 and 4 (5 SE per
    entry), the 1/n-scaling kernel (block means) rejected."""
    U = _tokens()
    K = kn.token_kernel(U)
    k = kn.attention_kernel(K, key=jax.random.key(0), n_tokens=4, n_points=1024)
    lin = kn.attention_kernel(K, key=jax.random.key(0), n_tokens=4, scaling="linear")
    B = K.reshape(3, 4, 3, 4).mean((1, 3))
    np.testing.assert_allclose(lin.mean, np.kron(B, np.ones((4, 4))), atol=1e-14)
    assert np.allclose(k.mean, k.mean.T, atol=1e-14)
    for H in (1, 4):
        _, C = sample_joint_limit(jax.random.key(H), K, n_tokens=4, n_heads=H, n_samples=20_000, max_heads=4)
        C = np.asarray(C)
        mean, se = C.mean(0), C.std(0) / math.sqrt(len(C))
        assert _z(mean, se, k.mean, k.se).max() < 5
        assert _z(mean, se, lin.mean, 0 * se).max() > 50
    # H = 1 is non-Gaussian, H = 4 four times less (the excess kurtosis of a projection is 3 Var v / (E v)^2 / H)
    w = np.eye(12)[0]
    _, C1 = sample_joint_limit(jax.random.key(7), K, n_tokens=4, n_heads=1, n_samples=20_000, max_heads=4)
    _, C4 = sample_joint_limit(jax.random.key(8), K, n_tokens=4, n_heads=4, n_samples=20_000, max_heads=4)
    (k1, s1), (k4, s4) = projection_excess_kurtosis(C1, w), projection_excess_kurtosis(C4, w)
    assert k1 > 10 * s1 and abs(k1 / 4 - k4) <= 5 * math.hypot(s1 / 4, s4)


def test_closed_form_dense_kernels_against_monte_carlo():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((5, 5))
    K = A @ A.T / 5
    z = rng.multivariate_normal(np.zeros(5), K, size=400_000)
    for fn, f in ((kn.relu_kernel, lambda x: np.maximum(x, 0)), (kn.erf_kernel, __import__("scipy.special").special.erf)):
        fz = f(z)
        mc = fz.T @ fz / len(z)
        se = np.sqrt(np.var(fz[:, :, None] * fz[:, None, :], 0) / len(z))
        got = fn(K, n_tokens=1).mean
        assert (np.abs(got - mc) <= 5 * se + 1e-12).all()
    np.testing.assert_allclose(kn.dense_kernel(K, 2.0, 0.5, n_tokens=1).mean, 2 * K + 0.5)


def test_composition_carries_the_replicates():
    """The stack kernel maps each replicate (R independent estimates), so its SE covers the QMC error of both attention
    layers: the composition of the replicate means differs from the replicate-wise mean by far less than the SE."""
    K = kn.token_kernel(_tokens(m=2))
    out = kn.stack_kernel(K, ("attention", "relu", "attention"), key=jax.random.key(3), n_tokens=4, n_points=256,
                          n_replicates=6)
    assert out.n_replicates == 6 and (out.se > 0).all()
    first = kn.attention_kernel(K, key=jax.random.fold_in(jax.random.key(3), 0), n_tokens=4, n_points=256,
                                n_replicates=6)
    step = kn.relu_kernel(first)
    np.testing.assert_allclose(step.replicates, np.stack([kn.relu_kernel(r, n_tokens=4).mean
                                                          for r in first.replicates]), atol=1e-14)
    with pytest.raises(ValueError, match="unknown layer"):
        kn.stack_kernel(K, ("attention", "gelu"), key=jax.random.key(0), n_tokens=4)
    with pytest.raises(ValueError, match="power of 2"):
        kn.attention_kernel(K, key=jax.random.key(0), n_tokens=4, n_points=100)


@pytest.mark.parametrize("layers, n", [(("attention",), 16), (("attention", "relu", "attention"), 24)])
def test_exact_network_sampler_matches_brute_force(layers, n):
    """The exact finite-width sampler on a data set against brute-force networks with explicit weights: KS of one
    output coordinate of three tokens, and the mean Gram (brute force: all n features; exact: E[C])."""
    U = _tokens(m=2, d=5)
    N = 1500
    Yb, Gb = (np.asarray(a) for a in sample_reference_stack(jax.random.key(1), U, n=n, n_heads=2, layers=layers,
                                                            n_samples=N))
    Ye, Ce = (np.asarray(a) for a in sample_network(jax.random.key(2), U, n=n, n_heads=2, layers=layers,
                                                    n_samples=6 * N))
    for a, i in ((0, 0), (1, 2), (0, 3)):
        assert st.ks_2samp(Yb[:, a, i, 0], Ye[:, a, i, 0]).pvalue > ALPHA
    assert _z(Gb.mean(0), Gb.std(0) / math.sqrt(N), Ce.mean(0), Ce.std(0) / math.sqrt(6 * N)).max() < 5
    again = np.asarray(sample_network(jax.random.key(2), U, n=n, n_heads=2, layers=layers, n_samples=6 * N)[1])
    np.testing.assert_array_equal(again, Ce)


def test_finite_width_approaches_the_kernel():
    """One layer, H = 8: the finite-width covariance is biased by O(1/n): clear at n = 16, within 5 SE at n = 1024."""
    U = _tokens(m=2, d=5)
    k = kn.attention_kernel(kn.token_kernel(U), key=jax.random.key(0), n_tokens=4, n_points=2048)
    z = {}
    for n in (16, 1024):
        _, C = sample_network(jax.random.key(n), U, n=n, n_heads=8, n_samples=20_000)
        C = np.asarray(C)
        z[n] = _z(C.mean(0), C.std(0) / math.sqrt(len(C)), k.mean, k.se).max()
    assert z[1024] < 5 < z[16]


def test_arguments_are_checked():
    U = _tokens(m=2)
    with pytest.raises(ValueError, match="needs n >= "):
        sample_network(jax.random.key(0), U, n=4, n_heads=1, n_samples=10)
    with pytest.raises(ValueError, match="multiple of n_tokens"):
        sample_joint_limit(jax.random.key(0), np.eye(5), n_tokens=2, n_heads=1, n_samples=10)
    with pytest.raises(ValueError, match="max_heads"):
        sample_joint_limit(jax.random.key(0), np.eye(4), n_tokens=2, n_heads=3, n_samples=10, max_heads=2)


def test_rectangular_blocks_and_kernel_ridge_regression():
    """attention_blocks gives the blocks of attention_kernel (same key, same point sets); krr_test_error is kernel
    ridge regression; a fully trained network's training error falls."""
    from attnlab.sakai import regression as rg

    K = kn.token_kernel(_tokens(m=3))
    full = kn.attention_kernel(K, key=jax.random.key(5), n_tokens=4, n_points=128, n_replicates=3)
    blk = kn.attention_blocks(K, [0, 1], [2, 1], key=jax.random.key(5), n_tokens=4, n_points=128, n_replicates=3)
    np.testing.assert_allclose(blk[:, 0], full.replicates[:, 0:4, 8:12], atol=1e-14)
    np.testing.assert_allclose(blk[:, 1], full.replicates[:, 4:8, 4:8], atol=1e-14)
    rng = np.random.default_rng(1)
    X, Xt = rng.standard_normal((10, 3)), rng.standard_normal((5, 3))
    y, yt = X @ [1.0, -1.0, 0.5], Xt @ [1.0, -1.0, 0.5]
    w = np.linalg.solve(X.T @ X + 0.1 * np.eye(3), X.T @ y)  # the same predictor in the primal
    assert abs(rg.krr_test_error(X @ X.T, Xt @ X.T, y, yt, 0.1) - np.mean((Xt @ w - yt) ** 2)) < 1e-12
    Utr, ytr, Ute, yte = rg.slr_data(jax.random.key(0), 16, 8, 2, 4, 0.1)
    train, test = rg.train_network(jax.random.key(1), Utr, ytr, Ute, yte, n=8, n_heads=1, steps=30,
                                   learning_rate=0.5)
    assert train.shape == test.shape == (31,) and train[-1] < 0.5 * train[0]
