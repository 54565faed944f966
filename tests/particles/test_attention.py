"""The blocked online-softmax kernel against dense attention (float64 to 1e-12, beta up to 200), float32, vmap."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.particles.attention import attention, attention_dense, log_normalizer, log_normalizer_dense
from attnlab.particles.init import uniform_sphere


def _qkv(key, d):
    return [jax.random.normal(k, (d, d), dtype=jnp.float64) for k in jax.random.split(key, 3)]


@pytest.mark.parametrize("normalization", ["sa", "usa"])
@pytest.mark.parametrize("beta", [1.0, 30.0])
def test_blocked_equals_dense(key, normalization, beta):
    x = uniform_sphere(key, 333, 3)  # 333 = not a multiple of the blocks: exercises the padding
    Q, K, V = _qkv(jax.random.fold_in(key, 1), 3)
    a = attention(x, Q, K, V, beta, normalization=normalization, block_q=64, block_k=100)
    b = attention_dense(x, Q, K, V, beta, normalization=normalization)
    assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) < 1e-12


def test_large_beta_no_overflow(key):
    """beta = 200: e^{beta <Qx, Ky>} overflows float64 for |<Qx, Ky>| > 3.5; the online softmax must not."""
    x = uniform_sphere(key, 300, 3)
    Q, K, V = _qkv(jax.random.fold_in(key, 2), 3)
    a = attention(x, Q, K, V, 200.0, block_q=100, block_k=128)
    b = attention_dense(x, Q, K, V, 200.0)
    assert bool(jnp.all(jnp.isfinite(a)))
    assert float(jnp.max(jnp.abs(a - b))) < 1e-12
    lz = log_normalizer(x, Q, K, 200.0, block_q=100, block_k=128)
    assert float(jnp.max(jnp.abs(lz - log_normalizer_dense(x, Q, K, 200.0)) / jnp.abs(lz))) < 1e-13


def test_float32_kernel(key):
    x = uniform_sphere(key, 500, 3)
    Q, K, V = _qkv(jax.random.fold_in(key, 3), 3)
    a32 = attention(x, Q, K, V, 10.0, dtype=jnp.float32, block_q=64, block_k=128)
    a64 = attention(x, Q, K, V, 10.0)
    assert a32.dtype == jnp.float64  # cast back
    assert float(jnp.max(jnp.abs(a32 - a64))) < 1e-4


def test_vmap_over_runs(key):
    xs = jnp.stack([uniform_sphere(k, 150, 3) for k in jax.random.split(key, 3)])
    eye = jnp.eye(3)
    batched = jax.vmap(lambda x: attention(x, eye, eye, eye, 5.0, block_q=64, block_k=100))(xs)
    for r in range(3):
        np.testing.assert_allclose(batched[r], attention_dense(xs[r], eye, eye, eye, 5.0), atol=1e-13)


def test_bad_input(key):
    x = uniform_sphere(key, 10, 3)
    eye = jnp.eye(3)
    with pytest.raises(ValueError, match="at least one token"):
        attention(jnp.zeros((0, 3)), eye, eye, eye, 1.0)
    with pytest.raises(ValueError, match="d >= 2"):
        attention(jnp.ones((5, 1)), jnp.eye(1), jnp.eye(1), jnp.eye(1), 1.0)
    with pytest.raises(ValueError, match="beta must be > 0"):
        attention(x, eye, eye, eye, 0.0)
    with pytest.raises(ValueError, match="square 3 x 3"):
        from attnlab.particles.integrate import make_model
        make_model(3, Q=np.ones((3, 2)))
