"""The exact Fourier sums on the circle (attnlab.bruno.circle) against the dense softmax, and where they apply."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import ive

from attnlab.bruno import circle
from attnlab.bruno.attention import attention_dense, log_normalizer_dense
from attnlab.bruno.integrate import make_model, simulate, simulate_adaptive, step
from attnlab.registry import all_presets, resolve_config
from attnlab.runtime import x64


def _tokens(n, seed=0):
    rng = np.random.default_rng(seed)
    th = rng.normal(0.0, 0.3, n) + rng.choice([1.0, 2.5, 4.5], n)  # three clusters, as the forward-heat preset
    return jnp.stack([jnp.cos(th), jnp.sin(th)], 1)


@pytest.mark.parametrize("beta,c,n", [(50.0, 1.0, 1500), (20.0, 0.5, 400), (10.0, -0.7, 600), (300.0, 1.0, 700)])
def test_attention_and_log_normaliser_match_the_dense_softmax(beta, c, n):
    """Relative to the dense N x N softmax within 1e-12 (float64 round-off times N a_0 at most); control: the series
    cut at a fifth of its order misses by far more."""
    # compiled, as the integrators call them, instead of one eager program per primitive and token count
    attention_circle = jax.jit(circle.attention_circle, static_argnames="order")
    log_normalizer_circle = jax.jit(circle.log_normalizer_circle, static_argnames="order")
    with x64():
        x = _tokens(n)
        Q, K = jnp.eye(2) * 2.0, jnp.eye(2) * c / 2.0
        V = jnp.asarray([[-1.0, 0.3], [0.2, -0.7]])
        order = circle.circle_order(beta * circle.circle_scale(Q, K))
        dense = attention_dense(x, Q, K, V, beta)
        err = lambda o: float(jnp.max(jnp.abs(attention_circle(x, Q, K, V, beta, order=o) - dense))  # noqa: E731
                              / jnp.max(jnp.abs(dense)))
        assert err(order) < 1e-12
        assert err(max(1, order // 5)) > 1e-6
        lz = log_normalizer_circle(x, c, beta, order=order)
        lz_dense = log_normalizer_dense(x, jnp.eye(2), c * jnp.eye(2), beta)
        assert float(jnp.max(jnp.abs(lz - lz_dense))) < 1e-12
        batch = jnp.stack([x, x[::-1]])
        np.testing.assert_allclose(np.asarray(attention_circle(batch, Q, K, V, beta, order=order)[1]),
                                   np.asarray(dense)[::-1], rtol=0, atol=1e-12 * float(jnp.max(jnp.abs(dense))))


@pytest.mark.parametrize("kappa", [0.5, 10.0, 50.0, 400.0, -30.0])
def test_circle_order_is_the_first_order_below_two_to_the_minus_60(kappa):
    K = circle.circle_order(kappa)
    a0 = ive(0, abs(kappa))
    assert ive(K, abs(kappa)) < 2.0**-60 * a0 and (K == 1 or ive(K - 1, abs(kappa)) >= 2.0**-60 * a0)


def test_circle_scale_recognises_exactly_the_multiples_of_the_identity():
    assert circle.circle_scale(np.eye(2), 3 * np.eye(2)) == 3.0
    assert circle.circle_scale(np.diag([2.0, 2.0]), -np.eye(2)) == -2.0
    for Q, K in ((np.eye(2), np.diag([1.0, 0.5])), (np.eye(2), np.array([[1.0, 0.1], [0.0, 1.0]])),
                 (np.eye(3), np.eye(3)), (np.eye(2), np.zeros((2, 2)))):
        assert circle.circle_scale(Q, K) is None


def test_circle_model_integrates_like_the_dense_kernel_and_only_with_euler_steps():
    """Euler steps with the circle sums follow the float64 JAX kernel's to round-off; other schemes, the adaptive
    integrator, d = 3, a non-scalar Q^T K and the USA normalisation are refused."""
    with x64():
        x0 = _tokens(300, seed=1)
        V = -np.eye(2)
        fast = make_model(2, None, None, V, 30.0, kernel_method="circle")
        ref = make_model(2, None, None, V, 30.0, kernel_method="jax")
        assert fast.circle_order == circle.circle_order(30.0)
        a = simulate(x0, fast, [0.05, 0.1], 1e-3)[0]
        b = simulate(x0, ref, [0.05, 0.1], 1e-3)[0]
        assert np.max(np.abs(a - b)) < 1e-12
        with pytest.raises(ValueError, match="euler"):
            step(x0, fast, 1e-3, "rk4")
        with pytest.raises(ValueError, match="euler"):
            simulate_adaptive(x0, fast, [0.1])
    for d, K, options in ((3, None, {}), (2, np.diag([1.0, 0.5]), {}), (2, None, {"normalization": "usa"})):
        with pytest.raises(ValueError, match="circle"):
            make_model(d, None, K, None, 1.0, kernel_method="circle", **options)


def test_the_forward_heat_preset_takes_the_circle_sums_where_they_apply():
    p = all_presets()["bruno-forward-heat"]
    impl = lambda **o: p.implementations(resolve_config(p, quick=True, overrides=o))["attention"]  # noqa: E731
    assert impl() == "circle"
    assert impl(implementation="jax") == "jax"
    assert impl(integrator="bs32") != "circle"
    assert impl(K=((1.0, 0.0), (0.0, 0.5))) != "circle"
