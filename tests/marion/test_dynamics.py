"""PGD and SGD on the sphere (spec A5, A6): invariants, reduced vs full simulators, the official outcomes (A7)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize as so
import scipy.stats as ss

from attnlab.marion.dynamics import (
    SLRParams,
    distance_to_manifold,
    init_manifold,
    init_sphere,
    overlaps,
    pgd_step_full,
    run_pgd_full,
    run_pgd_reduced,
    sgd_step_full,
    sgd_step_reduced,
    vectors_from_overlaps,
)
from attnlab.marion.risk import Overlaps, oracle_excess_risk, population_excess_risk
from attnlab.slr.data import sample_teacher

G = math.sqrt(0.5)


def _start(key, d, on_manifold=False):
    kt, ki = jax.random.split(key)
    ks, vs = sample_teacher(kt, d)
    k, v = init_manifold(ki, ks, vs) if on_manifold else init_sphere(ki, d)
    return ks, vs, k, v


def test_vectors_from_overlaps_round_trip(key):
    ks, vs, k, v = _start(key, 30)
    o = overlaps(k, v, ks, vs)
    ks2, vs2, k2, v2 = vectors_from_overlaps(jax.random.fold_in(key, 1), o, 30)
    o2 = overlaps(k2, v2, ks2, vs2)
    assert max(abs(float(a - b)) for a, b in zip(o, o2)) < 1e-14
    assert abs(float(k2 @ k2) - 1) < 1e-14 and abs(float(v2 @ v2) - 1) < 1e-14 and abs(float(ks2 @ vs2)) < 1e-14


@pytest.mark.slow
def test_pgd_and_sgd_preserve_unit_norms(key):
    ks, vs, k, v = _start(key, 40)
    pgd_step = jax.jit(pgd_step_full, static_argnums=(7, 8))  # compiled, as the runs' scans call them
    sgd_step = jax.jit(sgd_step_full, static_argnums=(9, 10))
    for _ in range(50):
        k, v = pgd_step(k, v, ks, vs, 0.9, 1e-2, G, 40, 10)
    assert abs(float(k @ k) - 1) < 1e-13 and abs(float(v @ v) - 1) < 1e-13
    for t in range(50):
        k, v, _ = sgd_step(jax.random.fold_in(key, t), k, v, ks, vs, 0.9, 1e-2, G, 0.1, 5, 10)
    assert abs(float(k @ k) - 1) < 1e-13 and abs(float(v @ v) - 1) < 1e-13


def test_manifold_is_invariant_in_float64(key):
    """Started on M, full-vector PGD stays on M to round-off: distance < 1e-10 after 20,000 steps (d = 400)."""
    ks, vs, k, v = _start(key, 400, on_manifold=True)
    p = SLRParams(d=400, L=10, gamma=G, eps=0.0, step_size=4e-3, lambda0=0.1, schedule=False)
    logs, _ = run_pgd_full(k, v, ks, vs, p, 20_000, 1000)
    dist = np.asarray(distance_to_manifold(logs))
    assert dist[0] < 1e-14
    assert dist.max() < 1e-10
    assert abs(float(logs.kappa[-1])) > 0.9  # and it does move: it converges towards the oracle


def test_reduced_pgd_matches_full_vector_pgd(key):
    """Spec A6.1: the 5-overlap recursion agrees with d = 400 vector PGD to 1e-8 over 3,000 steps."""
    for i, (lam0, step_size, schedule) in enumerate([(0.1, 4e-3, False), (1.0, 1e-3, True), (0.9, 1e-3, False)]):
        ks, vs, k, v = _start(jax.random.fold_in(key, i), 400)
        p = SLRParams(d=400, L=10, gamma=G, eps=0.0, step_size=step_size, lambda0=lam0, schedule=schedule)
        full, _ = run_pgd_full(k, v, ks, vs, p, 3000, 100)
        red = run_pgd_reduced(jax.tree.map(lambda x: x[None], overlaps(k, v, ks, vs)), p, 3000, 100).overlaps
        gap = max(float(jnp.max(jnp.abs(a - b[:, 0]))) for a, b in zip(full, red))
        assert gap < 1e-8, (lam0, gap)


def test_edge_of_stability_makes_round_off_decide_the_phase(key):
    """With lambda_t = 1/(1 + 1e-4 t) and step 4e-3, the map has period-2 oscillations in (theta, eta, rho):
    a 1e-13 perturbation of the start changes the full-vector trajectory itself at the 1e-3 level, so agreement
    between simulators can only be asked up to sign and at the end, once the oscillation has died out."""
    ks, vs, k, v = _start(key, 400)
    p = SLRParams(d=400, L=10, gamma=G, eps=0.0, step_size=4e-3, lambda0=1.0, schedule=True)
    full, _ = run_pgd_full(k, v, ks, vs, p, 12_000, 300)
    k_pert = k + 1e-13 * vs
    full_pert, _ = run_pgd_full(k_pert / jnp.linalg.norm(k_pert), v, ks, vs, p, 12_000, 300)
    assert max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(full, full_pert)) > 1e-3
    red = run_pgd_reduced(jax.tree.map(lambda x: x[None], overlaps(k, v, ks, vs)), p, 12_000, 300).overlaps
    final_gap = max(abs(abs(float(a[-1])) - abs(float(b[-1, 0]))) for a, b in zip(full, red))
    assert final_gap < 1e-6


@pytest.mark.slow
def test_reduced_sgd_has_the_law_of_full_vector_sgd(key):
    """The reduced SGD chain is exact in law: after 40 steps from a common start, the overlaps of 1,500 runs of
    each simulator agree in distribution (two-sample KS) and in mean (5 SE)."""
    d, L, lam, step_size, eps, B, n_runs, n_steps = 12, 3, 1.0, 0.05, 0.1, 5, 1500, 40
    ks, vs, k0, v0 = _start(key, d)
    o0 = overlaps(k0, v0, ks, vs)

    def full(key):
        def body(kv, t):
            k, v, _ = sgd_step_full(jax.random.fold_in(key, t), *kv, ks, vs, lam, step_size, G, eps, B, L)
            return (k, v), None
        (k, v), _ = jax.lax.scan(body, (k0, v0), jnp.arange(n_steps))
        return overlaps(k, v, ks, vs)

    def reduced(key):
        def body(o, t):
            return sgd_step_reduced(jax.random.fold_in(key, t), o, lam, step_size, G, eps, B, L, d)[0], None
        return jax.lax.scan(body, o0, jnp.arange(n_steps))[0]

    a = jax.jit(jax.vmap(full))(jax.random.split(jax.random.fold_in(key, 1), n_runs))
    b = jax.jit(jax.vmap(reduced))(jax.random.split(jax.random.fold_in(key, 2), n_runs))
    for name, x, y in zip(Overlaps._fields, a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert np.std(x) > 1e-3  # the runs genuinely spread out
        assert ss.ks_2samp(x, y).pvalue > 1e-3, name
        se = math.sqrt(x.var() / x.size + y.var() / y.size)
        assert abs(x.mean() - y.mean()) < 5 * se, name


def _run_config(lam0, step_size, n_steps, schedule, init, n_repeats=30, seed=0):
    keys = jax.random.split(jax.random.key(seed), n_repeats)
    starts = jax.vmap(lambda k: _start(k, 400, init == "manifold"))(keys)
    o0 = jax.vmap(overlaps)(starts[2], starts[3], starts[0], starts[1])
    p = SLRParams(d=400, L=10, gamma=G, eps=0.0, step_size=step_size, lambda0=lam0, schedule=schedule)
    logs = run_pgd_reduced(o0, p, n_steps, n_steps // 10)
    return jax.tree.map(lambda x: np.asarray(x[-1]), logs)


@pytest.mark.slow
def test_official_outcome_manifold_config():
    """Spec A7 init_manifold (official, float32): final |kappa| 0.9812..0.9835, |nu| = 1.0000, excess risk
    0.11369..0.11372 (oracle 0.11350), kappa nu > 0 always."""
    last = _run_config(0.1, 4e-3, 20_000, False, "manifold")
    k, n = last.overlaps.kappa, last.overlaps.nu
    assert np.all(k * n > 0)
    assert 0.9805 < np.median(np.abs(k)) < 0.9845
    assert np.all(np.abs(np.abs(n) - 1) < 1e-4)
    assert np.all(np.abs(last.excess_risk - 0.11370) < 5e-5)


def test_official_outcome_small_lambda_sphere_config():
    """Spec A7 small-lambda sphere: runs end either at the oracle (excess 0.11370) or at the spurious point
    k = +-v*, |theta| ~ 0.63, rho ~ 0, excess 0.11552; both attractors occur (16/30 split in the official stream)."""
    last = _run_config(0.1, 4e-3, 20_000, False, "sphere")
    o = last.overlaps
    oracle = (np.abs(o.kappa) > 0.9) & (np.abs(o.nu) > 0.9)
    spurious = np.abs(o.eta) > 0.99
    assert np.all(oracle | spurious) and oracle.any() and spurious.any()
    assert np.all(np.abs(last.excess_risk[oracle] - 0.11370) < 5e-5)
    assert np.all(np.abs(last.excess_risk[spurious] - 0.11552) < 5e-5)
    assert np.all(np.abs(np.abs(o.theta[spurious]) - 0.63) < 0.01) and np.all(np.abs(o.rho[spurious]) < 1e-3)


def test_official_outcome_schedule_config():
    """Spec A7 init_sphere_schedule: oracle runs end at excess 0.075014 (oracle at the final lambda, 0.07501),
    spurious ones at 0.0689, below the oracle."""
    last = _run_config(1.0, 4e-3, 120_000, True, "sphere")
    o = last.overlaps
    oracle = np.abs(o.kappa) > 0.999
    assert oracle.mean() > 0.5
    assert np.all(np.abs(last.excess_risk[oracle] - 0.075014) < 5e-6)
    rest = ~oracle
    assert np.all(np.abs(last.excess_risk[rest] - 0.0689) < 5e-4)


@pytest.mark.slow
def test_large_lambda_runs_stall_below_the_oracle_risk():
    """Spec A7 large-lambda: no run reaches the oracle in 120k steps, and some end below the oracle's risk at
    lambda = 0.9 (3.819): the oracle does not minimise R there."""
    last = _run_config(0.9, 1e-3, 120_000, False, "sphere", n_repeats=6)
    assert np.all(np.abs(last.overlaps.kappa) < 0.9)
    oracle = float(oracle_excess_risk(0.9, G, 400, 10))
    assert abs(oracle - 3.81936) < 1e-5
    assert np.min(last.excess_risk) < oracle
    assert np.all((last.excess_risk > 3.75) & (last.excess_risk < 4.05))


def _best_spurious(lam):
    """Spec A7.1: best theta in the family kappa = nu = rho = 0, |eta| = 1."""
    f = lambda th: float(population_excess_risk(Overlaps(0.0, 0.0, th, 1.0, 0.0), lam, G, 400, 10))
    res = so.minimize_scalar(f, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-10})
    return res.fun, res.x


def test_spurious_point_beats_the_oracle_below_lambda_0_09():
    """Spec A7.1 table: oracle vs best spurious risk; crossover near lambda = 0.09."""
    table = [(0.12, 0.1606, 0.1650), (0.10, 0.1135, 0.1155), (0.09, 0.0941, 0.0939), (0.08, 0.0787, 0.0744),
             (1 / (1 + 1e-4 * 119999), 0.0750, 0.0689)]
    for lam, oracle, spurious in table:
        assert abs(float(oracle_excess_risk(lam, G, 400, 10)) - oracle) < 5e-5
        # the spec's minimum came from a search of unstated resolution: ours may only be lower, by < 1 unit of
        # its last digit (we find 0.164949 where it prints 0.1650)
        best = _best_spurious(lam)[0]
        assert spurious - 1e-4 < best < spurious + 5e-5
    assert abs(_best_spurious(1 / (1 + 1e-4 * 119999))[1] - 0.817) < 5e-4
    crossing = so.brentq(lambda lam: _best_spurious(lam)[0] - float(oracle_excess_risk(lam, G, 400, 10)), 0.08, 0.1)
    assert 0.085 < crossing < 0.095


def test_simulators_are_deterministic(key):
    ks, vs, k, v = _start(key, 20)
    o = jax.tree.map(lambda x: x[None], overlaps(k, v, ks, vs))
    p = SLRParams(d=20, L=10, gamma=G, eps=0.0, step_size=4e-3, lambda0=0.5, schedule=False)
    a = run_pgd_reduced(o, p, 100, 10)
    b = run_pgd_reduced(o, p, 100, 10)
    assert all(bool(jnp.all(x == y)) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
