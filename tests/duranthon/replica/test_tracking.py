"""The replica solver's continuation machinery: tracked local minima of the proximal problem, continuation in
alpha with a checked secant predictor, and the inner Newton loop's round-off stop.

Setting (softmax, spiked-SLR nu = 2, L = 3, lambda = 0.3, alpha = 0.5, 300 frozen samples): there five samples have
several local minima at the fixed point, so tracking has something to follow.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import (
    continue_in_alpha,
    evaluate_map,
    frozen_samples,
    solve_replica,
    standard_starts,
)
from attnlab.duranthon.replica.proximal import _objective
from attnlab.duranthon.replica.samples import _omegas

ACT = activation("softmax")
LAM = 0.3


@pytest.fixture(scope="module")
def low_alpha():
    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 3, 300)
    r = solve_replica(ACT, 0.5, LAM, LAM, s, standard_starts("spiked", 2.0)["informed"])
    assert r.converged
    return s, r


def _worst_minimum(order, s, idx, ends):
    """For each tracked sample, its tracked end point with the highest proximal objective (a non-global minimum)."""
    o = jnp.asarray(order)
    om_k, om_v, _, _ = _omegas(o, s)
    out = []
    for i, e in zip(idx, np.asarray(ends)):
        J = [float(_objective(ACT, jnp.asarray(x), om_k[i], om_v[i], s.y[i], s.mask[i], o[2], o[5], 0.0)) for x in e]
        out.append(e[int(np.argmax(J))])
    return np.array(out)


@pytest.mark.slow
def test_tracked_minima_recover_the_global_minimiser(low_alpha):
    """Warm-start the single-start map with the tracked samples put in their worst local minimum: without the
    track they stay there (a different map value than the multistart map's); with it every sample's proximal point
    and the map value equal the multistart map's."""
    s, r = low_alpha
    x = np.asarray(r.order)
    vm = evaluate_map(ACT, x, 0.5, LAM, LAM, s, multistart=True)
    assert vm.track is not None
    idx, ends = vm.track
    assert 1 <= idx.size <= 30
    chi_bad = np.array(vm.chi)
    chi_bad[idx] = _worst_minimum(x, s, idx, ends)
    stuck = evaluate_map(ACT, x, 0.5, LAM, LAM, s, multistart=False, chi0=jnp.asarray(chi_bad))
    moved = np.max(np.abs(np.asarray(stuck.chi) - np.asarray(vm.chi)), axis=1) > 1e-4
    assert moved.any() and set(np.nonzero(moved)[0]) <= set(idx)
    assert np.max(np.abs(stuck.order - vm.order)) > 1e-6
    tracked = evaluate_map(ACT, x, 0.5, LAM, LAM, s, multistart=False, chi0=jnp.asarray(chi_bad), track=vm.track)
    np.testing.assert_allclose(np.asarray(tracked.chi), np.asarray(vm.chi), atol=1e-6)
    np.testing.assert_allclose(tracked.order, vm.order, rtol=0, atol=1e-9)
    assert tracked.track is not None and np.array_equal(tracked.track[0], idx)


def test_continuation_in_alpha_matches_independent_solves(low_alpha):
    """Every point of the continuation is a converged fixed point of the multistart map, and the same one that an
    independent cold solve from the informed start finds."""
    s, _ = low_alpha
    alphas = (0.5, 0.7, 1.0)
    path = continue_in_alpha(ACT, alphas, LAM, LAM, s, standard_starts("spiked", 2.0)["informed"])
    assert [r.alpha for r in path] == list(alphas) and all(r.converged and r.residual < 1e-8 for r in path)
    for a, r in zip(alphas, path):
        cold = solve_replica(ACT, a, LAM, LAM, s, standard_starts("spiked", 2.0)["informed"])
        assert cold.converged
        np.testing.assert_allclose(np.asarray(r.order), np.asarray(cold.order), rtol=0, atol=1e-6)
        check = evaluate_map(ACT, np.asarray(r.order), a, LAM, LAM, s, multistart=True)
        assert np.max(np.abs(check.order - np.asarray(r.order))) < 1e-7


def test_a_wild_prediction_is_replaced_by_the_last_point(low_alpha):
    """Prior points that put the secant prediction at V_k - 3 (V_k = 3.3): its residual is 1.22 times its step from
    the last point (measured), so the check falls back to the last point (one evaluation spent, counted) and the
    point converges to the same fixed point as a solve started there."""
    import math

    s, r = low_alpha
    x = np.asarray(r.order)
    t = (math.log(0.55) - math.log(0.5)) / (math.log(0.5) - math.log(0.45))
    before = tuple(x - np.array([0.0, 0.0, -3.0, 0.0, 0.0, 0.0]) / t)
    path = continue_in_alpha(ACT, (0.55,), LAM, LAM, s, tuple(x), prior=[(before, 0.45), (tuple(x), 0.5)],
                             chi0=r.chi, track0=r.track)
    ref = solve_replica(ACT, 0.55, LAM, LAM, s, tuple(x), chi0=r.chi, track0=r.track)
    assert path[0].converged and ref.converged
    assert path[0].n_iter == ref.n_iter + 1
    np.testing.assert_allclose(np.asarray(path[0].order), np.asarray(ref.order), rtol=0, atol=1e-12)


def test_warm_newton_loops_stop_at_round_off(low_alpha):
    """From the fixed point's own proximal points, every inner loop stops within the first round of a warm
    evaluation: the predicted decrease is at J's round-off there (before the round-off stop, about 10% of the loops
    kept stepping at |grad J| ~ 1e-10 until the step cap)."""
    import dataclasses

    from attnlab.duranthon.replica.blocks import _presolve
    from attnlab.duranthon.replica.samples import _host

    s, r = low_alpha
    h = _host(s)
    om_k, om_v, _, _ = _omegas(r.order, h, np)
    ends = _presolve(dataclasses.replace(ACT, c=0.0), r.order[2], r.order[5], 0.0, (om_k, om_v, h.y, h.mask),
                     np.asarray(r.chi)[:, None], 30, max_rounds=1)
    assert not np.any(ends.active)
    assert int(np.max(ends.steps)) <= 2
