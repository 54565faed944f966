"""Bayes-optimal state evolution for spiked-SLR (spec 4.3): closed-form limits, the population limit, monotonicity,
and the ordering BO <= ERM (replica, softmax).

Tolerances: fixed points are converged to a residual of 1e-10 on the overlaps, so closed-form checks use 1e-8;
test errors are Monte Carlo means compared within 5 standard errors.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.population import bayes_risk_quad, overlap_risk
from attnlab.duranthon.replica import bayes_optimal_test_error, frozen_samples, solve_bayes_optimal, solve_replica


def test_L1_is_bayes_optimal_linear_regression():
    """L = 1: the location is known and the v-sector is Gaussian linear regression with a N(0, 1) prior, whose BO
    overlap solves q/(1 - q) = alpha/(Delta + 1 - q) (q_hat = alpha/(Delta + 1 - q), q = q_hat/(1 + q_hat)); the
    k-sector has g^k = sqrt(nu) exactly, so q_k = alpha nu/(1 + alpha nu) on any sample set. q_v carries the frozen
    samples' error: 5 SE of the mean over 5 independent sets."""
    alpha, nu, noise = 1.5, 2.0, 0.5
    qv = []
    for seed in range(5):
        s = frozen_samples(jax.random.key(seed), "spiked", nu, 1, 4000, noise)
        r = solve_bayes_optimal(alpha, nu, s, noise_std=noise)
        assert r.converged and r.residual < 1e-10
        assert abs(r.q_k - alpha * nu / (1 + alpha * nu)) < 1e-8
        qv.append(r.q_v)
    # solve q/(1-q) = alpha/(Delta + 1 - q) on (0, 1) by bisection
    lo, hi, D = 0.0, 1.0, noise**2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mid / (1 - mid) < alpha / (D + 1 - mid) else (lo, mid)
    assert abs(np.mean(qv) - lo) <= 5 * np.std(qv, ddof=1) / math.sqrt(len(qv))


def test_noiseless_location_revealed_once_v_is_recovered():
    """Noiseless labels at alpha = 4 (nu = 1, L = 3): v* is recovered (q_v = 1), so the label reveals the location,
    pi is one-hot, q_hat_k = alpha nu and q_k = alpha nu/(1 + alpha nu) exactly."""
    s = frozen_samples(jax.random.key(1), "spiked", 1.0, 3, 2000)
    r = solve_bayes_optimal(4.0, 1.0, s)
    assert r.converged
    assert r.q_v > 1 - 1e-9 and abs(r.q_k - 0.8) < 1e-8


def test_large_alpha_reaches_the_population_bayes_risk_and_error_decreases():
    nu, L, n = 5.0, 2, 200_000
    s = frozen_samples(jax.random.key(2), "spiked", nu, L, 5000, 0.0)
    errs, ses = [], []
    for alpha in (0.5, 1.0, 4.0, 16.0, 1e4):
        r = solve_bayes_optimal(alpha, nu, s)
        assert r.converged
        e, se = bayes_optimal_test_error(jax.random.key(3), nu, L, r.q_k, r.q_v, n)  # common random numbers
        errs.append(e)
        ses.append(se)
    assert all(a > b for a, b in zip(errs, errs[1:])), errs
    assert errs[0] < 1.0
    assert abs(errs[-1] - bayes_risk_quad("spiked", nu, L)) <= 5 * ses[-1]


def test_bayes_optimal_lies_below_the_erm_replica_curve():
    """Softmax ERM (replica, lambda = 1, nu = 5, L = 2) at alpha = 4 has a larger test error than BO (5 SE)."""
    nu, L, alpha = 5.0, 2, 4.0
    bo = solve_bayes_optimal(alpha, nu, frozen_samples(jax.random.key(4), "spiked", nu, L, 5000))
    e_bo, se_bo = bayes_optimal_test_error(jax.random.key(5), nu, L, bo.q_k, bo.q_v, 100_000)
    s = frozen_samples(jax.random.key(6), "spiked", nu, L, 1000)
    r = solve_replica(activation("softmax"), alpha, 1.0, 1.0, s, (math.sqrt(nu), nu, 1.0, 1.0, 1.0, 1.0))
    assert r.converged
    o = r.order
    e, se = overlap_risk(jax.random.key(7), activation("softmax"), "spiked", nu, L, o.m_k, o.q_k, o.m_v, o.q_v,
                         100_000)
    assert e_bo < e - 5 * math.hypot(se, se_bo)


def test_bad_input_rejected():
    s = frozen_samples(jax.random.key(0), "spiked", 1.0, 2, 10)
    with pytest.raises(ValueError):
        solve_bayes_optimal(0.0, 1.0, s)
    with pytest.raises(ValueError):
        solve_bayes_optimal(1.0, -1.0, s)
    with pytest.raises(ValueError):
        bayes_optimal_test_error(jax.random.key(0), 1.0, 2, 1.2, 0.5, 10)
    assert np.isfinite(solve_bayes_optimal(1.0, 1.0, s).q_k)


# ------------------------------------------------------------------------------------------------------------------
# max-SLR at nu = inf


def test_argmax_probabilities_match_monte_carlo():
    """The Gauss-Hermite argmax probabilities of the max-SLR channel against 200,000 direct draws (5 SE), with a
    masked token, for a small and a large channel variance."""
    from attnlab.duranthon.replica import log_argmax_probs

    omega = jnp.asarray([0.3, -0.2, 0.9, 0.0])
    mask = jnp.asarray([True, True, True, False])
    for V in (0.05, 1.3):
        p = np.exp(np.asarray(log_argmax_probs(omega, mask, V)))
        assert p[3] == 0.0 and abs(p.sum() - 1.0) < 1e-12
        t = omega[:3] + math.sqrt(V) * jax.random.normal(jax.random.key(1), (200_000, 3))
        freq = np.bincount(np.asarray(jnp.argmax(t, axis=1)), minlength=3) / 200_000
        se = np.sqrt(freq * (1 - freq) / 200_000)
        assert np.all(np.abs(p[:3] - freq) <= 5 * se + 1e-12), (V, p, freq)


@pytest.mark.slow
def test_max_slr_channel_satisfies_the_nishimori_identity():
    """At Nishimori-consistent overlaps (omega from the teacher fields, V = 1 - q) a proper Bayes channel has
    E[sum_l g_l^2] = -E[sum_l dg_l/domega_l] for each index: a check of the autodiff score g^k of the argmax
    channel and of g^v, within 5 SE on 5,000 frozen samples, L = 3, at two overlap pairs."""
    from attnlab.duranthon.replica.bayes_optimal import _bo_channel_max

    s = frozen_samples(jax.random.key(3), "max", math.inf, 3, 5_000, noise_std=0.3)
    chan = jax.jit(lambda q, s: _bo_channel_max(q, 0.09, s))
    for q in ((0.3, 0.5), (0.8, 0.2)):
        g_k, g_v = chan(jnp.asarray(q), s)
        lhs_k, lhs_v = np.sum(np.asarray(g_k) ** 2, -1), np.sum(np.asarray(g_v) ** 2, -1)
        # divergence of g^k in omega^k and of g^v in omega^v by central differences on the per-sample maps
        h = 1e-5
        q_k, q_v = q

        def channel(dk, dv):
            sh = s._replace(xi_k=s.xi_k + dk / math.sqrt(q_k - q_k**2), xi_v=s.xi_v + dv / math.sqrt(q_v - q_v**2))
            return chan(jnp.asarray(q), sh)

        div_k = sum(np.asarray(channel(h * e, 0.0)[0] - channel(-h * e, 0.0)[0])[:, l] / (2 * h)
                    for l, e in enumerate(np.eye(3)))
        div_v = sum(np.asarray(channel(0.0, h * e)[1] - channel(0.0, -h * e)[1])[:, l] / (2 * h)
                    for l, e in enumerate(np.eye(3)))
        for lhs, div in ((lhs_k, div_k), (lhs_v, div_v)):
            d = lhs + div
            assert abs(d.mean()) <= 5 * d.std(ddof=1) / math.sqrt(d.size), (q, lhs.mean(), -div.mean())


@pytest.mark.slow
def test_max_slr_bayes_optimal_curve_converges_and_falls_towards_zero():
    """max-SLR, nu = inf, L = 3: the fixed points converge and the BO test error falls with alpha towards the
    population Bayes risk 0 (noiseless: the location is the argmax of k*-fields). The ordering BO <= ERM replica is
    a check of duranthon-sample-complexity (setting fig3-max-nuinf). 8000 test draws per alpha: every SE is below
    0.003, and the steps between successive errors (0.1 and more) and the last error's distance to 0.1 (about 0.07)
    are each more than 20 of them."""
    L = 3
    s = frozen_samples(jax.random.key(4), "max", math.inf, L, 4000)
    errs = []
    for alpha in (0.25, 1.0, 4.0, 16.0):
        r = solve_bayes_optimal(alpha, math.inf, s, model="max")
        assert r.converged and r.residual < 1e-10 and 0 < r.q_k < 1 and 0 < r.q_v < 1
        errs.append(bayes_optimal_test_error(jax.random.key(5), math.inf, L, r.q_k, r.q_v, 8000, model="max"))
    means, ses = ([e[i] for e in errs] for i in (0, 1))
    assert max(ses) < 0.003
    assert all(a - b > 20 * max(sa, sb) for a, b, sa, sb in zip(means, means[1:], ses, ses[1:]))
    assert 0.1 - means[-1] > 20 * ses[-1]
    with pytest.raises(ValueError, match="nu = inf"):
        solve_bayes_optimal(1.0, 3.0, s, model="max")


def test_paired_excess_is_the_difference_of_the_two_risks_with_a_far_smaller_se():
    from attnlab.duranthon.population import bayes_risk_mc
    from attnlab.duranthon.replica import bayes_optimal_excess

    nu, L, n, key = 5.0, 2, 20_000, jax.random.key(2)
    q_k, q_v = 8 * nu / (1 + 8 * nu), 1.0
    bo, bo_se = bayes_optimal_test_error(key, nu, L, q_k, q_v, n)
    ex, ex_se = bayes_optimal_excess(key, nu, L, q_k, q_v, n)
    bayes, bayes_se = bayes_risk_mc(jax.random.split(key)[0], "spiked", nu, L, n)  # the same score draws
    assert ex == pytest.approx(bo - bayes, abs=1e-6)
    assert ex > 5 * ex_se and ex_se < 0.5 * math.hypot(bo_se, bayes_se)
    assert bayes_optimal_excess(key, nu, L, 1.0, 1.0, n) == pytest.approx((0.0, 0.0), abs=1e-7)  # q = 1: Bayes
