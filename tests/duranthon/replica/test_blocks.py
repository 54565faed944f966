"""The batched Newton loops: rounds end, known minima are a shortcut that leaves the map unchanged."""


import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import frozen_samples, solve_replica


@pytest.mark.timeout(120)
def test_presolve_ends_when_the_activity_test_disagrees_with_the_loop(monkeypatch):
    """The rounds of _presolve stop a pair once its loop takes no step, whatever the separately compiled activity
    test says (its round-off once kept a pair at |grad J| ~ 1e-12 "active" forever: duranthon-low-snr hung at
    lambda = 0.01). Here the activity test is forced to say "active" for every pair: the rounds still end, at the
    same proximal points."""
    import jax.numpy as jnp

    import attnlab.duranthon.replica as R
    import attnlab.duranthon.replica.blocks as B

    s = frozen_samples(jax.random.key(2), "spiked", 5.0, 2, 300)
    order = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    want = R.evaluate_map(activation("softmax"), order, 4.0, 1.0, 1.0, s)
    advance = B._advance_block

    def always_active(*args, **kwargs):
        x, i, moved, active, J, g = advance(*args, **kwargs)
        return x, i, moved, jnp.ones_like(active), J, g

    monkeypatch.setattr(B, "_advance_block", always_active)
    got = R.evaluate_map(activation("softmax"), order, 4.0, 1.0, 1.0, s)
    assert np.array_equal(np.asarray(got.chi), np.asarray(want.chi)) and np.array_equal(got.order, want.order)


def test_known_minima_leave_the_multistart_map_unchanged_and_save_newton_steps(monkeypatch):
    """A multistart evaluation with known minima (the single-start proximal points, as the verification of
    solve_replica passes them): loops that come within SNAP_RADIUS sqrt(V_k) of a known minimum continue from it.
    At a low-alpha fixed point where some proximal problems are non-convex (several local minima), the map value,
    proximal points, non-convexity fraction and tracked samples equal the plain multistart evaluation's to
    round-off, with fewer Newton steps; known minima are refused by the single-start map."""
    import attnlab.duranthon.replica as R
    import attnlab.duranthon.replica.fixed_point_map as FPM

    act = activation("softmax")
    s = frozen_samples(jax.random.key(5), "spiked", 2.0, 3, 400)
    r = solve_replica(act, 0.6, 0.3, 0.3, s, (0.1, 0.1, 3.0, 0.3, 0.4, 3.0))
    assert r.converged
    steps, presolve = [], FPM._presolve

    def counting(*args, **kwargs):
        ends = presolve(*args, **kwargs)
        steps.append(int(ends.steps.sum()))
        return ends

    monkeypatch.setattr(FPM, "_presolve", counting)
    plain = R.evaluate_map(act, r.order, 0.6, 0.3, 0.3, s, multistart=True)
    fast = R.evaluate_map(act, r.order, 0.6, 0.3, 0.3, s, multistart=True, known=r.chi)
    assert plain.nonconvex > 0 and plain.track is not None  # the case that matters: several local minima
    np.testing.assert_allclose(fast.order, plain.order, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(fast.chi), np.asarray(plain.chi), rtol=0, atol=1e-10)
    assert fast.nonconvex == plain.nonconvex
    np.testing.assert_array_equal(fast.track[0], plain.track[0])
    assert steps[1] < 0.8 * steps[0]
    with pytest.raises(ValueError, match="known minima"):
        R.evaluate_map(act, r.order, 0.6, 0.3, 0.3, s, multistart=False, known=r.chi)
