"""Replica fixed point on M: L = 1 ridge limit, convergence report, bad input, solver options.

The frozen Monte Carlo samples make the map deterministic; the fixed point then carries their sampling error.
That error is measured by solving on independent sample sets (seeds) and the tolerance is 5 standard errors of the
mean over seeds (the ridge reference is exact).
"""

import math

import jax
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.replica import frozen_samples, ridge_fixed_point, solve_replica


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


def _large_alpha_gaps(name, x0, target):
    """Spiked nu = 5, L = 2, lambda = 1: replica fixed points continued along alpha = 50, 200, 800; returns the test
    error (Monte Carlo formula, 1e5 samples) minus ``target`` at each, the SE of the last, and the last solution."""
    from attnlab.duranthon.population import overlap_risk

    act = activation(name)
    s = frozen_samples(jax.random.key(0), "spiked", 5.0, 2, 1000)
    x, gaps, se = x0, [], 0.0
    for alpha in (50.0, 200.0, 800.0):
        r = solve_replica(act, alpha, 1.0, 1.0, s, x)
        assert r.converged
        x = tuple(r.order)
        e, se = overlap_risk(jax.random.key(5), act, "spiked", 5.0, 2, r.order.m_k, r.order.q_k, r.order.m_v,
                             r.order.q_v, 100_000)
        gaps.append(e - target)
    return gaps, se, r


def test_large_alpha_reaches_the_population_optimum():
    """alpha -> inf at fixed lambda: the excess over the Bayes risk (= optimal softmax, spec 3.3) shrinks at each
    4x step of alpha (measured 0.021, 0.0066, 0.0011 at alpha = 50, 200, 800) and at alpha = 800 it is within 5 SE
    of the Monte Carlo test-error formula; s_k -> 0 (the population optimum has no orthogonal key component)."""
    from attnlab.duranthon.population import bayes_risk_quad

    gaps, se, r = _large_alpha_gaps("softmax", (2.0, 4.0, 0.1, 1.0, 1.0, 0.1), bayes_risk_quad("spiked", 5.0, 2))
    assert gaps[0] > gaps[1] > gaps[2] and abs(gaps[2]) <= 5 * se
    assert r.order.q_k - r.order.m_k**2 < 0.05 * r.order.q_k


def test_anderson_and_damped_reach_the_same_fixed_point():
    act = activation("softmax")
    s = frozen_samples(jax.random.key(2), "spiked", 5.0, 2, 300)
    init = (math.sqrt(5.0), 5.0, 1.0, 1.0, 1.0, 1.0)
    a = solve_replica(act, 4.0, 1.0, 1.0, s, init, tol=1e-10)
    d = solve_replica(act, 4.0, 1.0, 1.0, s, init, method="damped", damping=0.5, tol=1e-10, max_iter=1000)
    assert a.converged and d.converged and a.status == "converged"
    # both stop within 1e-10 of the map's fixed point; the map's Lipschitz constant is below 2 there
    assert np.max(np.abs(np.asarray(a.order) - np.asarray(d.order))) < 1e-8
    assert a.n_iter < d.n_iter


def test_solver_options_validated():
    from attnlab.duranthon.replica import lambda_path

    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 2, 10)
    act, init = activation("softmax"), (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    for bad in ({"method": "newton"}, {"memory": 0}, {"multistart": "sometimes"}, {"damping": 1.0}):
        with pytest.raises(ValueError):
            solve_replica(act, 2.0, 1.0, 1.0, s, init, **bad)
    with pytest.raises(ValueError):
        solve_replica(act, 2.0, 1.0, 1.0, s, (1.0, 1.5, -0.5, 0.8, 0.8, 0.5))
    with pytest.raises(ValueError):
        lambda_path(-1.0)
    p = lambda_path(0.01, 1.0, 2)
    assert len(p) == 5 and p[0] == 1.0 and p[-1] == 0.01 and all(a > b for a, b in zip(p, p[1:]))


@pytest.mark.slow
def test_variants_linear_attention_reaches_its_closed_form_and_max_slr_variable_L_converges():
    """The same solver for the other members of the family: linear attention 1 + chi at alpha -> inf approaches the
    population optimum L(L-1)/(L^2 + nu(L-1)) (spec 3.4; measured excess 0.013, 0.0027, 0.0005 at alpha = 50, 200,
    800), within 5 SE at alpha = 800; max-SLR at nu = inf with L ~ U{1,2,3} (masks) converges from the informed
    start."""
    from attnlab.duranthon.population import linear_spiked_fixed_L
    from attnlab.duranthon.replica import standard_starts

    gaps, se, _ = _large_alpha_gaps("linear", (1.0, 1.0, 0.1, 1.0, 1.0, 0.1), linear_spiked_fixed_L(5.0, 2))
    assert gaps[0] > gaps[1] > gaps[2] and abs(gaps[2]) <= 5 * se
    s = frozen_samples(jax.random.key(0), "max", math.inf, (1, 2, 3), 500)
    r = solve_replica(activation("softmax"), 2.0, 1.0, 1.0, s,
                      standard_starts("max", math.inf, informed_scale=5.0)["informed"])
    assert r.converged and r.residual < 1e-8


def test_auto_switches_to_stein_where_the_implicit_iteration_stalls():
    """nu = 2, L = 3, lambda = 0.3, alpha = 1.0726 on this frozen set: one sample sits near a fold of its proximal
    map. With the inner problem started cold at omega^k on every evaluation, that sample's proximal point jumps
    between two local minima from one iterate to the next, and the pointwise iteration fails (status not
    "converged"); the default jacobian="auto" falls back to the bounded Stein integrand and converges, and says so.
    With warm starts (the default) the sample stays in one minimum and the implicit iteration converges."""
    act = activation("softmax")
    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 3, 1000)
    x = (0.1787, 0.2269, 3.1185, 0.4419, 0.5578, 2.5264)
    alpha = float(np.geomspace(0.5, 20.0, 30)[6])
    kw = {"multistart": False, "warm_start": False}
    imp = solve_replica(act, alpha, 0.3, 0.3, s, x, jacobian="implicit", max_iter=100, **kw)
    assert not imp.converged
    auto = solve_replica(act, alpha, 0.3, 0.3, s, x, **kw)
    assert auto.converged and auto.jacobian == "stein" and auto.residual < 1e-8
    warm = solve_replica(act, alpha, 0.3, 0.3, s, x, multistart=False, jacobian="implicit", max_iter=100)
    assert warm.converged and warm.residual < 1e-8 and warm.n_iter < 30
