"""The Threefry/Box-Muller generator of :mod:`attnlab._random`: the block function against JAX's, the laws of
the uniforms and normals (KS at level 0.001, moments at 5 SE), the range reduction of cos/sin, determinism."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st
from jax.extend.random import threefry_2x32

from attnlab._random import cos_sin_2pi, fold_in, jax_normal, key, key_words, normal, split, threefry2x32, uniform
from attnlab.config import MAX_SEED
from attnlab.sakai.sampler import empirical_gram

ALPHA = 1e-3


def test_threefry_equals_jax_bit_for_bit():
    count = jnp.arange(4096, dtype=jnp.uint32) * jnp.uint32(2654435761)
    for k0, k1 in [(0, 0), (123, 456), (0xFFFFFFFF, 0x12345678)]:
        ref = np.asarray(threefry_2x32((jnp.uint32(k0), jnp.uint32(k1)), count))
        x0, x1 = threefry2x32(jnp.uint32(k0), jnp.uint32(k1), count[:2048], count[2048:])
        assert np.array_equal(np.concatenate([np.asarray(x0), np.asarray(x1)]), ref)


def test_cos_sin_to_round_off():
    """Against cos and sin of 2 pi u in extended precision (80-bit long double on x86; measured max error 3.1e-16).
    Against NumPy's float64 cos(2 * pi * u) the error reaches 7.5e-16, mostly the rounding of 2 pi u there."""
    u = np.concatenate([np.linspace(0.0, 1.0, 100_001, endpoint=False), [0.125, 0.25 - 2.0**-52, 0.5, 0.75]])
    c, s = (np.asarray(a) for a in jax.jit(cos_sin_2pi)(jnp.asarray(u)))
    extended = np.finfo(np.longdouble).eps < 1e-18
    pi = np.longdouble("3.14159265358979323846264338327950288") if extended else np.pi
    ul = u.astype(np.longdouble) if extended else u
    tol = 4e-16 if extended else 1e-15
    assert np.max(np.abs(c - np.cos(2 * pi * ul))) < tol
    assert np.max(np.abs(s - np.sin(2 * pi * ul))) < tol


def test_uniform_law():
    u = np.asarray(uniform(jax.random.key(0), (1_000_000,)))
    assert u.dtype == np.float64 and u.min() > 0.0 and u.max() < 1.0
    assert st.kstest(u, "uniform").pvalue > ALPHA
    # 52 random bits: (m + 1/2) 2^-52 with m integer
    m = u * 2.0**52 - 0.5
    assert np.array_equal(m, np.round(m)) and len(np.unique(u)) == u.size


@pytest.mark.parametrize("shape", [(1_000_001,), (250, 4, 1000)])
def test_normal_law(shape):
    z = np.asarray(normal(jax.random.key(1), shape)).reshape(-1)
    N = z.size
    assert st.kstest(z, "norm").pvalue > ALPHA
    assert abs(z.mean()) <= 5 / math.sqrt(N)
    assert abs(z.var() - 1.0) <= 5 * math.sqrt(2 / N)
    assert abs(st.kurtosis(z)) <= 5 * math.sqrt(24 / N)
    p3 = 2 * st.norm.sf(3.0)  # the tails
    assert abs(np.mean(np.abs(z) > 3.0) - p3) <= 5 * math.sqrt(p3 / N)
    # neighbouring draws are independent: lag-1 correlation and a 2-D KS on the pair's radius
    assert abs(np.mean(z[1:] * z[:-1])) <= 5 / math.sqrt(N)
    r2 = z[: N // 2 * 2].reshape(-1, 2) ** 2
    assert st.kstest(r2.sum(1), st.chi2(2).cdf).pvalue > ALPHA


def test_determinism_and_keys():
    f = jax.jit(lambda k: normal(k, (1000,)))
    a = np.asarray(f(jax.random.key(7)))
    assert np.array_equal(a, np.asarray(f(jax.random.key(7))))
    # op by op (no fusion, no contraction into FMAs): the same numbers up to round-off
    assert np.allclose(a, np.asarray(normal(jax.random.key(7), (1000,))), rtol=1e-14, atol=1e-15)
    assert not np.array_equal(a, np.asarray(normal(jax.random.key(8), (1000,))))
    assert not np.array_equal(np.asarray(uniform(jax.random.key(7), (1000,))),
                              np.asarray(uniform(jax.random.key(8), (1000,))))
    # any key implementation: the generator reads two words of jax.random.bits
    z = np.asarray(normal(jax.random.key(7, impl="rbg"), (200_000,)))
    assert st.kstest(z, "norm").pvalue > ALPHA
    with pytest.raises(ValueError, match="2\\^32"):
        jax.eval_shape(lambda k: uniform(k, (1 << 16, 1 << 16)), jax.random.key(0))


def test_empirical_gram_is_x_xt_over_n():
    X = np.asarray(normal(jax.random.key(2), (3, 5, 4, 37)))
    assert np.allclose(np.asarray(empirical_gram(jnp.asarray(X))), X @ np.swapaxes(X, -1, -2) / 37, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("seed", [0, 7, 2**31, 2**32 + 5, MAX_SEED])
def test_key_gives_jaxs_key_for_every_root_seed(seed):
    """The saved program's key is ``jax.random.key(seed)`` over the whole seed range (both 32-bit words); control:
    the next seed's key differs."""
    np.testing.assert_array_equal(jax.random.key_data(key(seed)), jax.random.key_data(jax.random.key(seed)))
    assert not np.array_equal(jax.random.key_data(key(seed)), jax.random.key_data(jax.random.key(seed - 1 if seed else 1)))


def test_split_and_fold_in_give_jaxs_keys():
    """The saved key programs derive JAX's keys, as a tuple for split; control: another fold-in datum differs."""
    k = jax.random.key(21)
    parts = split(k, 3)
    assert isinstance(parts, tuple) and len(parts) == 3
    for a, b in zip(parts, jax.random.split(k, 3)):
        np.testing.assert_array_equal(jax.random.key_data(a), jax.random.key_data(b))
    np.testing.assert_array_equal(jax.random.key_data(fold_in(k, 1007)), jax.random.key_data(jax.random.fold_in(k, 1007)))
    assert not np.array_equal(jax.random.key_data(fold_in(k, 1008)), jax.random.key_data(jax.random.fold_in(k, 1007)))


def test_jax_normal_and_key_words_are_jaxs_draws():
    """The saved programs draw what jax.random.normal and jax.random.bits draw; control: another key's draws."""
    k, other = jax.random.key(5), jax.random.key(6)
    np.testing.assert_array_equal(np.asarray(jax_normal(k, (3, 4))), np.asarray(jax.random.normal(k, (3, 4))))
    np.testing.assert_array_equal(np.asarray(key_words(k)), np.asarray(jax.random.bits(k, (2,), jnp.uint32)))
    assert not np.array_equal(np.asarray(jax_normal(other, (3, 4))), np.asarray(jax.random.normal(k, (3, 4))))
