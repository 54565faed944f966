"""The C kernel of RGD on the empirical risk (attnlab.dohmatob.rgd_native) against the float64 JAX path."""

import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.dohmatob import rgd_native
from attnlab.dohmatob.data import sample_dohmatob
from attnlab.dohmatob.rgd import init_with_overlap, run_rgd
from attnlab.errors import AttnlabError
from attnlab.slr.data import sample_teacher
from dohmatob.common import labels_through_links
from kernels import needs

_needs_kernel = needs(rgd_native)


def _problem(d, L, n, links, repeats=2, seed=0, mu0=0.5):
    """Tokens shared by the runs of a repeat, labels through each run's link, starts at overlap mu0 with u*."""
    def prep(key):
        kt, kd, ki = jax.random.split(key, 3)
        us, vs = sample_teacher(kt, d)
        b = sample_dohmatob(kd, us, vs, n, L, 1 / math.sqrt(2), 0.1)
        Y = labels_through_links(b, vs, links)
        ks = jax.random.split(ki, 2 * len(links))
        U = jax.vmap(lambda k: init_with_overlap(k, us, mu0, d))(ks[:len(links)])
        V = jax.vmap(lambda k: init_with_overlap(k, vs, 0.0, d))(ks[len(links):])
        return b.X, Y, U, V, us, vs

    return jax.jit(jax.vmap(prep))(jax.random.split(jax.random.key(seed), repeats))  # one program, not one per primitive


@pytest.mark.parametrize("d, L, n, links", [
    (12, 5, 41, ("linear", "quadratic", "relu")),        # n off the 8-sample blocks; L off the 4-token tiles; 6 rows
    (17, 8, 33, ("quadratic", "linear")),                # 4 rows (score tiles 3 + 1); d % 3 = 2
    (37, 13, 30, ("relu",)),                             # 2 rows (remainder path of both tiles); d % 3 = 1, d > 25
    (9, 45, 7, ("linear", "relu", "linear", "quadratic")),  # L = 45 (odd, over 32), n < one block of 8 samples
    (100, 20, 64, ("linear", "linear", "quadratic", "quadratic", "relu", "relu")),  # the Figure 2 shapes
])
@pytest.mark.slow
def test_native_matches_float64_within_float32_round_off(d, L, n, links):
    """Iterates and losses of the C kernel against the all-float64 JAX path after 40 steps at the Figure-2 scale of
    lambda (beta = 1): float32 round-off only (the stable links; the quadratic link at this step is also stable at
    these sizes). On failure the message gives the float32 JAX path's distance too (measured at the Figure-2 shapes:
    2.1e-5 for it, 2.6e-6 for the kernel); it is drawn only then, to spare a compilation per case."""
    X, Y, U0, V0, _, _ = _problem(d, L, n, links)
    lam, s = math.sqrt(d), 0.01
    args = (U0, V0, X, Y, lam, s, 40, 10, links)
    hi = run_rgd(*args, implementation="jax")
    nat = run_rgd(*args, token_dtype=jnp.float32, implementation="native")
    assert nat.u.shape == hi.u.shape and nat.train_loss.shape == hi.train_loss.shape
    dist = lambda r: max(float(jnp.max(jnp.abs(r.u - hi.u))), float(jnp.max(jnp.abs(r.v - hi.v))))  # noqa: E731
    err = dist(nat)
    if not err < 2e-5:
        pytest.fail(f"kernel {err:.3g} from float64; float32 JAX path "
                    f"{dist(run_rgd(*args, token_dtype=jnp.float32, implementation='jax')):.3g}")
    np.testing.assert_allclose(nat.train_loss, hi.train_loss, rtol=2e-5)
    # the iterates moved (the comparison is along a trajectory), and stay on the sphere
    assert float(jnp.max(jnp.abs(hi.u[:, -1] - hi.u[:, 0]))) > 100 * err
    np.testing.assert_allclose(jnp.linalg.norm(nat.v, axis=-1), 1.0, atol=1e-12)


@pytest.mark.slow
def test_native_learns_like_float64_over_a_long_run():
    """300 steps from mu0 = 0.5 (d = 40, L = 10, n = 400): the overlaps with u*, v* agree with the float64 run to
    1e-4, far below their sampling spread (~1/sqrt(n) = 0.05), and the run learned (nu > 0.9)."""
    d, L, n = 40, 10, 400
    X, Y, U0, V0, us, vs = _problem(d, L, n, ("linear", "relu"), repeats=1, seed=3)
    us, vs = us[0], vs[0]
    args = (U0, V0, X, Y, math.sqrt(d), 0.01, 300, 100, ("linear", "relu"))
    hi, nat = run_rgd(*args, implementation="jax"), run_rgd(*args, token_dtype=jnp.float32, implementation="native")
    for a, b in ((hi.u, nat.u), (hi.v, nat.v)):
        assert float(jnp.max(jnp.abs(a[0, -1] @ jnp.stack([us, vs]).T - b[0, -1] @ jnp.stack([us, vs]).T))) < 1e-4
    assert float(hi.v[0, -1, 0] @ vs) > 0.9


@pytest.mark.slow
def test_auto_picks_native_only_where_it_applies(monkeypatch):
    """auto = native for float32 tokens and named links; the JAX path for float64 or a callable link; bad names."""
    X, Y, U0, V0, _, _ = _problem(8, 4, 12, ("linear",), repeats=1)
    calls = []
    real = rgd_native.run
    monkeypatch.setattr(rgd_native, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    run_rgd(U0, V0, X, Y, 3.0, 0.01, 4, 2, ("linear",), token_dtype=jnp.float32)
    assert calls
    calls.clear()
    run_rgd(U0, V0, X, Y, 3.0, 0.01, 4, 2, ("linear",))  # float64 tokens
    run_rgd(U0, V0, X, Y, 3.0, 0.01, 4, 2, (jnp.tanh,), token_dtype=jnp.float32)  # callable link
    assert not calls
    with pytest.raises(AttnlabError, match="unknown implementation"):
        run_rgd(U0, V0, X, Y, 3.0, 0.01, 4, 2, ("linear",), implementation="gpu")
    with pytest.raises(AttnlabError, match="implementation='native' cannot run: it needs float32 tokens"):
        run_rgd(U0, V0, X, Y, 3.0, 0.01, 4, 2, ("linear",), implementation="native")  # float64 tokens


def test_bad_shapes_rejected():
    with pytest.raises(ValueError, match="tokens must come from"):  # the token-major array itself
        rgd_native.run(np.zeros((1, 3, 4, 5), np.float32), np.zeros((1, 1, 3)), ("linear",), np.zeros((1, 2, 5)),
                       1.0, 0.1, 1, 1)
    Xp = rgd_native.tokens(np.zeros((1, 3, 4, 5)))
    with pytest.raises(ValueError, match="inconsistent shapes"):
        rgd_native.run(Xp, np.zeros((1, 2, 3)), ("linear",), np.zeros((1, 2, 5)), 1.0, 0.1, 1, 1)


def test_same_numbers_for_any_thread_count(tmp_path):
    """One repeat per OpenMP thread from start to end: 1 and 3 threads give bit-identical iterates."""
    code = (
        "import numpy as np, sys; from attnlab.dohmatob import rgd_native as r\n"
        "g = np.random.default_rng(0); X = g.standard_normal((3, 50, 7, 11)); Y = g.standard_normal((3, 2, 50))\n"
        "W = g.standard_normal((3, 4, 11)); W /= np.linalg.norm(W, axis=-1, keepdims=True)\n"
        "w, l = r.run(r.tokens(X), Y, ('linear', 'relu'), W, 3.3, 0.05, 3, 5)\n"
        "np.save(sys.argv[1], np.concatenate([w.ravel(), l.ravel()]))\n")
    out = []
    for threads in (1, 3):
        path = tmp_path / f"t{threads}.npy"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env)
        out.append(np.load(path))
    np.testing.assert_array_equal(out[0], out[1])


def test_the_calling_thread_keeps_its_denormals():
    """The kernel flushes denormals to zero in its own arithmetic only: the thread that called it (the one thread of
    OMP_NUM_THREADS=1, which runs every repeat) computes with denormal numbers again afterwards."""
    code = (
        "import numpy as np; from attnlab.dohmatob import rgd_native as r\n"
        "tiny = np.float32(2.0 ** -140)\n"
        "assert np.multiply(tiny, np.float32(1.0)) == tiny  # denormals before\n"
        "g = np.random.default_rng(0); X = 3 * g.standard_normal((2, 20, 7, 11)); Y = g.standard_normal((2, 1, 20))\n"
        "W = g.standard_normal((2, 2, 11)); W /= np.linalg.norm(W, axis=-1, keepdims=True)\n"
        "r.run(r.tokens(X), Y, ('linear',), W, 30.0, 0.05, 1, 2)\n"
        "print(float(np.multiply(tiny, np.float32(1.0)) / tiny))\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True)
    assert float(res.stdout.strip()) == 1.0
