"""The transformer experiments T2 and T3 (Marion et al., App. E.3; :mod:`attnlab.marion.transformer`): the forward
pass against a plain NumPy reference of the notebook's full computation, the gradient against central differences,
the notebook's random numbers (its printed first rows of T2), the switches, the LayerNorm floor against the risk of
the predictor that attains it, the checks and their controls on the quick runs, determinism.

Statistical comparisons use 5 standard errors; each has a negative control that the same comparison rejects.
"""

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate as si
import scipy.special as sp
import xarray as xr

from attnlab import runtime
from attnlab.marion import transformer as tf
from attnlab.marion import transformer_preset as tp
from attnlab.marion import transformer_summary as ts
from attnlab.registry import all_presets, resolve_config

GAMMA, EPS = math.sqrt(0.5), 0.1


@pytest.fixture(autouse=True)
def _x64():
    with runtime.x64():
        yield


def _sizes(H=2, d=8, p=4, m=6, L=4, J=2):
    return tf.Sizes(d=d, L=L, J=J, H=H, p=p, m=m, output_matrix=H > 1, batch_size=5, n_test=50)


def _random_state(sz, seed=0):
    """Parameters with every tensor non-zero (biases and W_K included), a register, teachers and a batch."""
    arm = tf.Arm(jnp.array(False), jnp.array(False), jnp.array(False))
    params, r = tf.init_params(jax.random.key(seed), sz, arm)
    keys = jax.random.split(jax.random.key(seed + 1), 3)
    params = params._replace(b1=0.3 * jax.random.normal(keys[0], params.b1.shape),
                             b2=0.3 * jax.random.normal(keys[1], params.b2.shape),
                             theta=jax.random.normal(keys[2], params.theta.shape) / math.sqrt(sz.d))
    ks, vs = tf.sample_teachers(jax.random.key(seed + 2), sz.d, sz.J)
    X, y = tf.sample_tokens(jax.random.key(seed + 3), ks, vs, 5, sz.L, GAMMA, EPS, False)
    return params, r, ks, vs, X, y


def _numpy_forward(params, r, X, row=0, rows_override=None):
    """The notebook's computation in NumPy: every row, ``A`` of rows ``1..L`` optionally replaced."""
    P = {k: None if v is None else np.asarray(v) for k, v in params._asdict().items()}
    X = np.asarray(X)
    B, L, d = X.shape
    Z = np.concatenate([np.broadcast_to(np.asarray(r), (B, 1, d)), X], axis=1)
    mu = Z.mean(-1, keepdims=True)
    N = (Z - mu) / (Z.std(-1, keepdims=True) + 1e-5)
    H, p, _ = P["W_Q"].shape
    outs = []
    for a in range(H):
        S = N @ P["W_Q"][a].T @ P["W_K"][a] @ np.swapaxes(N, 1, 2) / math.sqrt(p)
        A = np.exp(S - S.max(-1, keepdims=True))
        A /= A.sum(-1, keepdims=True)
        if rows_override is not None:
            A[:, 1:] = rows_override
        outs.append(A @ N @ P["W_V"][a])
    O = np.concatenate(outs, axis=-1)
    Hm = Z + (O if P["W_O"] is None else O @ P["W_O"])
    F = Hm + np.maximum(Hm @ P["W1"].T + P["b1"], 0.0) @ P["W2"].T + P["b2"]
    return F[:, row] @ P["theta"]


# --- forward pass and gradient --------------------------------------------------------------------------------------

@pytest.mark.parametrize("H, p", [(1, 8), (2, 4)])
def test_forward_pass_against_numpy(H, p):
    """The register-row forward pass and the full computation against NumPy (float64 round-off); the readout does
    not depend on rows 1..L of the attention (replaced by arbitrary stochastic rows); row 1 is another output."""
    sz = _sizes(H=H, p=p)
    params, r, _, _, X, _ = _random_state(sz)
    ref = _numpy_forward(params, r, X)
    predict, predict_full = jax.jit(tf.predict), jax.jit(tf.predict_full, static_argnames="row")  # as training does
    assert np.max(np.abs(np.asarray(predict(params, r, X)) - ref)) < 1e-12
    assert np.max(np.abs(np.asarray(predict_full(params, r, X)) - ref)) < 1e-12
    other = np.random.default_rng(0).dirichlet(np.ones(sz.L + 1), size=(X.shape[0], sz.L))
    assert np.max(np.abs(_numpy_forward(params, r, X, rows_override=other) - ref)) < 1e-12
    assert np.max(np.abs(np.asarray(predict_full(params, r, X, row=1)) - ref)) > 1e-3
    perm = np.asarray(predict(params, r, X[:, ::-1]))
    assert np.max(np.abs(perm - ref)) < 1e-12


def test_layer_norm_is_population_std_plus_1e5():
    z = jnp.array([[1.0, 2.0, 4.0, 9.0]])
    ref = (np.asarray(z) - 4.0) / (np.sqrt(np.mean((np.asarray(z) - 4.0) ** 2)) + 1e-5)
    assert np.allclose(tf.layer_norm(z), ref, rtol=0, atol=1e-15)


@pytest.mark.parametrize("H, p", [(1, 8), (2, 4)])
def test_gradient_against_central_differences(H, p):
    """<grad L, delta> against (L(w + h delta) - L(w - h delta)) / 2h along random directions of every tensor
    (truncation O(h^2) ~ 1e-10 at h = 1e-5, round-off ~ 1e-11)."""
    sz = _sizes(H=H, p=p)
    params, r, _, _, X, y = _random_state(sz, seed=4)
    loss = jax.jit(lambda w: tf.batch_loss(w, r, X, y))
    grad = jax.jit(jax.grad(tf.batch_loss))(params, r, X, y)
    leaves, tree = jax.tree.flatten(params)
    for i in range(3):
        keys = jax.random.split(jax.random.key(10 + i), len(leaves))
        delta = jax.tree.unflatten(tree, [jax.random.normal(k, x.shape) for k, x in zip(keys, leaves, strict=True)])
        h = 1e-5
        up = jax.tree.map(lambda w, e: w + h * e, params, delta)
        down = jax.tree.map(lambda w, e: w - h * e, params, delta)
        fd = (float(loss(up)) - float(loss(down))) / (2 * h)
        exact = float(sum(jnp.sum(g * e) for g, e in zip(jax.tree.leaves(grad), jax.tree.leaves(delta), strict=True)))
        assert abs(fd - exact) < 1e-7 * max(1.0, abs(exact)), (fd, exact)


def test_the_register_is_frozen_and_sgd_is_plain():
    sz = _sizes()
    params, r, _, _, X, y = _random_state(sz)
    new, loss = tf.sgd_step(params, r, X, y, 0.01)
    grad = jax.grad(tf.batch_loss)(params, r, X, y)
    for w, g, w1 in zip(jax.tree.leaves(params), jax.tree.leaves(grad), jax.tree.leaves(new), strict=True):
        assert np.allclose(w1, w - 0.01 * g, rtol=0, atol=1e-15)
    assert float(loss) == pytest.approx(float(tf.batch_loss(params, r, X, y)), abs=1e-14)


# --- the notebook's random numbers and constructions -----------------------------------------------------------------

def _notebook_t2(n_steps):
    """Run 1 of the single-head notebook (seed 0, 20 runs, its key tree) for ``n_steps`` updates, logged every 100."""
    cfg = tp.SingleHeadConfig(official=True)
    sz = cfg.sizes()
    arms = tf.Arm(jnp.array([True]), jnp.array([False]), jnp.array([False]))
    with jax.threefry_partitionable(False):
        params, runs, step_keys, _ = tp._initial(jax.random.split(jax.random.key(0), 20), arms, sz, 8000)
        one = jax.tree.map(lambda x: x[:, :1], params)
        runs = jax.tree.map(lambda x: x[:1], runs)
        return tf.train(one, runs, step_keys[:1, :n_steps], arms, sz, gamma=cfg.gamma, eps=cfg.eps,
                        step_size=cfg.step_size, n_steps=n_steps, log_every=100, notebook_logging=False)


def test_notebook_keys_reproduce_the_printed_first_rows_of_t2():
    """The single-head notebook's run 1, steps 0-400 (its printed table): excess risk, |e_1 . k*| (step 0: |k*[0]|,
    the SVD's identity basis at W_K = 0) and cos(w, v*), to the preset's faithful-rows bound; the rank-1 ratio is NaN
    at step 0 and 1 after. The rows one log later are rejected."""
    steps, logs, _ = _notebook_t2(400)
    ref = tp.NOTEBOOK_T2["first_rows"]
    assert steps.tolist() == list(ref["step"])
    ours = {"excess_risk": logs["test_excess_risk"][:, 0, 0], "kappa": logs["kappa_notebook"][:, 0, 0, 0, 0],
            "nu": logs["nu_notebook"][:, 0, 0, 0, 0]}
    for q, o in ours.items():
        o = np.asarray(o)
        assert np.max(np.abs(o - np.asarray(ref[q]))) < tp.FAITHFUL_ROWS_TOLERANCE, q
        assert np.max(np.abs(o[:-1] - np.asarray(ref[q])[1:])) > tp.FAITHFUL_ROWS_TOLERANCE, q
    ratio = np.asarray(logs["rank1_ratio"])[:, 0, 0, 0]
    assert np.isnan(ratio[0]) and np.all(np.abs(ratio[1:] - 1.0) < 1e-12)
    assert np.isnan(np.asarray(logs["kappa_exact"])[0]).all()


def test_notebook_keys_give_the_t3_teachers():
    """k*_1 . k*_2 of the multi-head notebook's runs 1 and 10: 0.203 and -0.126 (seed 0, 10 runs)."""
    sz = tp.MultiHeadConfig(official=True).sizes()
    arms = tf.Arm(*(jnp.array([True]),) * 3)
    with jax.threefry_partitionable(False):
        _, runs, _, _ = tp._initial(jax.random.split(jax.random.key(0), 10), arms, sz, 2)
    overlap = np.asarray(jnp.sum(runs.k_star[:, 0] * runs.k_star[:, 1], axis=-1))
    assert np.round(overlap[[0, 9]], 3).tolist() == [0.203, -0.126]


@partial(jax.jit, static_argnames=("L", "n"))
def _sgd_steps(params, r, ks, vs, L: int, n: int = 20):
    def step(p, k):
        X, y = tf.sample_tokens(k, ks, vs, 16, L, GAMMA, EPS, False)
        return tf.sgd_step(p, r, X, y, 0.05)[0], None

    return jax.lax.scan(step, params, jax.random.split(jax.random.key(100), n))[0]


def test_zero_key_init_makes_M_rank_one_and_kappa_the_register_direction():
    """With W_K = 0, after SGD updates M = W_Q^T W_K has s_2/s_1 at round-off and the top right singular vector of
    W_K is +-q/|q|; with a Gaussian W_K neither holds."""
    sz = _sizes(H=2, d=8, p=4)
    ks, vs = tf.sample_teachers(jax.random.key(1), sz.d, sz.J)
    for zero in (True, False):
        arm = tf.Arm(jnp.array(zero), jnp.array(False), jnp.array(False))
        params, r = tf.init_params(jax.random.key(0), sz, arm)
        assert (float(jnp.max(jnp.abs(params.W_K))) == 0.0) == zero
        params = _sgd_steps(params, r, ks, vs, sz.L)
        X, y = tf.sample_tokens(jax.random.key(7), ks, vs, 64, sz.L, GAMMA, EPS, False)
        dg = jax.jit(tf.diagnostics)(params, r, ks, vs, X, y, EPS)  # compiled, as the training logs it
        same = np.max(np.abs(np.asarray(dg["kappa_notebook"]) - np.abs(np.asarray(dg["kappa_exact"]))))
        assert (float(jnp.max(dg["s2_over_s1"])) < 1e-12) == zero
        assert (same < 1e-10) == zero


def test_coupled_output_init_is_w_v_flattened():
    """The notebook draws W_O with W_V's key: W_O = sqrt((1/d) / (2/(p+d))) flat(W_V); otherwise independent."""
    sz = _sizes(H=2, d=8, p=4)
    c = math.sqrt((1 / 8) / (2 / 12))
    for coupled in (True, False):
        arm = tf.Arm(jnp.array(True), jnp.array(coupled), jnp.array(False))
        params, _ = tf.init_params(jax.random.key(3), sz, arm)
        gap = float(jnp.max(jnp.abs(params.W_O - c * params.W_V.reshape(8, 8))))
        assert (gap < 1e-15) == coupled


def test_shared_signal_noise_is_one_draw_for_both_tokens():
    """X_2 - X_1 = sqrt(d/2) (k*_2 - k*_1) exactly under the notebook's shared z, not with independent z_j; z_1,
    the noise tokens and the labels' noise are the same draws under both laws."""
    ks, vs = tf.sample_teachers(jax.random.key(1), 8, 2)
    out = {}
    for shared in (True, False):
        X, y = tf.sample_tokens(jax.random.key(0), ks, vs, 32, 5, GAMMA, EPS, shared)
        gap = float(jnp.max(jnp.abs(X[:, 1] - X[:, 0] - 2.0 * (ks[1] - ks[0]))))
        assert (gap < 1e-12) == shared
        out[shared] = X
    assert np.array_equal(out[True][:, [0, 2, 3, 4]], out[False][:, [0, 2, 3, 4]])


def _tiny_train(seed, notebook_logging):
    sz = _sizes(H=2)
    arms = tf.Arm(jnp.array([True, False]), jnp.array([True, False]), jnp.array([True, False]))
    params, runs, keys, _ = tp._initial(jax.random.split(jax.random.key(seed), 2), arms, sz, 30)
    return tf.train(params, runs, keys, arms, sz, gamma=GAMMA, eps=EPS, step_size=0.01, n_steps=30, log_every=10,
                    notebook_logging=notebook_logging)


def test_notebook_logging_offsets_and_determinism():
    """The multi-head notebook logs after updates t with (t + 1) mod K = 1 (Steps 1, K + 1, ...; never the initial
    state); the corrected logging is at 0, K, ..., n (n/K + 1 points), from the same draws: the trained parameters
    agree to round-off (the two loggings are two compiled programs, which XLA may fuse differently: with one thread
    they differ by an ulp; bound: an ulp of the largest parameter per update), while another key moves them beyond
    it. The same key gives the same numbers to the bit, another key others."""
    s_al, l_al, p_al = _tiny_train(3, False)
    s_nb, l_nb, p_nb = _tiny_train(3, True)
    assert s_nb.tolist() == [1, 11, 21] and s_al.tolist() == [0, 10, 20, 30]
    ratio_al, ratio_nb = np.asarray(l_al["rank1_ratio"]), np.asarray(l_nb["rank1_ratio"])
    assert np.isnan(ratio_al[0, 0]).all() and not np.isnan(ratio_al[0, 1]).any() and not np.isnan(ratio_nb).any()
    def gap(p, q):
        return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                   for a, b in zip(jax.tree.leaves(p), jax.tree.leaves(q), strict=True))

    # round-off of 30 updates: an ulp of the largest parameter per update
    scale = max(float(np.max(np.abs(np.asarray(a)))) for a in jax.tree.leaves(p_al))
    round_off = 30 * np.finfo(np.float64).eps * scale
    assert gap(p_nb, p_al) <= round_off
    again, (_, other, p_other) = _tiny_train(3, False)[1], _tiny_train(4, False)
    assert gap(p_other, p_al) > round_off  # the control: other draws
    assert all(np.array_equal(a, b, equal_nan=True)
               for a, b in zip(jax.tree.leaves(l_al), jax.tree.leaves(again), strict=True))
    assert not np.array_equal(l_al["test_excess_risk"], other["test_excess_risk"])


def test_official_sets_every_switch_unless_given():
    for cls in (tp.SingleHeadConfig, tp.MultiHeadConfig):
        cfg, off = cls(), cls(official=True)
        for k, v in cls.SWITCHES.items():
            assert getattr(off, k) == v and getattr(cfg, k) != v, (cls.__name__, k)
        assert cls(official=True, zero_key_init=False).zero_key_init is False
        assert cls(**off.model_dump()) == off
        assert [m for m, _ in cfg.models()] == ["corrected", "notebook"]
        assert [m for m, _ in off.models()] == ["notebook", "corrected"]
        assert [m for m, _ in cls(paired=False).models()] == ["corrected"]
        assert cfg.at_notebook_sizes() and not resolve_config(
            all_presets()[f"marion-transformer-{'single-head' if cls.N_HEADS == 1 else 'multihead'}"],
            quick=True).at_notebook_sizes()
    assert [m for m, _ in tp.MultiHeadConfig(shared_signal_noise=True).models()] == ["custom", "notebook"]
    with pytest.raises(ValueError):
        tp.MultiHeadConfig(d=81)


def test_alignment_switch_picks_the_measure(quick_run):
    run = quick_run("marion-transformer-single-head")
    for which in ("exact", "notebook"):
        cfg = run.config.model_copy(update={"alignment": which})
        kappa, nu = ts.headline(run.data, cfg)
        assert kappa.name == f"kappa_{which}" and nu.name == f"nu_{which}"


# --- the LayerNorm floor ---------------------------------------------------------------------------------------------

def test_radius_variance_against_chi_and_quadrature():
    """t = 0: R = gamma chi_{d-1}, Var = gamma^2 (d - 1 - 2 (Gamma(d/2) / Gamma((d-1)/2))^2); t != 0 against an
    adaptive quadrature."""
    d = 80
    exact = GAMMA**2 * (d - 1 - 2 * math.exp(2 * (sp.gammaln(d / 2) - sp.gammaln((d - 1) / 2))))
    assert abs(float(tf.radius_variance(0.0, d, GAMMA)) - exact) < 1e-10
    for t in (-3.0, 2.0, 7.0):
        logf = lambda R, t=t: (d - 2) * math.log(R) - (R * R - 2 * R * t) / (2 * GAMMA**2)  # noqa: E731
        c = max(logf(R) for R in np.linspace(0.1, 30, 3000))
        mom = [si.quad(lambda R, k=k: R**k * math.exp(logf(R) - c), 0, 40, limit=200)[0] for k in range(3)]
        var = mom[2] / mom[0] - (mom[1] / mom[0]) ** 2
        assert abs(float(tf.radius_variance(t, d, GAMMA)) - var) < 1e-9


def test_layernorm_floor_is_the_risk_of_the_conditional_mean():
    """The floor E Var(x . v* | LN(x)) against the Monte Carlo risk of the predictor that attains it,
    E[x . v* | u] = s (k* . e)(e . v*) + E[R | u] (u . v*), at 5 SE; control: the floor without its mean-removal
    term gamma^2 (e . v*)^2. Under a shared z the floor is that term for v*_1 + v*_2."""
    d, n = 20, 8000
    layernorm_floor = jax.jit(tf.layernorm_floor, static_argnames="n")  # as the preset calls it: compiled, not eager
    ks, vs = tf.sample_teachers(jax.random.key(5), d, 1)
    floor, floor_se = layernorm_floor(jax.random.key(6), ks, vs, GAMMA, False, n=n)
    s, e = math.sqrt(d / 2), np.full(d, 1 / math.sqrt(d))
    k, v = np.asarray(ks[0]), np.asarray(vs[0])
    x = s * k + GAMMA * np.asarray(jax.random.normal(jax.random.key(7), (n, d)))
    px = x - np.outer(x @ e, e)
    R = np.linalg.norm(px, axis=1)
    u = px / R[:, None]
    t = u @ (s * (k - (k @ e) * e))
    g2 = GAMMA**2
    mode = 0.5 * (t + np.sqrt(t * t + 4 * (d - 2) * g2))
    width = 1 / np.sqrt((d - 2) / mode**2 + 1 / g2)
    grid = mode[:, None] + width[:, None] * np.linspace(-14, 14, 401)
    grid = np.maximum(grid, 1e-12)
    logf = (d - 2) * np.log(grid) - (grid**2 - 2 * grid * t[:, None]) / (2 * g2)
    w = np.exp(logf - logf.max(axis=1, keepdims=True))
    mean_R = (w * grid).sum(1) / w.sum(1)
    base = s * (k @ e) * (e @ v)
    err = (x @ v - base - mean_R * (u @ v)) ** 2
    se = math.hypot(err.std(ddof=1) / math.sqrt(n), float(floor_se))
    assert abs(err.mean() - float(floor)) < 5 * se
    assert abs(err.mean() - (float(floor) - g2 * (e @ v) ** 2)) > 5 * se
    shared = layernorm_floor(jax.random.key(6), *tf.sample_teachers(jax.random.key(5), d, 2), GAMMA, True)
    ks2, vs2 = tf.sample_teachers(jax.random.key(5), d, 2)
    assert float(shared[0]) == pytest.approx(g2 * float(jnp.sum(vs2, 0) @ e) ** 2, rel=1e-12)


# --- the presets ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["marion-transformer-single-head", "marion-transformer-multihead"])
def test_quick_runs_pass_their_checks_with_controls_rejected(name, quick_run):
    run = quick_run(name)
    assert len(run.checks) >= (5 if "single" in name else 6)
    assert all(c.passed and c.control_rejected for c in run.checks), [
        (c.name, c.status, c.control_rejected) for c in run.checks]
    m = run.metrics
    # the phenomenon: the notebook's model attends along k* and reads v*
    if "single" in name:
        assert m["notebook_final_kappa_median"] > 0.9 and m["notebook_final_nu_median"] > 0.9
    else:
        assert min(m["notebook_matched_kappa_h1_mean"], m["notebook_matched_kappa_h2_mean"]) > 0.6
    assert "corrected" in run.finding and "notebook" in run.finding
    assert np.all(run.data.layernorm_floor.values > 0)


def test_the_checks_reject_wrong_counterparts_on_a_small_run(quick_run):
    """Each check's control is rejected, and the pair checks fail when the models are exchanged (W_K = 0 read as
    Gaussian and back)."""
    run = quick_run("marion-transformer-multihead")
    ds = run.data.copy()
    ds["zero_key_init"] = ("model",), ~ds.zero_key_init.values
    ds["coupled_output_init"] = ("model",), ~ds.coupled_output_init.values
    _, checks = ts.summarize(ds, run.config)
    swapped = [c for c in checks if c.name.startswith(("W_K = 0", "W_O drawn"))]
    assert len(swapped) == 3 and not any(c.passed for c in swapped)


def test_reference_checks_at_the_notebook_sizes_on_a_synthetic_dataset():
    """The reference checks read the notebook model's last log: fed the notebook's own runs 1-5 (T2) they pass, and
    fed the untrained values they fail."""
    cfg = tp.SingleHeadConfig()
    ref = tp.NOTEBOOK_T2["final_runs"]
    n = len(ref["kappa"])

    def ds(values):
        shape = (1, 2, n, 1, 1)
        return xr.Dataset({
            "test_excess_risk": (("model", "step", "run"), np.stack([np.full(n, 0.5), values["excess_risk"]])[None]),
            "kappa_notebook": (("model", "step", "run", "head", "direction"),
                               np.stack([np.full(n, 0.1), values["kappa"]])[None].reshape(shape)),
            "nu_notebook": (("model", "step", "run", "head", "direction"),
                            np.stack([np.full(n, 0.0), values["nu"]])[None].reshape(shape)),
        }, coords={"model": ["notebook"], "step": [0, 8000]})

    good = ts._reference_checks_t2(ds({k: np.asarray(v) for k, v in ref.items()}), cfg)
    assert len(good) == 3 and all(c.passed and c.control_rejected for c in good)
    bad = ts._reference_checks_t2(ds({"excess_risk": np.full(n, 0.2), "kappa": np.full(n, 0.5),
                                      "nu": np.full(n, 0.5)}), cfg)
    assert not any(c.passed for c in bad)


def test_memory_estimate_fits_a_laptop():
    for name in ("marion-transformer-single-head", "marion-transformer-multihead"):
        p = all_presets()[name]
        for quick in (False, True):
            need = p.memory(resolve_config(p, quick=quick))
            assert 0 < need < 4 * 2**30


def test_the_training_asks_for_the_fusion_emitters_from_long_training_updates_on():
    """The full sizes' training (runs x updates at least LONG_TRAINING_UPDATES) is compiled with
    runtime.LONG_RUNNING, a shorter one (the quick sizes) with the flags' loop emitters; both wrap one traced
    segment. Control: one update less than the bound takes the other program."""
    n = tf.LONG_TRAINING_UPDATES
    for name in ("marion-transformer-single-head", "marion-transformer-multihead"):
        cfg, quick = resolve_config(name, quick=False), resolve_config(name, quick=True)
        assert tf.segment_program(cfg.n_repeats, cfg.n_steps) is tf._segment_long
        assert tf.segment_program(quick.n_repeats, quick.n_steps) is tf._segment_short
    assert tf.segment_program(1, n) is tf._segment_long and tf.segment_program(1, n - 1) is tf._segment_short
    assert tf.segment_program(2, n // 2) is tf._segment_long and tf.segment_program(2, n // 2 - 1) is tf._segment_short
    assert tf._segment_long.__wrapped__ is tf._segment_short.__wrapped__ is tf._segment


def test_training_precision_float32_updates_and_float64_logs():
    """``Sizes.precision`` sets the updates' precision: float32 trains float32 weights (the notebooks'), float64
    float64 ones (the control: the same draws and program otherwise); the logs are float64 either way, and the two
    trajectories differ (by float32 round-off carried along the updates: above float64 round-off, below 100 float32
    ulps of the largest weight per update) while the rank one of the W_K = 0 model
    holds within :func:`~attnlab.marion.transformer_summary.rank_one_tolerance` of each precision."""
    out = {}
    for precision in ("float32", "float64"):
        sz = _sizes(H=2)._replace(precision=precision)
        arms = tf.Arm(jnp.array([True, False]), jnp.array([True, False]), jnp.array([True, False]))
        params, runs, keys, _ = tp._initial(jax.random.split(jax.random.key(5), 2), arms, sz, 30)
        assert params.W_Q.dtype == jnp.dtype(precision)
        _, logs, final = tf.train(params, runs, keys, arms, sz, gamma=GAMMA, eps=EPS, step_size=0.01, n_steps=30,
                                  log_every=10, notebook_logging=False)
        assert final.W_Q.dtype == jnp.dtype(precision) and logs["test_excess_risk"].dtype == jnp.float64
        cfg = tp.MultiHeadConfig(n_steps=30, log_every=10, precision=precision)
        assert float(np.nanmax(np.asarray(logs["s2_over_s1"])[:, 0])) < ts.rank_one_tolerance(cfg)
        assert float(np.nanmin(np.asarray(logs["s2_over_s1"])[1:, 1])) > ts.rank_one_tolerance(cfg)  # Gaussian W_K
        out[precision] = np.asarray(final.W_Q, dtype=np.float64)
    gap = np.max(np.abs(out["float32"] - out["float64"]))
    assert 1e-12 < gap < 30 * 2.0 ** -24 * 100 * np.max(np.abs(out["float64"]))


def test_rank_one_tolerance_is_twenty_updates_times_the_unit_round_off():
    """20 T u: 20 x 8000 x 2^-24 in float32 (the T2 notebook's updates), 20 x 8000 x 2^-53 in float64."""
    assert ts.rank_one_tolerance(tp.SingleHeadConfig()) == pytest.approx(20 * 8000 * 2.0 ** -24, rel=1e-15)
    assert ts.rank_one_tolerance(tp.SingleHeadConfig(precision="float64")) == pytest.approx(
        20 * 8000 * 2.0 ** -53, rel=1e-15)


def _faithful_t3_dataset(table, tail_shift: float = 0.0):
    """The notebook model's logs as a faithful multi-head run holds them: the final kappa table ``table`` (run 10's
    final entries from its tail) and run 10's last five logs equal to the notebook's printed tail moved by
    ``tail_shift``. In run 10 head 2 is aligned with direction 1 and head 1 with direction 2 (the printed table)."""
    tail = tp.NOTEBOOK_T3["run10_tail"]
    steps = [1, *tail["step"]]
    dims = ("model", "step", "run", "head", "direction")
    kappa = np.broadcast_to(np.asarray(table, float), (1, len(steps), 10, 2, 2)).copy()
    nu = np.full_like(kappa, 0.2)
    risk = np.full((1, len(steps), 10), 0.1)
    kappa[0, 1:, 9, 1, 0], kappa[0, 1:, 9, 0, 1] = np.asarray(tail["kappa"]) + tail_shift
    nu[0, 1:, 9, 1, 0], nu[0, 1:, 9, 0, 1] = np.asarray(tail["nu"]) + tail_shift
    risk[0, 1:, 9] = np.asarray(tail["excess_risk"]) + tail_shift
    return xr.Dataset({"kappa_notebook": (dims, kappa), "nu_notebook": (dims, nu),
                       "test_excess_risk": (dims[:3], risk)}, coords={"model": ["notebook"], "step": steps})


def test_faithful_multihead_bounds_follow_the_training_precision():
    """Trained in float32, a faithful T3 run and the notebook's float32 print are two float32 trainings: the bound is
    5 sqrt(2) times the measured round-off spread (FAITHFUL_SPREAD_F32); float64 keeps FAITHFUL_DRIFT. The default
    precision is the notebook's float32. Checks on a synthetic notebook log: moved by half a bound they pass with
    their controls rejected, by twice a bound they fail."""
    assert tp.MultiHeadConfig().precision == "float32" and tp.SingleHeadConfig().precision == "float32"
    for part in ("table", "tail"):
        tol, basis = tp.faithful_bound("float32", part)
        assert tol == pytest.approx(5 * math.sqrt(2) * tp.FAITHFUL_SPREAD_F32[part], rel=1e-15)
        assert "FAITHFUL_SPREAD_F32" in basis
        tol64, basis64 = tp.faithful_bound("float64", part)
        assert tol64 == tp.FAITHFUL_DRIFT and "FAITHFUL_DRIFT" in basis64
    table = tp.NOTEBOOK_T3["kappa"]
    exact = ts._faithful_checks_t3(_faithful_t3_dataset(table), "float32")
    assert exact[0].simulation < 1e-4 and exact[1].simulation < 1e-12  # the construction holds the printed numbers
    tol_table, tol_tail = tp.faithful_bound("float32", "table")[0], tp.faithful_bound("float32", "tail")[0]
    # the control (heads exchanged) lies far outside the float32 bound
    assert np.max(np.abs(table - table[:, ::-1])) > 10 * tol_table
    for factor, passes in ((0.5, True), (2.0, False)):
        moved = table + factor * tol_table * np.where(np.arange(40).reshape(10, 2, 2) % 2, 1.0, -1.0)
        ds = _faithful_t3_dataset(moved, tail_shift=factor * tol_tail)
        checks = ts._faithful_checks_t3(ds, "float32")
        assert len(checks) == 2
        assert [c.passed for c in checks] == [passes, passes], [(c.name, c.simulation, c.tolerance) for c in checks]
        assert all(c.control_rejected for c in checks)
    # float64 keeps its own bound: the half float32 bound exceeds FAITHFUL_DRIFT and fails there
    assert 0.5 * tol_table > tp.FAITHFUL_DRIFT
    ds = _faithful_t3_dataset(table + 0.5 * tol_table)
    assert [c.passed for c in ts._faithful_checks_t3(ds, "float64")] == [False, True]


def test_the_round_off_spread_tool_moves_float32_runs_by_round_off_only():
    """tools/round_off_spread.py, the basis of FAITHFUL_SPREAD_F32, on 300 updates of the notebook's first two runs:
    the replica moved by one ulp differs from replica 0 (the preset's initial weights) in float32 by more than float64
    round-off and far less than the alignments themselves, in float64 by float64 round-off only; the two precisions
    agree to float32's spread."""
    from tool_modules import load_tool

    tool = load_tool("round_off_spread")
    f32 = tool.replicas(2, "float32", n_steps=300, n_runs=2)
    assert f32["steps"] == [1, 101, 201] and f32["kappa"].shape[2] == 2  # (replica, log, run, ...)
    gap32 = np.max(np.abs(f32["kappa"][1] - f32["kappa"][0]))
    assert 1e-9 < gap32 < 1e-3
    f64 = tool.replicas(2, "float64", n_steps=300, n_runs=2)
    assert np.max(np.abs(f64["kappa"][1] - f64["kappa"][0])) < 1e-9
    assert np.max(np.abs(f64["kappa"][0] - f32["kappa"][0])) < 1e-3
