"""Replica fixed point on M (spec 4.2, reconstructed): L = 1 ridge limit, convergence report, bad input.

The frozen Monte Carlo samples make the map deterministic; the fixed point then carries their sampling error.
That error is measured by solving on independent sample sets (seeds) and the tolerance is 5 standard errors of the
mean over seeds (the ridge reference is exact).
"""

import math

import jax
import numpy as np
import pytest

from attnlab.slr.activations import activation
from attnlab.slr.replica import frozen_samples, ridge_fixed_point, solve_replica


def test_L1_reproduces_the_ridge_equations():
    alpha, lam_v, noise = 3.0, 0.5, 0.3
    act = activation("softmax")
    rows = []
    for seed in range(5):
        s = frozen_samples(jax.random.key(seed), "spiked", 2.0, 1, 2000, noise)
        r = solve_replica(act, alpha, 1.0, lam_v, s, (0.0, 0.0, 1.0, 0.5, 0.5, 1.0), n_newton=3)
        assert r.converged and r.residual < 1e-8
        # the k-sector is inert at L = 1: f^k = 0, so m_k = q_k = 0 and V_k = 1/lambda_k
        assert abs(r.order.m_k) < 1e-12 and abs(r.order.q_k) < 1e-12 and abs(r.order.V_k - 1.0) < 1e-12
        rows.append([r.order.m_v, r.order.q_v, r.order.V_v])
    rows = np.array(rows)
    m, q, V = ridge_fixed_point(alpha, lam_v, noise)
    assert abs(rows[:, 2].mean() - V) < 1e-7  # V does not depend on the samples at L = 1
    se = rows.std(axis=0, ddof=1) / math.sqrt(len(rows))
    assert abs(rows[:, 0].mean() - m) <= 5 * se[0]
    assert abs(rows[:, 1].mean() - q) <= 5 * se[1]


def test_bad_input_rejected():
    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 2, 10)
    act = activation("softmax")
    init = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    with pytest.raises(ValueError):
        solve_replica(act, 0.0, 1.0, 1.0, s, init)
    with pytest.raises(ValueError):
        solve_replica(act, 2.0, -1.0, 1.0, s, init)
    with pytest.raises(ValueError):
        frozen_samples(jax.random.key(0), "spiked", -1.0, 2, 10)


def test_implicit_and_unrolled_jacobians_agree():
    """The V_hat integrand by the implicit function theorem equals forward-mode through converged Newton steps."""
    from attnlab.slr.replica import replica_map

    s = frozen_samples(jax.random.key(1), "spiked", 5.0, 2, 300)
    order = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    a, ta = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "implicit")
    b, tb = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "unrolled")
    assert np.max(np.abs(a - b)) < 1e-8 and abs(ta - tb) < 1e-12


def test_large_alpha_reaches_the_population_optimum():
    """alpha -> inf at fixed lambda: the excess over the Bayes risk (= optimal softmax, spec 3.3) shrinks at each
    4x step of alpha (measured 0.021, 0.0066, 0.0011 at alpha = 50, 200, 800) and at alpha = 800 it is within 5 SE
    of the Monte Carlo test-error formula; s_k -> 0 (the population optimum has no orthogonal key component)."""
    from attnlab.slr.population import bayes_risk_quad, overlap_risk

    act = activation("softmax")
    s = frozen_samples(jax.random.key(0), "spiked", 5.0, 2, 1000)
    x, gaps, se = (2.0, 4.0, 0.1, 1.0, 1.0, 0.1), [], 0.0
    for alpha in (50.0, 200.0, 800.0):
        r = solve_replica(act, alpha, 1.0, 1.0, s, x)
        assert r.converged
        x = tuple(r.order)
        e, se = overlap_risk(jax.random.key(5), act, "spiked", 5.0, 2, r.order.m_k, r.order.q_k, r.order.m_v,
                             r.order.q_v, 100_000)
        gaps.append(e - bayes_risk_quad("spiked", 5.0, 2))
    assert gaps[0] > gaps[1] > gaps[2] and abs(gaps[2]) <= 5 * se
    assert r.order.q_k - r.order.m_k**2 < 0.05 * r.order.q_k
