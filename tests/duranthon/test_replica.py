"""Replica fixed point on M (spec 4.2, reconstructed): L = 1 ridge limit, convergence report, bad input.

The frozen Monte Carlo samples make the map deterministic; the fixed point then carries their sampling error.
That error is measured by solving on independent sample sets (seeds) and the tolerance is 5 standard errors of the
mean over seeds (the ridge reference is exact).
"""

import math

import jax
import jax.numpy as jnp
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


def test_implicit_and_unrolled_jacobians_agree():
    """The V_hat integrand by the implicit function theorem equals forward-mode through converged Newton steps."""
    from attnlab.duranthon.replica import replica_map

    s = frozen_samples(jax.random.key(1), "spiked", 5.0, 2, 300)
    order = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    a, ta = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "implicit")
    b, tb = replica_map(activation("softmax"), order, 4.0, 1.0, 1.0, s, 30, "unrolled")
    assert np.max(np.abs(a - b)) < 1e-8 and abs(ta - tb) < 1e-12


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


@pytest.mark.slow
def test_proximal_operator_against_brute_force_grid():
    """The multistart proximal point is the global minimiser: at a small-lambda order (V_k = 5, where the problem is
    non-convex for some samples) its value is never above the best value on a 601^2 grid (spacing 0.05) of the
    L = 2 problem, up to the grid's resolution (the value error of a grid point at distance h/sqrt(2) from the
    minimiser is at most |H| h^2/4 with |H| <= 1/V_k + max data-term curvature, bounded here by 10)."""
    import jax.numpy as jnp

    from attnlab.duranthon.replica import _objective, _prox_one

    act = activation("softmax")
    s = frozen_samples(jax.random.key(3), "spiked", 1.0, 2, 100)
    V_k, V_v, m_k, s_k, m_v, s_v = 5.0, 3.0, 0.4, 0.9, 0.9, 0.8
    ok = m_k * s.chi + s_k * s.xi_k
    ov = m_v * s.zeta + s_v * s.xi_v
    g = jnp.linspace(-15, 15, 601)
    grid = jnp.stack(jnp.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    J = jax.vmap(lambda x, a, b, y, m: _objective(act, x, a, b, y, m, V_k, V_v, 0.0), (0, None, None, None, None))
    best = jax.jit(jax.vmap(lambda a, b, y, m: jnp.min(J(grid, a, b, y, m))))(ok, ov, s.y, s.mask)
    for multistart in (True, False):
        chi = jax.jit(jax.vmap(lambda a, b, y, m: _prox_one(act, a, b, y, m, V_k, V_v, 0.0, 30, multistart)))(
            ok, ov, s.y, s.mask)
        val = jax.vmap(lambda x, a, b, y, m: _objective(act, x, a, b, y, m, V_k, V_v, 0.0))(chi, ok, ov, s.y, s.mask)
        excess = np.asarray(val - best)
        if multistart:
            assert excess.max() <= 10 * 0.05**2 / 4
        else:  # one start from omega^k misses the global minimum on some samples: why multistart exists
            assert excess.max() > 10 * 0.05**2 / 4


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


def test_stein_and_pointwise_v_hat_agree_where_the_proximal_problems_are_convex():
    """At lambda = 1 every proximal problem has one minimum, f is smooth, and the Stein (distributional) V_hat equals
    the pointwise (implicit) one: the jump terms are within 5 SE of 0."""
    from attnlab.duranthon.replica import evaluate_map

    s = frozen_samples(jax.random.key(4), "spiked", 1.0, 3, 2000)
    v = evaluate_map(activation("softmax"), (0.15, 0.115, 0.95, 0.44, 0.36, 0.72), 2.0, 1.0, 1.0, s)
    assert v.nonconvex == 0.0 and v.inner_unconverged == 0.0
    assert abs(v.jump_k) <= 5 * v.jump_k_se and abs(v.jump_v) <= 5 * v.jump_v_se


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


def test_at_eigenvalue_is_the_ridge_replicon_at_L1():
    """de Almeida-Thouless (replicon) eigenvalue at L = 1: the k-sector is inert and J^{vv} = -1/(1 + V_v) on every
    sample, so rho(T) = alpha V^2/(1 + V)^2 = (1 - lambda V) V/(1 + V) exactly at the ridge fixed point, which is
    always < 1 (ridge regression is RS-stable)."""
    from attnlab.duranthon.replica import at_eigenvalue

    s = frozen_samples(jax.random.key(0), "spiked", 2.0, 1, 2000, 0.3)  # the ridge test's set: same programs
    for alpha, lam in ((3.0, 0.5), (0.5, 1e-3), (20.0, 1e-3)):
        r = solve_replica(activation("softmax"), alpha, 1.0, lam, s, (0.0, 0.0, 1.0, 0.5, 0.5, 1.0), n_newton=3)
        _, _, V = ridge_fixed_point(alpha, lam, 0.3)
        assert r.converged and abs(r.at - alpha * V**2 / (1 + V) ** 2) < 1e-9
        assert abs(r.at - (1 - lam * V) * V / (1 + V)) < 1e-9 and r.at < 1
    # the operator itself: only the (v, v) block -> V_v^2 P_vvvv; a pure (k, v) cross term acts on dQ_kv alone
    P = np.zeros((2, 2, 2, 2))
    P[1, 1, 1, 1] = 0.7
    assert abs(at_eigenvalue(P, 2.0, 0.5) - 0.25 * 0.7) < 1e-15
    P = np.zeros((2, 2, 2, 2))
    P[0, 1, 0, 1] = 0.3  # <J^{kv}, J^{kv}>: dQ_vv -> dQ_kk
    P[1, 0, 1, 0] = 0.2  # <J^{vk}, J^{vk}>: dQ_kk -> dQ_vv
    assert abs(at_eigenvalue(P, 2.0, 0.5) - math.sqrt(0.3 * 4.0 * 0.2 * 0.25)) < 1e-15


@pytest.mark.timeout(120)
def test_presolve_ends_when_the_activity_test_disagrees_with_the_loop(monkeypatch):
    """The rounds of _presolve stop a pair once its loop takes no step, whatever the separately compiled activity
    test says (its round-off once kept a pair at |grad J| ~ 1e-12 "active" forever: duranthon-low-snr hung at
    lambda = 0.01). Here the activity test is forced to say "active" for every pair: the rounds still end, at the
    same proximal points."""
    import jax.numpy as jnp

    import attnlab.duranthon.replica as R

    s = frozen_samples(jax.random.key(2), "spiked", 5.0, 2, 300)
    order = (1.0, 1.5, 0.5, 0.8, 0.8, 0.5)
    want = R.evaluate_map(activation("softmax"), order, 4.0, 1.0, 1.0, s)
    advance = R._advance_block

    def always_active(*args, **kwargs):
        x, i, moved, active, J, g = advance(*args, **kwargs)
        return x, i, moved, jnp.ones_like(active), J, g

    monkeypatch.setattr(R, "_advance_block", always_active)
    got = R.evaluate_map(activation("softmax"), order, 4.0, 1.0, 1.0, s)
    assert np.array_equal(np.asarray(got.chi), np.asarray(want.chi)) and np.array_equal(got.order, want.order)


@pytest.mark.parametrize("L", [1, 2, 3, 4])
def test_jacobi_eigendecomposition_matches_lapack(L):
    """The fixed-sweep Jacobi of the inner Newton step: eigenpairs of random, repeated-eigenvalue and padded
    (identity block) symmetric matrices to round-off, against jnp.linalg.eigh."""
    from attnlab.duranthon.replica import _sym_eig

    k1, k2, k3 = jax.random.split(jax.random.key(L), 3)
    A = jax.random.normal(k1, (500, L, L))
    A = A + jnp.swapaxes(A, 1, 2)
    Q = jnp.linalg.qr(jax.random.normal(k2, (500, L, L)))[0]
    B = jnp.einsum("nij,nj,nkj->nik", Q, jnp.round(jax.random.normal(k3, (500, L))), Q)  # repeated eigenvalues
    C = A.at[:, -1, :].set(0.0).at[:, :, -1].set(0.0).at[:, -1, -1].set(1.0)  # a padded token
    for M in (A, B, C, 1e-3 * A + 5.0 * jnp.eye(L)):  # nearly equal eigenvalues
        lam, U = jax.jit(jax.vmap(_sym_eig))(M)
        scale = 1.0 + jnp.max(jnp.abs(M))
        np.testing.assert_allclose(jnp.einsum("nij,nj,nkj->nik", U, lam, U), M, atol=1e-13 * scale)
        np.testing.assert_allclose(jnp.einsum("nji,njk->nik", U, U), jnp.broadcast_to(jnp.eye(L), M.shape),
                                   atol=1e-13)
        np.testing.assert_allclose(jnp.sort(lam, -1), jnp.linalg.eigvalsh(M), atol=1e-13 * scale)


def test_known_minima_leave_the_multistart_map_unchanged_and_save_newton_steps(monkeypatch):
    """A multistart evaluation with known minima (the single-start proximal points, as the verification of
    solve_replica passes them): loops that come within SNAP_RADIUS sqrt(V_k) of a known minimum continue from it.
    At a low-alpha fixed point where some proximal problems are non-convex (several local minima), the map value,
    proximal points, non-convexity fraction and tracked samples equal the plain multistart evaluation's to
    round-off, with fewer Newton steps; known minima are refused by the single-start map."""
    import attnlab.duranthon.replica as R

    act = activation("softmax")
    s = frozen_samples(jax.random.key(5), "spiked", 2.0, 3, 400)
    r = solve_replica(act, 0.6, 0.3, 0.3, s, (0.1, 0.1, 3.0, 0.3, 0.4, 3.0))
    assert r.converged
    steps, presolve = [], R._presolve

    def counting(*args, **kwargs):
        ends = presolve(*args, **kwargs)
        steps.append(int(ends.steps.sum()))
        return ends

    monkeypatch.setattr(R, "_presolve", counting)
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
