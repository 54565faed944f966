"""The public functions of attnlab.sakai guard their domain (their own checks and attnlab.sakai.domain), and psi
computes in float64 whatever the caller's JAX setting."""

import math

import jax
import numpy as np
import pytest

from attnlab import sakai


def test_psi_computes_in_float64_outside_x64():
    with jax.enable_x64(False):
        assert sakai.psi(np.linspace(-200.0, 200.0, 5), "clip").dtype == np.float64
    with pytest.raises(ValueError, match="^activation must be one of 'clip', 'relu', 'identity'; got 'tanh'$"):
        sakai.psi(np.ones(2), "tanh")


def test_the_attention_kernel_needs_a_covariance_and_a_positive_sequence_length(key):
    with pytest.raises(ValueError, match="^the kernel K must be positive semidefinite; its smallest eigenvalue is -1$"):
        sakai.attention_kernel(-np.eye(4), key=key, n_tokens=2)
    with pytest.raises(ValueError, match="^n_tokens must be an integer >= 1; got 0$"):
        sakai.attention_kernel(np.eye(4), key=key, n_tokens=0)
    with pytest.raises(ValueError, match="^n_points must be a power of 2"):
        sakai.attention_kernel(np.eye(4), key=key, n_tokens=2, n_points=100)
    with pytest.raises(ValueError, match="^scaling must be one of 'sqrt', 'linear'"):
        sakai.attention_kernel(np.eye(4), key=key, n_tokens=2, scaling="cubic")
    with pytest.raises(ValueError, match="^K must be positive semidefinite"):
        sakai.sample_joint_limit(key, -np.eye(4), n_tokens=2, n_heads=1, n_samples=4)
    with pytest.raises(ValueError, match="^weight_variance must be >= 0"):
        sakai.dense_kernel(np.eye(4), -1.0, n_tokens=2)


@pytest.mark.parametrize("kw, match", [
    ({"n_samples": math.inf}, "^n_samples must be an integer >= 1; got inf$"),
    ({"n_samples": 10.0}, "^n_samples must be an integer >= 1; got 10.0$"),
    ({"n": 10.5}, "^width n must be an integer >= 1; got 10.5$"),
    ({"n_heads": 0}, "^n_heads must be an integer >= 1; got 0$"),
    ({"n_tokens": True}, "^n_tokens must be an integer >= 1, not a boolean"),
    ({"activation": "tanh"}, "^input activation must be one of"),
])
def test_samplers_refuse_sizes_that_are_not_positive_integers(key, kw, match):
    args = {"n": 10, "n_heads": 1, "n_samples": 8, **kw}
    with pytest.raises(ValueError, match=match):
        sakai.sample_first_token(key, **args)


def test_sweeps_and_limits_refuse_bad_widths_and_head_counts(key):
    with pytest.raises(ValueError, match="^every width must be an integer >= 1 or math.inf; got nan$"):
        sakai.sample_first_token_sweep(key, widths=(math.nan,), n_heads=1, n_samples=8)
    with pytest.raises(ValueError, match="^widths must be a nonempty sequence"):
        sakai.sample_first_token_sweep(key, widths=(), n_heads=1, n_samples=8)
    with pytest.raises(ValueError, match="^n_heads must be an integer >= 1; got 2.5$"):
        sakai.limit_moments(4, "clip", 2.5)
    assert sakai.limit_moments(4, "clip", math.inf)["excess_kurtosis"] == 0.0
    with pytest.raises(ValueError, match="^n_out must be an integer >= 1"):
        sakai.sample_limit_tokens(key, n_heads=1, n_samples=4, n_out=0)


def test_distances_need_two_finite_draws_per_sample():
    with pytest.raises(ValueError, match="^x must hold at least 2 draws; got 1$"):
        sakai.ks_w1(np.ones(1), np.ones(3))
    with pytest.raises(ValueError, match="^every entry of y must be a finite number"):
        sakai.ks_w1(np.ones(3), np.array([1.0, np.inf]))
    with pytest.raises(ValueError, match="^x must not be constant"):
        sakai.kde_kl(np.ones(4), np.arange(4.0), np.linspace(0, 3, 5))
    with pytest.raises(ValueError, match="^every entry of v must be > 0"):
        sakai.rb_density(np.array([1.0, 0.0]), np.linspace(-1, 1, 5))
