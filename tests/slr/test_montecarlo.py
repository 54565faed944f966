"""attnlab.slr.montecarlo: the Monte Carlo mean with its SE, at a fixed count or drawn until an SE is reached."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab import runtime, slr


def _normal(mean, sd):
    return lambda key, m: mean + sd * jax.random.normal(key, (m,))


@runtime.float64
def test_drawing_every_sample_gives_the_fixed_count_mean():
    key, f = jax.random.key(3), _normal(1.0, 2.0)
    mean, se = slr.mc_mean(key, f, 10_000, chunk=1000)
    mean2, se2, count = slr.mc_mean_to_se(key, f, 0.0, 10_000, chunk=1000)
    assert int(count) == 10_000
    np.testing.assert_allclose([float(mean2), float(se2)], [float(mean), float(se)], rtol=1e-12)


@runtime.float64
def test_stops_at_the_first_chunk_whose_running_se_reaches_the_target():
    """The count is the first multiple of the chunk (at least two chunks) at which the SE of the samples drawn so far
    is at most the target, computed here from the same samples by NumPy; the mean and SE are those samples'."""
    key, f, chunk = jax.random.key(4), _normal(-0.5, 3.0), 500
    keys = jax.random.split(key, 40)
    vals = np.concatenate([np.asarray(f(k, chunk)) for k in keys])
    target = 0.08
    se_at = [vals[: c * chunk].std(ddof=1) / np.sqrt(c * chunk) for c in range(1, 41)]
    first = next(c for c in range(2, 41) if se_at[c - 1] <= target)
    mean, se, count = slr.mc_mean_to_se(key, f, target, 40 * chunk, chunk=chunk)
    assert int(count) == first * chunk < 40 * chunk
    np.testing.assert_allclose([float(mean), float(se)], [vals[: first * chunk].mean(), se_at[first - 1]],
                               rtol=1e-10)
    assert abs(float(mean) + 0.5) <= 5 * float(se)  # the law's mean within 5 SE
    _, _, capped = slr.mc_mean_to_se(key, f, 1e-6, 3 * chunk, chunk=chunk)  # unreachable target: every sample
    assert int(capped) == 3 * chunk


@pytest.mark.parametrize("theory, control", [(1.0, 1.6), (0.2, -0.1), (3.0, 3.0 + 1e-9)])
def test_at_the_resolving_se_a_mean_within_tolerance_of_the_theory_rejects_the_control(theory, control):
    se = slr.resolving_se(theory, control)
    for mean in np.linspace(theory - 5 * se, theory + 5 * se, 11):  # every mean the 5-SE check passes
        assert abs(mean - control) > 5 * se
    assert slr.resolving_se(theory, float("nan")) == 0.0


def test_bad_target_is_one_value_error():
    with pytest.raises(ValueError, match="target_se"):
        slr.mc_mean_to_se(jax.random.key(0), lambda k, m: jnp.zeros(m), -1.0, 100, chunk=10)
