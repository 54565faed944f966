"""Continuation in lambda and alpha, branch tracking, and the rescaled start at a new alpha."""

import math

import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import frozen_samples, solve_replica


@pytest.mark.slow
def test_low_lambda_needs_anderson_and_continuation():
    """nu = 1, L = 3, alpha = 2, lambda = 0.1 (Stein V_hat): plain iteration does not converge there (the map's
    Jacobian has an eigenvalue below -1: -1.7 measured by finite differences at 1000 samples); continuation in lambda
    from 1 with safeguarded Anderson converges to 1e-8 at every step of the path and reports its diagnostics."""
    from attnlab.duranthon.replica import continue_in_lambda, standard_starts

    act = activation("softmax")
    s = frozen_samples(jax.random.key(0), "spiked", 1.0, 3, 512, qmc=True)
    path = continue_in_lambda(act, 2.0, 0.1, 0.1, s, standard_starts("spiked", 1.0)["informed"], per_decade=2,
                              jacobian="stein")
    assert [round(r.lam_k, 6) for r in path] == [1.0, 0.316228, 0.1]
    assert all(r.converged and r.residual < 1e-8 for r in path)
    assert all(r.branch == "" and math.isfinite(r.objective) for r in path)
    plain = solve_replica(act, 2.0, 0.1, 0.1, s, tuple(path[1].order), method="damped", damping=0.0, max_iter=60,
                          jacobian="stein")
    assert not plain.converged


def test_branch_tracking_reports_every_point():
    from attnlab.duranthon.replica import replica_curve, standard_starts

    act = activation("softmax")
    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 2, 300)  # 300 as in the tests above: same programs
    c = replica_curve(act, (1.0, 2.0), 0.3, 0.3, s, standard_starts("spiked", 2.0))
    assert set(c.results) == {"informed", "uninformed"}
    for name, rs in c.results.items():
        assert [r.alpha for r in rs] == [1.0, 2.0]
        assert all(r.branch == name and r.status in ("converged", "max_iter", "invalid", "bad_start",
                                                     "continuation_stopped") for r in rs)
    for i, sel in enumerate(c.selected):
        ok = [c.results[n][i] for n in c.results if c.results[n][i].converged]
        assert ok and c.results[sel][i].objective == min(r.objective for r in ok)


def test_rescaled_start_is_the_map_at_the_new_alpha():
    """F(x; alpha) = prior_update(alpha M(x)) (the hats are alpha times sample means at x): a recorded evaluation
    at alpha = 2 rescaled to alpha = 3.5 equals the map evaluated there, and the rebuilt secant pairs are
    differences of those residuals. Evaluations of another V_hat estimator are not used."""
    from attnlab.duranthon.replica import evaluate_map, prior_update, rescaled_start

    act = activation("softmax")
    s = frozen_samples(jax.random.key(6), "spiked", 2.0, 3, 300)
    xs = [np.array([0.5, 0.6, 1.5, 0.8, 0.9, 1.2]) + 0.05 * k for k in range(3)]
    record = [(x, evaluate_map(act, x, 2.0, 0.3, 0.4, s, multistart=False), 2.0, "implicit") for x in xs]
    record.append((xs[0], evaluate_map(act, xs[0], 2.0, 0.3, 0.4, s, multistart=False, jacobian="stein"), 2.0,
                   "stein"))
    x, v, dX, dG = rescaled_start(record, 3.5, 0.3, 0.4, "implicit")
    direct = [evaluate_map(act, x_, 3.5, 0.3, 0.4, s, multistart=False) for x_ in xs]
    np.testing.assert_array_equal(x, xs[-1])
    np.testing.assert_allclose(v.order, direct[-1].order, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(v.hats, direct[-1].hats, rtol=1e-12, atol=1e-14)
    assert math.isnan(v.at)
    g = [d.order - x_ for d, x_ in zip(direct, xs)]
    assert len(dX) == len(dG) == 2
    for j in range(2):
        np.testing.assert_allclose(dX[j], xs[j + 1] - xs[j])
        np.testing.assert_allclose(dG[j], g[j + 1] - g[j], rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(prior_update(np.full(6, np.nan), 0.3, 0.4), np.full(6, np.nan))
    assert rescaled_start(record[:1], 3.5, 0.3, 0.4, "implicit") is None
