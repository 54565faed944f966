"""The blocked kernels (shift, online, auto) against dense attention (float64 to 1e-12, beta up to 200), float32,
the fallback from the shift kernel to the online one (also under vmap), exp2_f32, vmap, bad input, the kernel's
forms (the Pallas one in its interpreter) and the defaults by backend."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.bruno.attention import (
    FORMS,
    METHODS,
    attention,
    attention_dense,
    exp2_f32,
    log_normalizer,
    log_normalizer_dense,
)
from attnlab.bruno.initial import uniform_sphere

attention_module = importlib.import_module("attnlab.bruno.attention")  # the package re-exports the function
JAX_METHODS = [m for m in METHODS if m != "native"]  # the C kernel serves float32 only (test_float32_kernel)


def _qkv(key, d):
    return [jax.random.normal(k, (d, d), dtype=jnp.float64) for k in jax.random.split(key, 3)]


@pytest.mark.parametrize("method", JAX_METHODS)
@pytest.mark.parametrize("normalization", ["sa", "usa"])
@pytest.mark.parametrize("beta", [1.0, 30.0])
def test_blocked_equals_dense(key, normalization, beta, method):
    x = uniform_sphere(key, 333, 3)  # 333 = not a multiple of the blocks: exercises the padding
    Q, K, V = _qkv(jax.random.fold_in(key, 1), 3)
    a = attention(x, Q, K, V, beta, normalization=normalization, block_q=64, block_k=100, method=method)
    b = attention_dense(x, Q, K, V, beta, normalization=normalization)
    assert float(jnp.max(jnp.abs(a - b)) / jnp.max(jnp.abs(b))) < 1e-12


@pytest.mark.parametrize("method", JAX_METHODS)
def test_large_beta_no_overflow(key, method):
    """beta = 200: e^{beta <Qx, Ky>} overflows float64 for |<Qx, Ky>| > 3.5; no kernel may."""
    x = uniform_sphere(key, 300, 3)
    Q, K, V = _qkv(jax.random.fold_in(key, 2), 3)
    a = attention(x, Q, K, V, 200.0, block_q=100, block_k=128, method=method)
    b = attention_dense(x, Q, K, V, 200.0)
    assert bool(jnp.all(jnp.isfinite(a)))
    assert float(jnp.max(jnp.abs(a - b))) < 1e-12
    lz = log_normalizer(x, Q, K, 200.0, block_q=100, block_k=128, method=method)
    assert float(jnp.max(jnp.abs(lz - log_normalizer_dense(x, Q, K, 200.0)) / jnp.abs(lz))) < 1e-13


@pytest.mark.parametrize("method", METHODS)
def test_float32_kernel(key, method):
    if method == "native" and jax.default_backend() != "cpu":
        pytest.skip("the C kernel serves the CPU backend (test_native_refuses_what_it_cannot_serve)")
    x = uniform_sphere(key, 500, 3)
    Q, K, V = _qkv(jax.random.fold_in(key, 3), 3)
    a32 = attention(x, Q, K, V, 10.0, dtype=jnp.float32, block_q=64, block_k=128, method=method)
    a64 = attention(x, Q, K, V, 10.0)
    assert a32.dtype == jnp.float64  # cast back
    assert float(jnp.max(jnp.abs(a32 - a64))) < 1e-4


def test_vmap_over_runs(key):
    xs = jnp.stack([uniform_sphere(k, 150, 3) for k in jax.random.split(key, 3)])
    eye = jnp.eye(3)
    batched = jax.vmap(lambda x: attention(x, eye, eye, eye, 5.0, block_q=64, block_k=100))(xs)
    for r in range(3):
        np.testing.assert_allclose(batched[r], attention_dense(xs[r], eye, eye, eye, 5.0), atol=1e-13)


def _far_keys(key, n, dtype):
    """Tokens in a cap of angular radius 0.1 around the north pole, K = -I: every score of every row lies
    2 beta (1 - O(0.01)) below the Cauchy-Schwarz bound |Q x_i| max |K x_j| = beta, the worst case of the shift."""
    z = jax.random.normal(key, (n, 3), dtype=jnp.float64) * 0.1
    x = jnp.concatenate([z[:, :2], jnp.ones((n, 1))], axis=1)
    return (x / jnp.linalg.norm(x, axis=1, keepdims=True)).astype(dtype)


@pytest.mark.parametrize("dtype, beta", [(jnp.float32, 100.0), (jnp.float64, 600.0)])
def test_shift_underflow_falls_back_to_online(key, dtype, beta):
    """Base-2 gap 2 beta log2(e) = 288 (float32) / 1731 (float64) exceeds margin + threshold (64 + 60 / 512 + 900):
    the shift kernel's normaliser underflows to 0 and ``auto`` must notice and redo the call with the online one."""
    x = _far_keys(key, 200, dtype)
    eye = jnp.eye(3, dtype=dtype)
    ref = attention_dense(x.astype(jnp.float64), jnp.eye(3), -jnp.eye(3), jnp.eye(3), beta)
    shift = attention(x, eye, -eye, eye, beta, block_q=64, block_k=100, method="shift")
    assert not bool(jnp.all(jnp.isfinite(shift)))  # the case really needs the fallback
    tol = 1e-12 if dtype == jnp.float64 else 1e-3  # float32: scores ~ beta = 100 carry errors ~ 100 * 6e-8 * |x|
    for method in ("auto", "online"):
        a = attention(x, eye, -eye, eye, beta, block_q=64, block_k=100, method=method)
        assert float(jnp.max(jnp.abs(a - ref))) < tol, method
    lz = log_normalizer(x, eye, -eye, beta, block_q=64, block_k=100)
    lz_ref = log_normalizer_dense(x.astype(jnp.float64), jnp.eye(3), -jnp.eye(3), beta)
    assert float(jnp.max(jnp.abs(lz - lz_ref) / jnp.abs(lz_ref))) < (1e-13 if dtype == jnp.float64 else 1e-6)


def test_fallback_under_vmap(key):
    """A batch of two runs, one of which needs the fallback: both come out right (the batching rule of ``auto``)."""
    x_bad = _far_keys(key, 150, jnp.float64)
    x_good = uniform_sphere(jax.random.fold_in(key, 1), 150, 3)
    eye = jnp.eye(3)
    out = jax.vmap(lambda x: attention(x, eye, -eye, eye, 600.0, block_q=64, block_k=100))(jnp.stack([x_bad, x_good]))
    for r, x in enumerate((x_bad, x_good)):
        np.testing.assert_allclose(out[r], attention_dense(x, eye, -eye, eye, 600.0), atol=1e-12)


@pytest.mark.parametrize("method", JAX_METHODS)
def test_gradient_matches_dense(key, method):
    """Reverse-mode autodiff through every kernel (``auto`` through its JVP rule) equals the dense gradient."""
    x = uniform_sphere(key, 120, 3)
    Q, K, V = _qkv(jax.random.fold_in(key, 4), 3)

    def loss(Q, fn):
        return jnp.sum(fn(x, Q, K, V, 3.0) ** 2)

    # compiled, as the integrators differentiate them, instead of one eager program per primitive
    grad = jax.grad(lambda Q: loss(Q, lambda *a: attention(*a, block_q=64, block_k=50, method=method)))
    g = jax.jit(grad)(Q)
    g_dense = jax.jit(jax.grad(lambda Q: loss(Q, attention_dense)))(Q)
    assert float(jnp.max(jnp.abs(g - g_dense)) / jnp.max(jnp.abs(g_dense))) < 1e-12
    gv = jax.jit(jax.vmap(grad))(jnp.stack([Q, -Q]))
    np.testing.assert_allclose(gv[0], g_dense, atol=1e-12 * float(jnp.max(jnp.abs(g_dense))))


def test_exp2_f32():
    """Against float64 2^t: relative error <= 7.5e-8 (minimax fit) + 5 float32 roundings of 2^-24 = 3.7e-7
    on [-126, 64]; exactly 0 below -127.5 (the underflow convention)."""
    t = np.linspace(-126.0, 64.0, 200_001).astype(np.float32)
    got = np.asarray(exp2_f32(jnp.asarray(t)), dtype=np.float64)
    rel = np.abs(got / np.exp2(t.astype(np.float64)) - 1.0)
    assert rel.max() < 7.5e-8 + 5 * 2.0**-24
    assert np.all(np.asarray(exp2_f32(jnp.asarray([-127.6, -200.0, -1e30], jnp.float32))) == 0.0)


def test_bad_input(key):
    x = uniform_sphere(key, 10, 3)
    eye = jnp.eye(3)
    with pytest.raises(ValueError, match="at least one token"):
        attention(jnp.zeros((0, 3)), eye, eye, eye, 1.0)
    with pytest.raises(ValueError, match="d >= 2"):
        attention(jnp.ones((5, 1)), jnp.eye(1), jnp.eye(1), jnp.eye(1), 1.0)
    with pytest.raises(ValueError, match="beta must be > 0"):
        attention(x, eye, eye, eye, 0.0)
    with pytest.raises(ValueError, match="method must be one of"):
        attention(x, eye, eye, eye, 1.0, method="fast")
    with pytest.raises(ValueError, match="square 3 x 3"):
        from attnlab.bruno.integrate import make_model
        make_model(3, Q=np.ones((3, 2)))


def test_native_refuses_what_it_cannot_serve(key):
    x = uniform_sphere(key, 50, 3)
    Q, K, V = _qkv(key, 3)
    with pytest.raises(ValueError, match="method='native' needs float32"):
        attention(x, Q, K, V, 1.0, method="native")


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_the_shift_kernel_gives_the_dense_attention(key, form):
    """Each way of asking for the shift kernel's sums (``pallas`` in Pallas's interpreter off a GPU) is the dense
    attention in float32, directly and vmapped over runs."""
    xs = jnp.stack([uniform_sphere(k, 300, 3) for k in jax.random.split(key, 2)]).astype(jnp.float32)
    eye = jnp.eye(3)

    def out(x):
        v1 = jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)
        _, acc = attention_module._shifted(x, x, v1, jnp.float32(10.0), 128, 96, form=form)
        return acc[:, :-1] / acc[:, -1:]

    got = jax.vmap(out)(xs)
    for r in range(2):
        ref = attention_dense(xs[r].astype(jnp.float64), eye, eye, eye, 10.0)
        assert float(jnp.linalg.norm(got[r] - ref) / jnp.linalg.norm(ref)) < 1e-6


def test_form_and_blocks_follow_the_backend():
    assert attention_module.default_form(jnp.float32, "cpu") == "matmul"
    assert attention_module.default_form(jnp.float32, "gpu") == "pallas"
    assert attention_module.default_form(jnp.float64, "gpu") == "reduce"  # the Pallas kernel is float32 only
    assert attention_module._differentiable("pallas") == "reduce"
    assert attention_module.default_blocks(50_000, "cpu") == (1024, 2048)
    bq, bk = attention_module.default_blocks(50_000, "gpu")
    assert bq == 50_000 and bk * 50_000 <= attention_module.ACCELERATOR_SCORES and bk >= 1024
    assert attention_module.default_blocks(500, "gpu") == (500, 500)
