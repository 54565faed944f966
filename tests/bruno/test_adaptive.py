"""Adaptive Bogacki-Shampine 3(2) integration: observed global error against the tolerance, long pairing horizons."""

import jax
import numpy as np
import pytest

from attnlab.bruno import initial, reduced
from attnlab.bruno.integrate import make_model, simulate, simulate_adaptive


def _random_model(key, beta=5.0):
    Q, K, V = (np.asarray(jax.random.normal(k, (3, 3))) / 2 for k in jax.random.split(key, 3))
    return make_model(3, Q, K, V, beta)


def test_global_error_proportional_to_tol(key):
    """Random Q, K, V, beta = 5, N = 40, T = 2; reference RK4 at dt = 1/1024 (error ~1e-12, test_integrate).

    With error-per-step control and local extrapolation the global error is proportional to tol (exponent
    p / (q + 1) = 3 / 3 = 1, Hairer-Norsett-Wanner II.4): the slope of log error against log tol must be 1 (within
    0.2, the band the fixed-step order test uses), and the error may not exceed the sum of the accepted local errors,
    n_accepted * tol. Measured: error / tol = 0.73-0.80 for tol = 1e-3 ... 1e-8."""
    x0 = initial.uniform_sphere(key, 40, 3)
    model = _random_model(jax.random.fold_in(key, 7))
    ref = simulate(x0, model, [2.0], 1 / 1024, scheme="rk4")[0][-1]
    tols = (1e-4, 1e-6, 1e-8)
    errs = []
    for tol in tols:
        xs, _, steps, rejected = simulate_adaptive(x0, model, [1.0, 2.0], tol=tol)
        err = np.max(np.linalg.norm(xs[-1] - ref, axis=-1))
        assert err <= steps[-1] * tol, (tol, err, steps[-1])
        assert np.max(np.abs(np.linalg.norm(xs, axis=-1) - 1)) < 1e-13
        errs.append(err)
    slopes = np.diff(np.log(errs)) / np.diff(np.log(tols))
    assert np.all(np.abs(slopes - 1) < 0.2), slopes


def test_pairing_horizon(key):
    """Two tokens 1.5 rad apart, Q = K = V = Id, beta = 10: they merge at t ~ 570 (the pairing time scale,
    reduced.two_point_merge_time); the adaptive run reaches t = 600 in a few hundred steps where the paper's fixed
    dt = 1e-2 needs 6e4, and follows the exact two-point angle (DOP853, rtol 1e-11) within the sum of the accepted
    local errors, n_accepted * tol (the angle ODE contracts near the merge, so local errors are not amplified);
    measured: error / tol = 1.2 (tol = 1e-6) and 3.1 (tol = 1e-8) for 200-2000 steps."""
    th0, beta = 1.5, 10.0
    x0 = np.array([[1.0, 0.0, 0.0], [np.cos(th0), np.sin(th0), 0.0]])
    model = make_model(3, beta=beta, dense=True)
    times = [10.0, 100.0, 300.0, 600.0]
    exact = reduced.two_point_angle(th0, times, beta)
    assert exact[-1] < 1e-6 < 1.0 < exact[-2]  # the merge happens inside the last segment
    for tol in (1e-6, 1e-8):
        xs, _, steps, _ = simulate_adaptive(x0, model, times, tol=tol)
        cos = np.clip(np.sum(xs[1:, 0] * xs[1:, 1], axis=-1), -1, 1)
        ang = np.arctan2(np.linalg.norm(np.cross(xs[1:, 0], xs[1:, 1]), axis=-1), cos)
        assert np.max(np.abs(ang - exact)) <= steps[-1] * tol, (tol, np.max(np.abs(ang - exact)), steps[-1])
        assert steps[-1] < 600 / 1e-2 / 20


def test_batch_and_bad_input(key):
    """A batch of runs is vmapped, each run with its own step size; bad tol / dt rejected."""
    x0 = np.stack([np.asarray(initial.uniform_sphere(k, 30, 3)) for k in jax.random.split(key, 2)])
    model = make_model(3, beta=3.0)
    xs, _, steps, _ = simulate_adaptive(x0, model, [0.5, 1.0], tol=1e-7)
    assert xs.shape == (3, 2, 30, 3) and steps.shape == (3, 2)
    for r in range(2):
        single = simulate_adaptive(x0[r], model, [0.5, 1.0], tol=1e-7)[0]
        np.testing.assert_allclose(xs[:, r], single, atol=1e-12)
    for kw in ({"tol": 0.0}, {"dt0": -1.0}, {"dt_max": 0.0}):
        with pytest.raises(ValueError):
            simulate_adaptive(x0[0], model, [1.0], **kw)
    with pytest.raises(RuntimeError, match="stalled"):
        simulate_adaptive(x0[0], model, [1.0], tol=1e-7, max_steps=3)
