"""The C kernel (attnlab.bruno.native) and its use by ``attention(..., method="auto")`` in float32: against dense
float64 attention for d = 2..8, padding, beta up to 200, symmetric PSD S = Q^T K; the fallbacks to the JAX kernels
(non-symmetric S, indefinite S with overflowing scores), under vmap with mixed batches, derivatives, bad input."""

import os
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.bruno import native
from attnlab.bruno.attention import (
    _attention_jit,
    _log_normalizer_jit,
    _native_inputs,
    attention,
    attention_dense,
    log_normalizer,
    log_normalizer_dense,
)
from attnlab.bruno.initial import uniform_sphere
from kernels import needs

_needs_kernel = needs(native)

# float32 scores have rounding errors ~ beta * |x|^2 * 6e-8 in the exponent; outputs are weighted means of unit vectors
TOL32 = 2e-5


@partial(jax.jit, static_argnums=1)
def _spd(key, d, spread=1.0):
    A = jax.random.normal(key, (d, d))
    U, _ = jnp.linalg.qr(A)
    return (U * jnp.linspace(1.0, 1.0 + spread, d)) @ U.T


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("d,n", [(2, 1001), (3, 333), (5, 37), (8, 130)])
def test_symmetric_sums_match_direct_sum(key, d, n):
    """acc_i = sum_j 2^(<q_i, x_j> - c_i - c_j) u_j, against the float64 double loop written out."""
    x = np.asarray(uniform_sphere(key, n, d))
    S = np.asarray(_spd(jax.random.fold_in(key, 1), d))
    q2 = 20.0 * x @ S
    c = 0.5 * np.sum(q2 * x, 1)
    u = np.random.default_rng(0).standard_normal((n, d + 1))
    acc = native.symmetric_sums(q2, c, x, u)
    ref = np.exp2(q2 @ x.T - c[:, None] - c[None, :]) @ u
    assert acc.shape == (n, d + 1) and acc.dtype == np.float32
    assert np.max(np.abs(acc - ref)) < 1e-5 * np.max(np.abs(ref))


@pytest.mark.parametrize("path", ["xla", "callback"])
@pytest.mark.parametrize("normalization", ["sa", "usa"])
@pytest.mark.parametrize("beta", [1.0, 30.0, 200.0])
def test_auto_float32_uses_native_and_matches_dense(key, beta, normalization, path, monkeypatch):
    """Through the kernel's XLA FFI handler (counted when traced) and, where a build lacks it, through a Python
    callback (counted when called)."""
    calls = []
    name = "symmetric_sums_xla" if path == "xla" else "symmetric_sums"
    kernel = getattr(native, name)

    def counted(*args):
        calls.append(1)
        return kernel(*args)

    if path == "xla":
        assert native.xla_target() is not None, "the kernel was built without its XLA handler"
    else:
        monkeypatch.setattr(native, "xla_target", lambda: None)
    monkeypatch.setattr(native, name, counted)
    # a program compiled before would call the kernel it was traced with, not the counted one: the two jitted
    # functions that trace the kernel's call trace it again (the other programs of the worker stay compiled)
    _attention_jit.clear_cache()
    _log_normalizer_jit.clear_cache()
    x = uniform_sphere(key, 777, 3)
    S = _spd(jax.random.fold_in(key, 2), 3, spread=0.5)
    V = jax.random.normal(jax.random.fold_in(key, 3), (3, 3))
    eye = jnp.eye(3)
    _, _, _, usable = _native_inputs(x.astype(jnp.float32), S.astype(jnp.float32), jnp.float32(beta))
    assert bool(usable)
    if normalization == "usa" and beta > 50:
        pytest.skip("the USA output itself overflows float32 at beta = 200 (as the model does)")
    a = attention(x, eye, S, V, beta, normalization=normalization, dtype=jnp.float32)
    a.block_until_ready()
    assert calls, "method='auto' in float32 did not call the C kernel"
    n_auto = len(calls)
    b = attention_dense(x, eye, S, V, beta, normalization=normalization)
    xla = attention(x, eye, S, V, beta, normalization=normalization, dtype=jnp.float32, method="jax")
    xla.block_until_ready()
    assert len(calls) == n_auto  # method='jax' does not call it
    assert bool(jnp.all(jnp.isfinite(a)))
    assert _rel(a, b) < TOL32 * max(1.0, beta / 30)
    assert _rel(a, xla) < TOL32 * max(1.0, beta / 30)
    lz = log_normalizer(x, eye, S, beta, dtype=jnp.float32)
    assert float(jnp.max(jnp.abs(lz - log_normalizer_dense(x, eye, S, beta)))) < 1e-5 * beta + 1e-5


@pytest.mark.parametrize("d,n", [(2, 1001), (3, 333), (8, 130)])
def test_the_xla_handler_computes_the_callbacks_numbers_bit_for_bit(key, d, n):
    """symmetric_sums_xla (XLA calls the kernel through its FFI handler, inside a compiled program, vmapped
    sequentially) gives exactly symmetric_sums's float32 numbers, padding included. Control: another u differs."""
    x = np.asarray(uniform_sphere(key, n, d), np.float32)
    S = np.asarray(_spd(jax.random.fold_in(key, 1), d))
    q2 = (20.0 * x @ S).astype(np.float32)
    c = 0.5 * np.sum(q2 * x, 1)
    u = np.random.default_rng(d).standard_normal((n, d + 1)).astype(np.float32)
    want = native.symmetric_sums(q2, c, x, u)
    got = np.asarray(jax.jit(native.symmetric_sums_xla)(q2, c, x, u))
    assert got.shape == (n, d + 1) and got.dtype == np.float32 and np.array_equal(got, want)
    batched = np.asarray(jax.jit(jax.vmap(native.symmetric_sums_xla))(q2[None], c[None], x[None], np.stack([u])))
    assert np.array_equal(batched[0], want)
    assert not np.array_equal(np.asarray(jax.jit(native.symmetric_sums_xla)(q2, c, x, 2 * u)), want)


def test_the_native_path_runs_on_one_core():
    """A process that may run on one core only (XLA's thread pool then has one thread, as in a sweep's pinned
    worker) finishes a float32 flow on the native path (2,000 tokens: the full size's 10^4 take twice as long and
    test nothing more). Through a Python callback the same run hung (2 s of CPU in 60 s): the callback's inputs were
    copies that only the pool's one thread, busy running the callback's program, could make."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    code = ("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
            "import attnlab\n"
            "run = attnlab.run('bruno-alignment', t_end=0.2, times=(0.1, 0.2), n_tokens=2000)\n"
            "assert run.implementations['attention'] == 'native', run.implementations\n"
            "print(all(c.passed for c in run.checks))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]


@pytest.mark.parametrize("d", [2, 4, 8])
def test_identity_sphere_all_dimensions(key, d):
    x = uniform_sphere(key, 500, d)
    eye = jnp.eye(d)
    a = attention(x, eye, eye, -eye, 50.0, dtype=jnp.float32)
    assert _rel(a, attention_dense(x, eye, eye, -eye, 50.0)) < TOL32


def test_fallbacks_give_the_jax_kernels(key):
    """Non-symmetric S, and a symmetric indefinite S whose scores would overflow the exponent: both fall back."""
    x = uniform_sphere(key, 300, 3)
    Q, K, V = (jax.random.normal(k, (3, 3)) for k in jax.random.split(key, 3))
    a = attention(x, Q, K, V, 10.0, dtype=jnp.float32)
    assert bool(jnp.all(a == attention(x, Q, K, V, 10.0, dtype=jnp.float32, method="jax")))
    S = jnp.diag(jnp.array([1.0, -1.0, 0.5]))
    _, _, _, usable = _native_inputs(x.astype(jnp.float32), S.astype(jnp.float32), jnp.float32(60.0))
    assert not bool(usable)
    a = attention(x, jnp.eye(3), S, V, 60.0, dtype=jnp.float32)
    assert bool(jnp.all(a == attention(x, jnp.eye(3), S, V, 60.0, dtype=jnp.float32, method="jax")))
    assert _rel(a, attention_dense(x, jnp.eye(3), S, V, 60.0)) < 1e-4


def test_vmap_mixed_batch(key):
    """A batch where one run cannot use the C kernel: the whole batch falls back, every run stays correct."""
    xs = jnp.stack([uniform_sphere(k, 200, 3) for k in jax.random.split(key, 3)])
    Ks = jnp.stack([jnp.eye(3), 2.0 * jnp.eye(3), jnp.diag(jnp.array([1.0, -1.0, 0.5]))])
    eye = jnp.eye(3)
    for batch in (Ks[:2], Ks):
        f = jax.jit(jax.vmap(lambda x, K: attention(x, eye, K, eye, 60.0, dtype=jnp.float32)))
        out = f(xs[:len(batch)], batch)
        for i in range(len(batch)):
            assert _rel(out[i], attention_dense(xs[i], eye, batch[i], eye, 60.0)) < 1e-4


def test_gradient_through_auto_float32(key):
    x = uniform_sphere(key, 120, 3)
    S = _spd(jax.random.fold_in(key, 5), 3)

    def loss(S, method):
        return jnp.sum(attention(x, jnp.eye(3), S, jnp.eye(3), 5.0, dtype=jnp.float32, method=method) ** 2)

    g, g_xla = jax.grad(loss)(S, "auto"), jax.grad(loss)(S, "jax")
    assert _rel(g, g_xla) < 1e-5


def test_deterministic(key):
    x = uniform_sphere(key, 999, 3)
    eye = jnp.eye(3)
    a, b = (attention(x, eye, eye, eye, 30.0, dtype=jnp.float32) for _ in range(2))
    assert bool(jnp.all(a == b))


def test_same_numbers_for_any_thread_count(tmp_path):
    """Row pairs go to 8 fixed chunks summed in order, so OMP_NUM_THREADS = 1, 2, 3 give identical bits."""
    code = ("import numpy as np, hashlib; from attnlab.bruno import native; "
            "x = np.random.default_rng(1).standard_normal((3001, 3)); x /= np.linalg.norm(x, axis=1, keepdims=True); "
            "q = 40.0 * x; c = 0.5 * np.sum(q * x, 1); u = np.concatenate([x, np.ones((3001, 1))], 1); "
            "print(hashlib.sha256(native.symmetric_sums(q, c, x, u).tobytes()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": str(t)},
                              capture_output=True, text=True, check=True).stdout.strip() for t in (1, 2, 3)}
    assert len(digests) == 1


def test_large_beta_terms_below_the_float32_range_are_negligible(key):
    """At beta = 1000 on S^2 most terms fall below 2^-126 and are flushed to zero in the kernel: the sums still match
    the float64 double loop (where those terms are kept) to float32 round-off: the scores, of size beta / ln 2, carry
    a few roundings of 2^-24 relative each, so the terms a relative error of about beta 2^-24 per rounding (four
    allowed; 1.5e-6, 1.1e-5, 4.2e-5 measured at beta = 30, 200, 1000, the same with denormals kept)."""
    x = np.asarray(uniform_sphere(key, 2001, 3))
    q2 = 1000.0 / np.log(2.0) * x
    c = 0.5 * np.sum(q2 * x, 1)
    u = np.concatenate([x, np.ones((2001, 1))], 1)
    ref = np.exp2(q2 @ x.T - c[:, None] - c[None, :]) @ u
    assert np.mean(np.exp2(q2 @ x.T - c[:, None] - c[None, :]) < 2.0 ** -126) > 0.5  # the regime this test is for
    assert np.max(np.abs(native.symmetric_sums(q2, c, x, u) - ref)) < 4 * 1000.0 * 2.0**-24 * np.max(np.abs(ref))


def test_the_calling_thread_keeps_its_denormals():
    """The kernel flushes denormals in its own arithmetic only: with OMP_NUM_THREADS=1 the calling thread runs every
    chunk, and computes with denormal numbers again afterwards."""
    code = ("import numpy as np; from attnlab.bruno import native; tiny = np.float32(2.0 ** -140); "
            "x = np.random.default_rng(1).standard_normal((301, 3)); x /= np.linalg.norm(x, axis=1, keepdims=True); "
            "q = 1000.0 * x; c = 0.5 * np.sum(q * x, 1); u = np.concatenate([x, np.ones((301, 1))], 1); "
            "assert np.multiply(tiny, np.float32(1.0)) == tiny; native.symmetric_sums(q, c, x, u); "
            "print(float(np.multiply(tiny, np.float32(1.0)) / tiny))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "OMP_NUM_THREADS": "1"},
                         capture_output=True, text=True, check=True).stdout
    assert float(out.strip()) == 1.0


def test_bad_input():
    x = np.zeros((10, 9))
    with pytest.raises(ValueError, match="2 <= d <= 8"):
        native.symmetric_sums(x, np.zeros(10), x, np.zeros((10, 10)))


def test_disabled_by_environment(tmp_path):
    code = "from attnlab.bruno import native; print(native.available(), native.unavailable_reason())"
    env = {**os.environ, "ATTNLAB_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False disabled by ATTNLAB_NATIVE=0"
