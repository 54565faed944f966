"""The two-head toy model (Marion et al., App. E.3; :mod:`attnlab.marion.multihead`): the closed-form risk against
Theorem 1, quadrature and Monte Carlo; the reduced chain against the full-vector update (one update and many, in law);
the switches; the classification; the schedule; the preset's quick run.

Statistical comparisons use 5 standard errors; each has a negative control that the same comparison rejects.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp

from attnlab.marion import multihead as mh
from attnlab.marion.multihead_preset import NOTEBOOK_KAPPA, ToyMultiheadConfig, notebook_classes
from attnlab.marion.risk import population_excess_risk as theorem1
from attnlab.registry import all_presets, resolve_config
from attnlab.slr.overlaps import Overlaps

D, L, GAMMA, EPS, B = 80, 10, math.sqrt(0.5), 0.1, 5
risk = jax.jit(mh.population_excess_risk, static_argnames=("d", "L", "J", "H"))
mc = jax.jit(mh.mc_excess_risk, static_argnames=("d", "L", "n", "J", "H", "chunk"))


def _state(seed=3, J=2, H=2):
    """Teachers and heads partly aligned (head h on k*_h, values towards v*_1 + v*_2, some k-v coupling)."""
    ks, vs = mh.sample_teachers(jax.random.key(seed), D, J)
    K, V = mh.init_students(jax.random.key(seed + 1), D, H)
    K = K + 0.9 * ks[:H] + 0.2 * vs[0]
    V = V + 0.6 * jnp.sum(vs, axis=0) + 0.3 * K
    K = K / jnp.linalg.norm(K, axis=-1, keepdims=True)
    V = V / jnp.linalg.norm(V, axis=-1, keepdims=True)
    return ks, vs, K, V


# --- closed form ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.1, 1 / 3, 1.0, 2.0])
def test_one_head_one_direction_is_theorem_1(lam):
    ks, vs, K, V = _state(J=1, H=1)
    G = mh.gram_matrix(ks, vs, K, V)
    o = Overlaps(G[2, 0], G[3, 1], G[3, 0], G[2, 1], G[2, 3])
    ours = float(risk(G, lam, GAMMA, D, L, J=1, H=1))
    assert abs(ours - float(theorem1(o, lam, GAMMA, D, L))) < 1e-12 * max(1.0, abs(ours))


@pytest.mark.parametrize("mu1, mu2, s11, s22, s12", [(0.0, 0.0, 1.0, 1.0, 0.9), (2.5, -1.0, 0.5, 2.0, -0.7),
                                                     (8.0, 7.0, 0.3, 0.3, 0.29), (0.3, 0.1, 4.0, 4.0, 3.99)])
def test_erf_erf_mean_against_quadrature(mu1, mu2, s11, s22, s12):
    """``E[erf(U_1) erf(U_2)]`` by Plackett's identity against a 1-D integral over U_1 of the conditional mean."""
    c = s12 / s11
    s_cond = s22 - s12**2 / s11

    def f(z):
        u1 = mu1 + math.sqrt(s11) * z
        return sp.erf(u1) * sp.erf((mu2 + c * (u1 - mu1)) / math.sqrt(1 + 2 * s_cond)) * math.exp(-z * z / 2)

    ref = si.quad(f, -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=400)[0] / math.sqrt(2 * math.pi)
    assert abs(float(mh.erf_erf_mean(mu1, mu2, s11, s22, s12)) - ref) < 1e-12


@pytest.mark.parametrize("lam", [2.0, 1 / 3])
@pytest.mark.parametrize("shared", [False, True])
def test_two_heads_against_monte_carlo(lam, shared):
    """5 SE of 10^5 sequences in R^d. At lambda = 1/3 (the schedule's end) the other signal-noise law's closed form
    is rejected; at lambda = 2 the noise tokens dominate the risk and the two laws differ by less than 5 SE."""
    ks, vs, K, V = _state()
    G = mh.gram_matrix(ks, vs, K, V)
    rho = 1.0 if shared else 0.0
    m, se = mc(jax.random.key(12), G, lam, GAMMA, EPS, D, L, 100_000, shared)
    ours = float(risk(G, lam, GAMMA, D, L, rho_signal=rho))
    assert abs(ours - float(m)) < 5 * float(se)
    if lam < 1:
        other = float(risk(G, lam, GAMMA, D, L, rho_signal=1.0 - rho))
        assert abs(other - float(m)) > 5 * float(se)


def test_risk_is_nonnegative_and_the_oracle_is_not_the_minimiser_at_one_third():
    """The Bayes risk is eps^2 (excess 0); at lambda = 1/3 the oracle's excess is about 2 (App. E.3 reading), far
    above what SGD reaches (the preset's runs end near 0.05-0.4)."""
    for seed in range(5):
        ks, vs = mh.sample_teachers(jax.random.key(seed), D)
        K, V = mh.init_students(jax.random.key(100 + seed), D)
        for rho in (0.0, 1.0):
            assert float(risk(mh.gram_matrix(ks, vs, K, V), 0.5, GAMMA, D, L, rho_signal=rho)) > 0
        oracle = mh.gram_matrix(ks, vs, ks, vs)
        assert 1.7 < float(risk(oracle, 1 / 3, GAMMA, D, L, rho_signal=1.0)) < 2.4


# --- the reduced chain ----------------------------------------------------------------------------------------------

def _one_update_grams(shared, n=20_000, alpha=0.05, lam=1 / 3):
    ks, vs, K, V = _state()
    G = mh.gram_matrix(ks, vs, K, V)

    def full(k):
        K1, V1, _, dev, _ = mh.sgd_step_full(k, ks, vs, K, V, lam, alpha, GAMMA, EPS, B, L, shared)
        return mh.gram_matrix(ks, vs, K1, V1), dev

    def red(k, oof):
        return mh.sgd_step_reduced(mh.draw_reduced_noise(k, B, L, D), G, lam, alpha, GAMMA, EPS, D, shared,
                                   out_of_frame=oof)[0]

    fk = jax.random.split(jax.random.key(7), n).reshape(10, -1)
    Gf, dev = jax.jit(lambda k: jax.lax.map(jax.vmap(full), k))(fk)
    rk = jax.random.split(jax.random.key(8), n)
    Gr = jax.jit(jax.vmap(lambda k: red(k, True)))(rk)
    Gc = jax.jit(jax.vmap(lambda k: red(k, False)))(rk)
    return np.asarray(Gf).reshape(n, 8, 8), float(jnp.max(dev)), np.asarray(Gr), np.asarray(Gc)


def _max_z(a, b):
    """Largest |z| of the difference of the means of the student rows' Gram entries (independent samples)."""
    a, b = a[:, 4:, :], b[:, 4:, :]
    se = np.sqrt(a.var(0, ddof=1) / a.shape[0] + b.var(0, ddof=1) / b.shape[0])
    z = np.abs(a.mean(0) - b.mean(0)) / np.where(se > 0, se, np.inf)
    return float(np.max(z))


@pytest.mark.parametrize("shared", [False, True])
def test_reduced_update_has_the_law_of_the_full_vector_update(shared):
    """One update from a fixed state at a large step size (so that the out-of-frame part matters): the means of the
    28 student entries of the new Gram matrix agree at 5 SE; without the out-of-frame part they do not. The
    full-vector update keeps the heads on the sphere to round-off."""
    Gf, dev, Gr, Gc = _one_update_grams(shared)
    assert dev < 1e-12
    assert _max_z(Gf, Gr) < 5
    assert _max_z(Gf, Gc) > 5
    assert np.max(np.abs(np.diagonal(Gr, axis1=1, axis2=2) - 1)) < 1e-12


def test_bartlett_factor_has_the_wishart_moments():
    """``B B^T ~ Wishart(d - 8, I_4)``: mean (d - 8) I, Var of the diagonal 2 (d - 8), of the off-diagonal d - 8."""
    n = 20_000
    bart = mh.draw_reduced_noise(jax.random.key(5), B, L, D, n_steps=n).bartlett
    W = np.asarray(jnp.einsum("nij,nkj->nik", bart, bart))
    m = D - 8
    mean, se = W.mean(0), W.std(0, ddof=1) / math.sqrt(n)
    assert np.all(np.abs(mean - m * np.eye(4)) < 5 * se)
    centred = W - mean
    var = np.mean(centred**2, axis=0)
    var_se = np.sqrt((np.mean(centred**4, axis=0) - var**2) / n)  # SE of a sample variance
    target = np.where(np.eye(4, dtype=bool), 2.0 * m, float(m))
    assert np.all(np.abs(var - target) < 5 * var_se)
    assert not np.all(np.abs(var - 2.0 * (m + 8)) < 5 * var_se)  # Wishart(d, I): the wrong degrees of freedom


def _trajectories_full(keys, ks, vs, K, V, lam, alpha, n_steps, shared):
    def one(key):
        def step(kv, t):
            K1, V1, _, dev, _ = mh.sgd_step_full(jax.random.fold_in(key, t), ks, vs, *kv, lam, alpha, GAMMA, EPS, B,
                                                 L, shared)
            return (K1, V1), dev

        (K1, V1), dev = jax.lax.scan(step, (K, V), jnp.arange(n_steps))
        return mh.gram_matrix(ks, vs, K1, V1), jnp.max(dev)

    return jax.jit(jax.vmap(one))(keys)


def _trajectories_reduced(keys, G, lam, alpha, n_steps, shared, oof=True):
    def one(key):
        def step(G, t):
            nz = mh.draw_reduced_noise(jax.random.fold_in(key, t), B, L, D)
            return mh.sgd_step_reduced(nz, G, lam, alpha, GAMMA, EPS, D, shared, out_of_frame=oof)[0], None

        return jax.lax.scan(step, G, jnp.arange(n_steps))[0]

    return jax.jit(jax.vmap(one))(keys)


@pytest.mark.parametrize("shared", [False, True])
def test_reduced_chain_has_the_law_of_full_vector_sgd_over_many_updates(shared):
    """40 runs of 400 updates from one state, in R^d and as the reduced chain: the means of the squares of the student
    entries of the final Gram matrices agree at 5 SE (the largest of 28 |z|; after 400 noisy updates the signs are
    random, the squares are not); the chain without its out-of-frame part does not. The sphere constraint holds after
    every full-vector update."""
    ks, vs, K, V = _state()
    G = mh.gram_matrix(ks, vs, K, V)
    n, steps, alpha, lam = 40, 400, 0.01, 0.5
    Gf, dev = _trajectories_full(jax.random.split(jax.random.key(1), n), ks, vs, K, V, lam, alpha, steps, shared)
    Gr = _trajectories_reduced(jax.random.split(jax.random.key(2), n), G, lam, alpha, steps, shared)
    Gc = _trajectories_reduced(jax.random.split(jax.random.key(2), n), G, lam, alpha, steps, shared, oof=False)
    assert float(jnp.max(dev)) < 1e-12
    assert _max_z(np.asarray(Gf) ** 2, np.asarray(Gr) ** 2) < 5
    assert _max_z(np.asarray(Gf) ** 2, np.asarray(Gc) ** 2) > 5


# --- switches -------------------------------------------------------------------------------------------------------

def test_official_sets_every_switch_unless_given():
    cfg = ToyMultiheadConfig()
    assert (cfg.shared_signal_noise, cfg.notebook_logging, cfg.matching) == (False, False, "best")
    off = ToyMultiheadConfig(official=True)
    assert (off.shared_signal_noise, off.notebook_logging, off.matching) == (True, True, "head1")
    mixed = ToyMultiheadConfig(official=True, matching="best")
    assert (mixed.shared_signal_noise, mixed.matching) == (True, "best")
    assert ToyMultiheadConfig(**off.model_dump()) == off  # a stored config reads back the same
    assert cfg.laws() == ["independent", "shared"] and ToyMultiheadConfig(paired=False).laws() == ["independent"]
    assert ToyMultiheadConfig(paired=False, shared_signal_noise=True).laws() == ["shared"]
    assert cfg.at_notebook_sizes() and not resolve_config(all_presets()["marion-toy-multihead"], quick=True) \
        .at_notebook_sizes()


def test_shared_signal_noise_is_one_draw_for_both_tokens():
    """The notebook's law: X_2 - X_1 = sqrt(d/2) (k*_2 - k*_1) exactly; the corrected law draws z_1, z_2 apart. The
    reduced chain's frame batch does the same."""
    ks, vs, _, _ = _state()
    s = math.sqrt(D / 2)
    for shared in (True, False):
        X, y = mh.sample_d2(jax.random.key(0), ks, vs, 64, L, GAMMA, EPS, shared)
        gap = np.max(np.abs(np.asarray(X[:, 1] - X[:, 0] - s * (ks[1] - ks[0]))))
        assert (gap < 1e-12) == shared
    G = mh.gram_matrix(ks, vs, *_state()[2:])
    F = mh.frame(G)
    nz = mh.draw_reduced_noise(jax.random.key(1), B, L, D)
    for shared in (True, False):
        Z = mh._frame_batch(F, nz.zeta_signal, nz.zeta_noise, GAMMA, D, 2, shared)
        gap = np.max(np.abs(np.asarray(Z[:, 1] - Z[:, 0] - s * (F[2] - F[0]))))
        assert (gap < 1e-12) == shared


def test_logging_offsets():
    """The notebook logs after updates t with (t + 1) mod K = 1 (Steps 1, K + 1, ..., n - K + 1: n / K points, never
    the initial state); the corrected logging is at 0, K, ..., n (n / K + 1 points)."""
    ks, vs, K, V = _state()
    G = jnp.broadcast_to(mh.gram_matrix(ks, vs, K, V), (1, 2, 8, 8))
    keys = jax.random.split(jax.random.key(0), 2)
    p = mh.ToyParams(2.0, 2e-4, 25_000.0, 1e-3, GAMMA, EPS)
    kw = dict(d=D, L=L, batch_size=B, n_steps=50, log_every=10)
    steps_nb, g_nb = mh.run_reduced(G, keys, jnp.array([True]), p, notebook_logging=True, **kw)
    steps_al, g_al = mh.run_reduced(G, keys, jnp.array([True]), p, notebook_logging=False, **kw)
    assert steps_nb.tolist() == [1, 11, 21, 31, 41] and steps_al.tolist() == [0, 10, 20, 30, 40, 50]
    assert np.allclose(g_al[0], G)  # the initial state
    # same draws: the notebook's log at Step 11 is one update past the aligned log at step 10
    assert not np.allclose(g_nb[1], g_al[1])


def test_the_notebook_matched_curves_end_at_0353_and_0341():
    """The notebook's head-1 rule on its printed table: the matched curves' final means (mean and median)."""
    m = mh.matched(NOTEBOOK_KAPPA, mh.match_swap(NOTEBOOK_KAPPA, "head1"))
    assert np.round(m.mean(0), 3).tolist() == [0.353, 0.341]
    assert np.round(np.median(m, 0), 3).tolist() == [0.417, 0.444]


def test_matching_rules():
    """head1 (the notebook) looks at head 1 only; best takes the better of the two assignments."""
    k = np.array([[[0.5, 0.4], [0.9, 0.1]]])
    assert not mh.match_swap(k, "head1")[0] and mh.match_swap(k, "best")[0]
    assert mh.matched(k, mh.match_swap(k, "head1")).tolist() == [[0.5, 0.1]]
    assert mh.matched(k, mh.match_swap(k, "best")).tolist() == [[0.9, 0.4]]


def test_schedule_values():
    """lambda_0 = 2, lambda_5000 = 1, lambda_t = 1/3 from t = 25 000 on (App. E.3's capped schedule)."""
    lam = np.asarray(mh.lambda_capped(np.array([0, 5000, 25_000, 60_000, 99_999]), 2.0, 2e-4, 25_000))
    assert np.allclose(lam, [2.0, 1.0, 1 / 3, 1 / 3, 1 / 3], rtol=0, atol=1e-15)


# --- classification -------------------------------------------------------------------------------------------------

def test_the_notebook_table_splits_5_10_1_4():
    code, heads = notebook_classes(ToyMultiheadConfig())
    assert np.bincount(code, minlength=4).tolist() == [5, 10, 1, 4]
    runs = lambda c: (np.flatnonzero(code == c) + 1).tolist()  # noqa: E731  (the table's 1-based run numbers)
    assert runs(0) == [1, 3, 13, 18, 20] and runs(2) == [12] and runs(3) == [5, 9, 16, 19]
    coll = np.flatnonzero(code == 1)
    assert (heads[coll, 0] == heads[coll, 1]).all() and np.bincount(heads[coll, 0]).tolist() == [5, 5]


def test_classes_of_constructed_runs_and_of_a_permuted_run():
    spec = [[0.5, 0.05], [0.06, 0.48]]
    coll = [[0.75, 0.02], [0.74, 0.05]]
    mixed = [[0.40, 0.30], [0.10, 0.45]]
    failed = [[0.10, 0.12], [0.05, 0.02]]
    one = [[0.6, 0.02], [0.1, 0.12]]  # one head aligned, the other not: mixed
    code, heads = mh.classify(np.array([spec, coll, mixed, failed, one]))
    assert code.tolist() == [0, 1, 2, 3, 2]
    assert heads.tolist() == [[0, 1], [0, 0], [-1, 1], [-1, -1], [0, -1]]
    perm = np.array([spec, coll])
    perm[:, 1] = perm[:, 1, ::-1]  # head 2's directions swapped
    assert mh.classify(perm)[0].tolist() == [1, 0]
    assert mh.classify(NOTEBOOK_KAPPA[:1], threshold=0.6)[0].tolist() == [3]  # the threshold is a parameter


# --- the preset -----------------------------------------------------------------------------------------------------

def test_quick_run_passes_its_checks_and_shows_the_heads(quick_run):
    run = quick_run("marion-toy-multihead")
    assert run.checks and all(c.passed and c.control_rejected for c in run.checks), [
        (c.name, c.status, c.control_rejected) for c in run.checks]
    m = run.metrics
    # the notebook's shared noise: heads specialise to the two tokens or collapse on one
    assert m["shared_specialised"] + m["shared_collapsed"] >= 2
    # shared noise balances each head's value between v*_1 and v*_2; independent noises do not
    assert abs(m["shared_value_balance_mean"]) < 0.1 < m["independent_value_balance_mean"]
    assert "independent" in run.finding and "shared" in run.finding
    ds = run.data
    assert ds.sizes["noise"] == 2 and ds.step.values[0] == 0 and ds.step.values[-1] == run.config.n_steps
    g = ds.gram.values
    assert np.max(np.abs(np.diagonal(g, axis1=-2, axis2=-1) - 1)) < 1e-12
    assert np.allclose(g[..., :4, :4], g[:, :1, :, :4, :4], atol=0)  # the teachers never move


def test_official_quick_run_logs_like_the_notebook():
    p = all_presets()["marion-toy-multihead"]
    cfg = resolve_config(p, quick=True, overrides={"official": True, "n_repeats": 2, "n_steps": 2000,
                                                   "log_every": 500, "schedule_cap": 1000})
    ds = p.run(cfg, jax.random.key(0))
    assert ds.step.values.tolist() == [1, 501, 1001, 1501]
    assert ds.attrs["primary_noise"] == "shared" and ds.attrs["matching"] == "head1"
    metrics, checks = p.summarize(ds, cfg)
    assert all(c.evaluated for c in checks)
    assert not any(c.name.startswith("notebook table") for c in checks)  # not the notebook's sizes
