"""The Pallas kernel's exponentials (attnlab.bruno.attention_gpu): the polynomial 2^f's error bound from its
coefficients, exp2_poly in float32 against float64 (near 0, at half-integers, down to and past the underflow
clamp), and the kernel (compiled on a GPU, in Pallas's interpreter elsewhere) with part or all of its exp2's from
the polynomial against the same sums in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.bruno.attention import _shift
from attnlab.bruno.attention_gpu import MUFU, POLY_COEFFS, exp2_poly, shifted_sums
from attnlab.bruno.initial import uniform_sphere

pytestmark = pytest.mark.jax_path

INTERPRET = jax.default_backend() != "gpu"
"""The kernel itself on a GPU (Triton), Pallas's interpreter elsewhere."""
POLY_BOUND = 1.1e-7
"""Max relative error of p(f) = sum_i c_i f^i against 2^f over [-1/2, 1/2] in exact arithmetic (1.05e-7 measured
over every float32 f; the reduction t = round(t) + f puts f there, so this is the polynomial's whole range)."""
FLOAT32_BOUND = 2e-7
"""exp2_poly evaluated in float32 (1.49e-7 with fused multiply-adds, 1.67e-7 without), against float64."""


def test_polynomial_error_bound_from_its_coefficients():
    c = np.asarray(POLY_COEFFS, np.float64)
    assert c[0] == 1.0 and np.all(c.astype(np.float32).astype(np.float64) == c)  # float32 constants, exact at 0
    f = np.unique(np.linspace(-0.5, 0.5, 400_001, dtype=np.float32)).astype(np.float64)
    err = np.polynomial.polynomial.polyval(f, c) / np.exp2(f) - 1.0
    assert np.max(np.abs(err)) < POLY_BOUND
    assert np.max(np.abs(err)) > 0.5 * POLY_BOUND  # the bound is the fit's, not a loose one


def _rel(got, t):
    return np.abs(np.asarray(got, np.float64) / np.exp2(np.asarray(t, np.float64)) - 1.0)


def test_exp2_poly_in_float32_against_float64():
    rng = np.random.default_rng(0)
    near_zero = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 2**-24, -(2**-24), 0.25, -0.25], np.float32)
    halves = np.arange(-125.5, 64.0, 1.0, dtype=np.float32)  # ties of the rounding to the nearest integer
    integers = np.arange(-126, 65, dtype=np.float32)
    wide = rng.uniform(-126.0, 64.0, 200_000).astype(np.float32)
    fn = jax.jit(exp2_poly)
    for t in (near_zero, halves, wide):
        assert np.max(_rel(fn(jnp.asarray(t)), t)) < FLOAT32_BOUND
    assert np.array_equal(np.asarray(fn(jnp.asarray(integers))), np.exp2(integers))  # p(0) = 1: powers of 2 exact
    assert np.asarray(fn(jnp.asarray(near_zero[:4]))).tolist() == [1.0] * 4


def test_exp2_poly_below_the_clamp_gives_the_smallest_normal():
    t = jnp.asarray([-126.0, -126.2, -126.5, -127.0, -149.0, -300.0, -1e30, -jnp.inf], jnp.float32)
    got = np.asarray(jax.jit(exp2_poly)(t))
    tiny = np.finfo(np.float32).tiny  # 2^-126: exp2 itself gives a subnormal or 0 there, a difference below 1.2e-38
    assert np.all(got == tiny)


def _sums64(q2, m2, k, u):
    t = np.asarray(q2, np.float64) @ np.asarray(k, np.float64).T - np.asarray(m2, np.float64)[:, None]
    return np.exp2(t) @ np.asarray(u, np.float64)


def _inputs(key, n, beta):
    x = uniform_sphere(key, n, 3).astype(jnp.float32)
    q2, m2 = _shift(x, x, jnp.float32(beta))
    u = jnp.concatenate([x, jnp.ones((n, 1), jnp.float32)], axis=1)
    return q2, m2, x, u


@pytest.mark.parametrize("exp_split, mufu, prefetch", [((0, 1), "exp2", False), ((1, 2), "exp2", False),
                                                       ((1, 1), "exp2", True), ((2, 3), "ftz", True)])
def test_kernel_with_polynomial_exponentials_matches_float64(key, exp_split, mufu, prefetch):
    """N = 333 keys in blocks of 16 (21 blocks, padded to whole groups), beta = 30 and 200: with beta = 200 most
    scores lie far below the clamp at 2^-126 (t down to about -580), the diagonal ones at t = 0. With ``prefetch``
    the loop carries the next group's keys."""
    for beta in (30.0, 200.0):
        q2, m2, x, u = _inputs(key, 333, beta)
        t_min = float(jnp.min(q2 @ x.T - m2[:, None]))
        run = lambda split, mufu, pf=False: np.asarray(shifted_sums(  # noqa: E731
            q2, m2, x, u, block_q=32, block_k=16, exp_split=split, mufu=mufu, prefetch=pf, interpret=INTERPRET), np.float64)
        acc = run(exp_split, mufu, prefetch)
        ref = _sums64(q2, m2, x, u)
        a, a64 = acc[:, :3] / acc[:, 3:], ref[:, :3] / ref[:, 3:]
        assert np.linalg.norm(a - a64) / np.linalg.norm(a64) < 1e-6
        # the normalisers l_i against the kernel's own with every exp2 from XLA (the same float32 scores, whose
        # rounding alone moves l_i by ~beta * 1e-7 from the float64 sums)
        assert np.max(np.abs(acc[:, 3] / run((0, 1), "exp2")[:, 3] - 1.0)) < 1e-6
        if beta == 200.0:
            assert t_min < -400.0


def test_kernel_rows_that_underflow_still_read_as_underflowed(key):
    """Every score of a row more than 126 below its shift: the polynomial gives 2^-126 per term where exp2 gives
    about 0, and l_i stays far below attention's threshold 2^-60, so its fallback to the online kernel still fires."""
    q2, m2, x, u = _inputs(key, 200, 10.0)
    m_low = m2 + 300.0  # every t_ij <= -300 + 0
    for exp_split in ((0, 1), (1, 1), (1, 2)):
        acc = np.asarray(shifted_sums(q2, m_low, x, u, block_q=32, block_k=16, exp_split=exp_split,
                                      interpret=INTERPRET))
        assert np.all(np.isfinite(acc)) and np.all(acc[:, 3] < 2.0**-60)


def test_kernel_options_are_checked():
    q2 = jnp.zeros((8, 3), jnp.float32)
    u = jnp.ones((8, 4), jnp.float32)
    with pytest.raises(ValueError, match="exp_split"):
        shifted_sums(q2, jnp.zeros(8, jnp.float32), q2, u, exp_split=(3, 2), interpret=INTERPRET)
    with pytest.raises(ValueError, match="mufu"):
        shifted_sums(q2, jnp.zeros(8, jnp.float32), q2, u, mufu="fast", interpret=INTERPRET)
    assert MUFU == ("exp2", "ftz")
