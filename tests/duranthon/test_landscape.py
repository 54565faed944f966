"""The GD-landscape algorithms (attnlab.duranthon.landscape) and the preset duranthon-gd-landscape."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnlab.duranthon.activations import activation
from attnlab.duranthon.data import sample_sequences, sample_teacher_sqrtD
from attnlab.duranthon.erm import fit_erm, fresh_test_error, informed_start, random_start
from attnlab.duranthon.landscape import (
    MINIMUM_CLASSES,
    classify_minima,
    empirical_objective,
    gradient_descent,
    held_out_errors,
    manifold_drift,
    minibatch_sgd,
    overlaps,
)
from attnlab.duranthon.population import vectors_on_manifold
from attnlab.runtime import x64

SOFTMAX = activation("softmax")
D, NU, L = 30, 2.0, 3


@pytest.fixture(scope="module")
def problem():
    with x64():
        kt, kd = jax.random.split(jax.random.PRNGKey(3))
        k_star, v_star = sample_teacher_sqrtD(kt, D)
        b = sample_sequences(kd, k_star, v_star, "spiked", NU, L, 4 * D)
    return k_star, v_star, b


def test_gd_reaches_the_lbfgs_minimiser_from_the_informed_start(problem):
    """Two independent solvers of eq. (15): full-batch GD and L-BFGS from the informed start end at the same point;
    the objective never increases along GD (small step)."""
    k_star, v_star, b = problem
    lam = 1.0
    with x64():
        k0, v0 = informed_start(k_star, v_star, "spiked", NU)
        tr = gradient_descent(SOFTMAX, jnp.concatenate([k0, v0])[None], b.X, b.mask, b.y, lam, 0.5, 4000, 40,
                              k_star, v_star)
        e = fit_erm(SOFTMAX, b.X, b.mask, b.y, lam, lam, k0, v0, gtol=1e-10)
    w = np.concatenate([e.k, e.v])
    assert float(tr.grad_norm[0]) < 1e-8
    assert np.linalg.norm(np.asarray(tr.W[0]) - w) / math.sqrt(2 * D) < 1e-6
    N = b.X.shape[0]
    assert abs(float(tr.objective[-1, 0]) - e.objective / N) < 1e-10
    assert np.all(np.diff(np.asarray(tr.objective[:, 0])) <= 1e-12)
    np.testing.assert_allclose(np.asarray(tr.overlaps[-1, 0]), np.asarray(overlaps(jnp.asarray(w), k_star, v_star)),
                               atol=1e-6)


def test_gd_stops_once_every_run_is_below_stop_tol_near_where_the_unstopped_runs_end(problem):
    """With stop_tol the runs stop early (their last logs repeat the end point, where the unstopped runs still move),
    at most the quadratic model's distance sqrt(D) g / lambda_min(D H) from the minimum (doubled for the cubic terms;
    g the stopped run's gradient norm), which the unstopped runs reach to machine precision."""
    k_star, v_star, b = problem
    lam = 1.0
    with x64():
        W0 = jnp.stack([jnp.concatenate(random_start(jax.random.PRNGKey(i), D)) for i in range(3)])
        args = (SOFTMAX, W0, b.X, b.mask, b.y, lam, 0.5, 4000, 40, k_star, v_star)
        full, stopped = gradient_descent(*args), gradient_descent(*args, 1e-9)
        hess_all = jax.vmap(jax.hessian(empirical_objective, argnums=1), in_axes=(None, 0, None, None, None, None))
        hess = jax.jit(lambda W: hess_all(SOFTMAX, W, b.X, b.mask, b.y, lam))  # one program, not one per primitive
        lam_min = np.linalg.eigvalsh(np.asarray(D * hess(full.W)))[:, 0]
    assert np.all(np.asarray(full.grad_norm) < 1e-13) and np.all(lam_min > 0)
    frozen = np.all(np.asarray(stopped.overlaps) == np.asarray(stopped.overlaps)[-1], axis=(1, 2))
    first = int(np.argmax(frozen))
    assert 0 < first < 40 and frozen[first:].all()
    assert not np.all(np.asarray(full.overlaps)[first] == np.asarray(full.overlaps)[-1])  # the unstopped runs move on
    dist = np.linalg.norm(np.asarray(stopped.W - full.W), axis=-1)
    bound = 2 * math.sqrt(D) * np.asarray(stopped.grad_norm) / lam_min
    assert np.all(dist <= bound) and np.all(dist > 0), (dist, bound)


def test_manifold_drift_is_the_velocity_of_the_cross_overlaps(problem):
    """manifold_drift's means are the time derivatives of (m_kv*, m_vk*, q_kv) under dw/dt = -D grad(loss) on the
    same sequences: finite differences of one small GD step (lambda = 0)."""
    k_star, v_star, b = problem
    with x64():
        k, v = random_start(jax.random.PRNGKey(5), D)
        k, v = jnp.asarray(k), jnp.asarray(v)
        mu, _ = manifold_drift(SOFTMAX, k, v, k_star, v_star, b.X, b.mask, b.y)
        w = jnp.concatenate([k, v])
        g = jax.grad(empirical_objective, argnums=1)(SOFTMAX, w, b.X, b.mask, b.y, 0.0)
        h = 1e-6
        fd = (overlaps(w - h * D * g, k_star, v_star) - overlaps(w + h * D * g, k_star, v_star)) / (2 * h)
    np.testing.assert_allclose(np.asarray(mu), np.asarray(fd[4:]), rtol=1e-6, atol=1e-9)


def test_manifold_drift_vanishes_on_m_and_not_off_it(problem):
    """App. A.2.2: on M the population velocities of the cross overlaps are 0 (fresh sequences, 5 SE); moved off
    M they are not (the control)."""
    k_star, v_star, _ = problem
    with x64():
        k, v = vectors_on_manifold(jax.random.PRNGKey(1), k_star, v_star, 0.4, 0.5, 0.7, 0.8)
        fresh = sample_sequences(jax.random.PRNGKey(2), k_star, v_star, "spiked", NU, L, 20_000)
        mu, se = manifold_drift(SOFTMAX, k, v, k_star, v_star, fresh.X, fresh.mask, fresh.y)
        mu_off, se_off = manifold_drift(SOFTMAX, k + 0.3 * v_star, v + 0.3 * k_star, k_star, v_star, fresh.X,
                                        fresh.mask, fresh.y)
    assert np.all(np.abs(np.asarray(mu)) <= 5 * np.asarray(se))
    assert np.max(np.abs(np.asarray(mu_off)) / np.asarray(se_off)) > 5


def test_classify_minima():
    rng = np.random.default_rng(0)
    a, b2 = rng.normal(size=6), rng.normal(size=6)
    W = np.stack([a, a + 1e-5, b2, b2 - 1e-5, a, rng.normal(size=6)])
    obj = np.array([1.0, 1.0, 0.5, 0.5, 1.0, 2.0])
    grad = np.array([0, 0, 0, 0, 0, 1.0])
    classes, labels = classify_minima(W, obj, grad, informed=4, grad_tol=1e-6, point_tol=1e-3)
    names = [MINIMUM_CLASSES[c] for c in classes]
    assert names == ["informed", "informed", "lower", "lower", "informed", "unconverged"]
    assert labels[0] == labels[1] == labels[4] != labels[2] == labels[3] and labels[5] == -1
    obj2 = obj.copy()
    obj2[2:4] = 1.5
    assert [MINIMUM_CLASSES[c] for c in classify_minima(W, obj2, grad, 4, 1e-6, 1e-3)[0]][2] == "higher"


def test_test_errors_match_fresh_test_error(problem):
    k_star, v_star, _ = problem
    with x64():
        k, v = informed_start(k_star, v_star, "spiked", NU)
        key = jax.random.PRNGKey(9)
        ref, ref_se = fresh_test_error(key, SOFTMAX, k, v, k_star, v_star, "spiked", NU, L, 500, chunk=500)
        t = jax.random.split(key, 1)[0]  # fresh_test_error draws its one chunk with the first split key
        test = sample_sequences(t, k_star, v_star, "spiked", NU, L, 500)
        err, se = held_out_errors(SOFTMAX, jnp.concatenate([k, v])[None], test.X, test.mask, test.y)
    assert float(err[0]) == pytest.approx(ref, rel=1e-12) and float(se[0]) == pytest.approx(ref_se, rel=1e-9)


def test_sgd_is_deterministic_and_lands_in_the_unique_minimum(problem):
    """At a large lambda the landscape has one minimum: SGD from random starts, polished by GD, ends there."""
    k_star, v_star, b = problem
    lam = 1.0
    with x64():
        W0 = jnp.stack([jnp.concatenate(random_start(jax.random.PRNGKey(i), D)) for i in range(3)])
        keys = jax.random.split(jax.random.PRNGKey(0), 3)
        W = minibatch_sgd(SOFTMAX, keys, W0, b.X, b.mask, b.y, lam, 0.05, 2000, 8)
        W_again = minibatch_sgd(SOFTMAX, keys, W0, b.X, b.mask, b.y, lam, 0.05, 2000, 8)
        k0, v0 = informed_start(k_star, v_star, "spiked", NU)
        tr = gradient_descent(SOFTMAX, jnp.concatenate([W, jnp.concatenate([k0, v0])[None]]), b.X, b.mask, b.y, lam,
                              0.5, 4000, 1, k_star, v_star)
    np.testing.assert_array_equal(np.asarray(W), np.asarray(W_again))
    classes, _ = classify_minima(tr.W, tr.objective[-1], tr.grad_norm, 3, 1e-6, 1e-3)
    assert [MINIMUM_CLASSES[c] for c in classes] == ["informed"] * 4


def test_preset_quick_run_shows_a_single_minimum_at_large_lambda_and_several_at_small(quick_run):
    """The quick run's finding: every random start reaches the informed minimum at lambda = 1; at lambda = 0.1 some
    end elsewhere, and the replica fixed point there is RS-unstable."""
    run = quick_run("duranthon-gd-landscape")
    m = run.metrics
    assert m["a2_nu2_lam1_gd_frac_informed"] == 1.0
    assert m["a2_nu2_lam0.1_gd_frac_informed"] < 1.0 and m["a2_nu2_lam0.1_minima_per_set"] > 1
    assert m["a2_nu2_lam0.1_replica_at"] > 1 > m["a2_nu2_lam1_replica_at"]
