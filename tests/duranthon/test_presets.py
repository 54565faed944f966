"""Duranthon presets: quick runs pass their checks, the activation table of spec 3.6, bad configs rejected.

The spec 3.6 values are the spec authors' Monte Carlo (+-0.002) under this spec's reading of erf (c optimised) and
softplus (no shift); tolerance 0.002 + 5 SE of our estimate. Softplus and softmax at nu = inf have their optimum at
kappa -> inf; the search stops at kappa_max = 1000, where softplus is within 1e-3 of its ReLU-normalised limit.
"""

import math

import jax
import numpy as np
import pytest

from attnlab import runtime
from attnlab.errors import AttnlabError
from attnlab.registry import all_presets, resolve_config

SPEC_TABLE = {  # setting -> {activation: value}
    "spiked L=2": {"linear": 0.2222, "erf": 0.189, "softplus": 0.112},
    "max L=2": {"linear": 0.3408, "erf": 0.333, "softplus": 0.049},
    "max L=3": {"linear": 0.4279, "erf": 0.400, "softplus": 0.112},
    "max L~U{1,2,3}": {"linear": 0.389, "erf": 0.383, "softplus": 0.054},
    "spiked L~U{1,2,3}": {"softmax": 0.0766, "linear": 0.223, "erf": 0.189, "softplus": 0.103},
}


_RUNS = {}


def _run(name, quick=True, **overrides):
    """Run, summarise and plot a preset; memoised, so tests that read the same run share it."""
    key = (name, quick, repr(sorted(overrides.items())))
    if key not in _RUNS:
        p = all_presets()[name]
        cfg = resolve_config(p, quick=quick, overrides=overrides)
        ds = p.run(cfg, jax.random.key(0))
        _RUNS[key] = ds, p.summarize(ds, cfg), p.plot(ds, cfg)
    return _RUNS[key]


def _shared(quick_run, name):
    """The session's shared quick run of ``name`` (seed 0, as the conformance test reads it), with its figures."""
    run = quick_run(name)
    with runtime.x64():
        return run.data, (run.metrics, run.checks), run.preset.plot(run.data, run.config)


def test_population_quick_passes_its_checks(quick_run):
    ds, (metrics, checks), figs = _shared(quick_run, "duranthon-population")
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert metrics["min_linear_minus_softmax"] > 0
    assert set(figs) == {"risk_vs_nu", "risk_vs_L"}


@pytest.mark.slow
def test_activation_table_matches_spec_3_6():
    ds, (metrics, checks), _ = _run("duranthon-activations", n_mc=20_000)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    for setting, row in SPEC_TABLE.items():
        for act, value in row.items():
            q = ds.sel(setting=setting, activation=act)
            assert abs(float(q.risk) - value) <= 0.002 + 5 * float(q.risk_se), (setting, act, float(q.risk))
    # Cor. 4.4 [3P]: unnormalised activations pay for variable L, normalised ones do not (5 SE)
    for model in ("spiked", "max"):
        for act in ("linear", "erf"):
            assert metrics[f"variable_L_penalty_{model}_{act}"] > 5 * metrics[f"variable_L_penalty_{model}_{act}_se"]
        for act in ("softmax", "softplus"):
            assert abs(metrics[f"variable_L_penalty_{model}_{act}"]) < 5 * metrics[
                f"variable_L_penalty_{model}_{act}_se"] + 1e-3


# spec 3.6, the means of the fixed-L values quoted next to the variable-L entries: model -> {quantity: value}
SPEC_FIXED_L_MEANS = {"spiked": {"bayes": "0.0766", "linear": "0.179"},
                      "max": {"linear": "0.256", "erf": "0.244", "softplus": "0.053"}}


@pytest.mark.slow
def test_activation_table_fixed_L_means_match_spec_3_6():
    """The spec's means over L = 1, 2, 3 of the fixed-L risks: the Bayes risk on spiked-SLR (L = 1: 0, L = 2
    quadrature, L = 3 importance sampling), the linear closed forms, and the Monte Carlo-optimised erf (c optimised)
    and softplus risks on max-SLR at nu = inf. Tolerance: 5 SE of our mean (the SEs of the three values combined in
    quadrature, divided by 3) plus half a unit of the printed digit."""
    ds, _, _ = _run("duranthon-activations", n_mc=20_000)
    for model, row in SPEC_FIXED_L_MEANS.items():
        fixed = [f"{model} L={L}" for L in (1, 2, 3)]
        for what, printed in row.items():
            if what == "bayes":
                vals, ses = ds.bayes_risk.sel(setting=fixed).values, ds.bayes_risk_se.sel(setting=fixed).values
            elif what == "linear":
                vals = ds.linear_closed_form.sel(setting=fixed).values
                ses = ds.linear_closed_form_se.sel(setting=fixed).values
            else:
                vals = ds.risk.sel(setting=fixed, activation=what).values
                ses = ds.risk_se.sel(setting=fixed, activation=what).values
            mean, se = float(np.mean(vals)), float(np.sqrt(np.sum(ses**2)) / 3)
            half = 0.5 * 10 ** -len(printed.split(".")[1])
            assert abs(mean - float(printed)) <= 5 * se + half, (model, what, mean, se, printed)


@pytest.mark.parametrize("name,bad", [("duranthon-population", {"nus": [-1.0]}),
                                      ("duranthon-population", {"Ls": [0]}),
                                      ("duranthon-population", {"nus": [math.inf]}),
                                      ("duranthon-activations", {"nu_spiked": -2.0}),
                                      ("duranthon-activations", {"activations": ["tanh"]})])
def test_bad_config_is_rejected(name, bad):
    p = all_presets()[name]
    with pytest.raises(AttnlabError):
        resolve_config(p, quick=True, overrides=bad)


def test_sample_complexity_quick_passes_and_every_fixed_point_converges(quick_run):
    ds, (metrics, checks), figs = _shared(quick_run, "duranthon-sample-complexity")
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert metrics["fixed_points_converged_fraction"] == 1.0
    assert float(ds.replica_residual.max()) < 1e-8
    # more data helps, and the ERM error stays above the population Bayes floor (5 SE of that floor)
    sim = ds.sim_test_error.sel(activation="softmax").mean("seed").values
    assert sim[-1] < sim[0] and sim.min() > metrics["bayes_risk"] - 5 * float(ds.bayes_population_se)
    assert "sample_complexity" in figs


@pytest.mark.parametrize("bad", [{"alphas": [0.0]}, {"lam": -1.0}, {"nu": -1.0}, {"L": 0},
                                 {"model": "spiked", "nu": math.inf}, {"lam": "best"}, {"lam": 0.0}])
def test_sample_complexity_bad_config_is_rejected(bad):
    p = all_presets()["duranthon-sample-complexity"]
    with pytest.raises(AttnlabError):
        resolve_config(p, quick=True, overrides=bad)


def test_sample_complexity_has_the_bayes_optimal_curve_below_erm(quick_run):
    ds, (metrics, checks), _ = _shared(quick_run, "duranthon-sample-complexity")
    bo = ds.bo_test_error.values
    assert bool(ds.bo_converged.all()) and np.all(np.diff(bo) < 0)
    names = [c.name for c in checks]
    assert any(n.startswith("Bayes-optimal <= ERM replica") for n in names)
    assert all(c.passed for c in checks if c.name.startswith("Bayes-optimal"))


@pytest.mark.slow
def test_low_snr_reports_every_point_and_passes_its_control_checks(quick_run):
    """The session's quick run: the quick lambda path (1, 0.1: the checks apply; the control at lambda = 0.3 would lie
    within the 5 SE and leave the checks inconclusive); the default path goes down to 0.01, where the diagnostics
    show the two V_hat estimators part.

    At lambda = 1 every solve converges. At lambda = 0.1 a frozen set's solve can stall near a fold of its proximal
    maps, and whether it does follows the rounding of the compiled map (XLA's loop or fusion emitters on the same CPU:
    all 8 converge with one, one of 8 stalls at a residual of 2e-3 even after 500 evaluations with the other): the
    preset then reports that point as not converged, leaves it out of the checks, and the checks still apply."""
    ds, (metrics, checks), figs = _shared(quick_run, "duranthon-low-snr")
    valid = {"converged", "max_iter", "invalid", "bad_start", "continuation_stopped"}
    assert set(np.unique(ds.replica_status.values)) <= valid
    converged = ds.replica_converged.values
    assert bool(ds.replica_converged.sel(lam=1.0).all()) and converged.mean() >= 0.75
    assert metrics["fixed_points_converged_fraction"] == converged.mean()
    assert np.all((ds.replica_status.values == "converged") == converged)
    assert float(ds.replica_residual.values[converged].max()) < 1e-8
    assert float(ds.replica_residual.values[~converged].min(initial=np.inf)) >= 1e-8  # not converged: says so
    assert checks and all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert any("control" in c.name for c in checks) and any(c.name.startswith("RS stable") for c in checks)
    # the replicon (AT) eigenvalue is reported at every point; RS is stable at the control lambda = 1
    assert np.all(ds.replica_at_eigenvalue.sel(lam=1.0).values < 1)
    assert metrics["unconverged_points"] == int((np.isfinite(ds.replica_at_eigenvalue.values) & ~converged).sum())
    assert np.isfinite(ds.sim_test_error.values).all() and np.isfinite(ds.sim_objective.values).all()
    assert set(figs) == {"low_snr_alpha2"}


@pytest.mark.slow
def test_low_snr_point_where_no_set_converged_has_no_value_not_nan(quick_run):
    """At full size (lambda down to 0.01) the uninformed Stein branch can converge on no frozen set at lambda =
    0.01: its replica test error is then None (no value), not NaN, which the store refuses as a failed computation.
    Here the quick run's point at lambda = 0.1 is made so."""
    from attnlab.app.store import _non_finite_metric

    ds, _, _ = _shared(quick_run, "duranthon-low-snr")
    at = dict(lam=0.1, jacobian="stein", branch="uninformed")
    broken = ds.copy(deep=True)
    for var in ("replica_test_error", "replica_test_error_se", "replica_objective", "replica_nonconvex_fraction"):
        broken[var].loc[at] = np.nan
    broken["replica_converged"].loc[at] = False
    cfg = resolve_config("duranthon-low-snr", quick=True)
    metrics, checks = all_presets()["duranthon-low-snr"].summarize(broken, cfg)
    key = "stein_uninformed_alpha2_lam0.1"
    assert metrics[f"replica_test_error_{key}"] is None and metrics[f"replica_converged_{key}"] == 0.0
    assert metrics[f"replica_objective_{key}"] is None and metrics[f"nonconvex_fraction_{key}"] is None
    assert _non_finite_metric(metrics) is None and checks
    assert metrics["replica_test_error_implicit_uninformed_alpha2_lam0.1"] is not None  # the other points keep theirs


@pytest.mark.parametrize("bad", [{"lams": [1.0, -0.1]}, {"lams": [1.0]}, {"alphas": [0.0]}, {"nu": -1.0},
                                 {"model": "spiked", "nu": math.inf}, {"jacobians": ["finite-difference"]}])
def test_low_snr_bad_config_is_rejected(bad):
    p = all_presets()["duranthon-low-snr"]
    with pytest.raises(AttnlabError):
        resolve_config(p, quick=True, overrides=bad)


def test_sample_complexity_paper_settings_fix_model_nu_L_and_search_lambda():
    from attnlab.duranthon.presets import PAPER_LAM_GRID

    p = all_presets()["duranthon-sample-complexity"]
    cfg = resolve_config(p, quick=True, overrides={"setting": "fig3-max-nuinf"})
    assert (cfg.model, cfg.nu, cfg.L, cfg.lam_grid) == ("max", math.inf, 3, PAPER_LAM_GRID)
    cfg = resolve_config(p, quick=True, overrides={"setting": "fig3-spiked-nu1", "lam_grid": [0.5, 1.0]})
    assert (cfg.model, cfg.nu, cfg.L, cfg.lam_grid) == ("spiked", 1.0, 3, (0.5, 1.0))
    assert p.config_cls(**cfg.model_dump()) == cfg  # round trip of the resolved config
    for bad in ({"setting": "fig3-spiked-nu1", "nu": 2.0}, {"setting": "fig3-spiked-nu2", "L": 2},
                {"setting": "fig3-max-nuinf", "model": "spiked"}, {"setting": "fig4"}, {"lam_grid": [0.1, -1.0]}):
        with pytest.raises(AttnlabError):
            resolve_config(p, quick=True, overrides=bad)


@pytest.mark.slow
def test_sample_complexity_lambda_grid_search_picks_the_lowest_replica_test_error():
    from attnlab.duranthon.sample_complexity import theory_vs_simulation

    ds = theory_vs_simulation(jax.random.key(0), "spiked", 2.0, 2, (2.0,), 1.0, 1.0, ("softmax",), n_replica=128,
                              n_sets=2, sqrt_ND=60.0, n_seeds=2, n_test=500, n_risk=2000, n_bo=1024,
                              lam_grid=(1.0, 0.1, 0.3))
    grid = ds.replica_test_error_grid.sel(activation="softmax", alpha=2.0)
    assert list(ds.lam_grid.values) == [1.0, 0.3, 0.1] and bool(ds.replica_converged_grid.all())
    lam = float(ds.lambda_opt.sel(activation="softmax", alpha=2.0, lam_kv="lambda_k"))
    stable = (ds.replica_at_eigenvalue_grid.sel(activation="softmax", alpha=2.0) < 1).all("set").values
    assert lam == float(grid.lam_grid[int(np.argmin(np.where(stable, grid.values, np.inf)))])
    assert float(ds.replica_test_error.sel(activation="softmax", alpha=2.0)) == float(grid.sel(lam_grid=lam))
    assert bool(ds.replica_converged.all()) and np.all(ds.replica_at_eigenvalue.values < 1)


def test_fields_that_take_inf_declare_it_with_allow_inf_nan():
    """nu_max (default inf) and nu (inf for max-SLR) allow inf through pydantic's allow_inf_nan, not the wording of
    their descriptions; NaN stays invalid."""
    from attnlab.duranthon.presets import ActivationsConfig, LowSNRConfig, SampleComplexityConfig

    for cls, name in ((ActivationsConfig, "nu_max"), (SampleComplexityConfig, "nu"), (LowSNRConfig, "nu")):
        info = cls.model_fields[name]
        assert any(getattr(m, "allow_inf_nan", None) is True for m in info.metadata), (cls.__name__, name)
        assert "inf allowed" not in (info.description or "")
    assert resolve_config("duranthon-activations", quick=True).nu_max == math.inf
    assert resolve_config("duranthon-sample-complexity", quick=True,
                          overrides={"setting": "fig3-max-nuinf"}).nu == math.inf
    assert resolve_config("duranthon-low-snr", quick=True, overrides={"model": "max", "nu": math.inf}).nu == math.inf
    for name, bad in (("duranthon-activations", {"nu_max": math.nan}), ("duranthon-low-snr", {"nu": math.nan}),
                      ("duranthon-sample-complexity", {"lam": math.inf})):
        with pytest.raises(AttnlabError):
            resolve_config(name, quick=True, overrides=bad)


def test_sample_complexity_lam_accepts_a_number_or_optimal():
    from attnlab.config import parse_set

    p = all_presets()["duranthon-sample-complexity"]
    assert resolve_config(p, quick=True).lam == 1.0  # the quick run keeps a fixed lambda
    cfg = resolve_config(p, quick=True, overrides=parse_set(["lam=optimal"]))
    assert cfg.lam == "optimal" and p.config_cls(**cfg.model_dump()) == cfg
    assert resolve_config(p, quick=True, overrides=parse_set(["lam=0.5"])).lam == 0.5


@pytest.mark.slow
def test_sample_complexity_lam_optimal_records_lambda_star_and_checks_it_against_the_grid():
    """``--set lam=optimal``: lambda*(alpha) per activation on the alpha coordinate (units, long_name), the replica
    and ERM columns at lambda*, and the check against the grid argmin passes while rejecting its control (the grid's
    worst lambda). Small sizes: one alpha where the minimum lies in the convex regime (see
    tests/duranthon/test_sample_complexity.py), and frozen sets large enough (n_replica = 1000) that the sets' spread
    tells the grid's lambdas apart (with 256 every lambda but the RS-unstable one is tied within 5 SE: the check is
    then not evaluated)."""
    ds, (metrics, checks), figs = _run("duranthon-sample-complexity", lam="optimal", alphas=[8.0], n_replica=1000,
                                       n_sets=3, sqrt_ND=40.0, n_seeds=2, n_test=200, n_risk=5000)
    var = ds.lambda_star
    assert var.dims == ("activation", "alpha") and var.attrs["units"] == "1" and "lambda*" in var.attrs["long_name"]
    lam = float(var.sel(activation="softmax", alpha=8.0))
    assert 0.03 < lam < 3.0 and float(ds.lambda_opt.sel(activation="softmax", alpha=8.0, lam_kv="lambda_v")) == lam
    assert metrics["softmax_lambda_star_alpha8"] == lam and metrics["softmax_lambda_star_gain_alpha8"] > 0
    c = [c for c in checks if c.name.startswith("lambda* within the grid's resolution")]
    assert len(c) == 1 and c[0].passed and c[0].control_rejected, c
    assert ds.attrs["lambda_k"] == "optimal" and "sample_complexity" in figs


def test_a_bad_lam_names_the_values_it_accepts():
    with pytest.raises(AttnlabError, match='^invalid value for \'lam\': .*lam must be a positive number or "optimal" '
                                           r"\(got -1\)$") as err:
        resolve_config("duranthon-sample-complexity", quick=True, overrides={"lam": -1})
    assert "constrained-float" not in str(err.value)
    with pytest.raises(AttnlabError, match="lam_star_grid must be empty or hold at least 2 values"):
        resolve_config("duranthon-sample-complexity", quick=True, overrides={"lam_star_grid": [0.1]})


@pytest.mark.slow
def test_quick_lam_optimal_at_alpha_2_finds_the_optimum_below_the_papers_grid():
    """``attnlab run duranthon-sample-complexity --quick --set lam=optimal`` at the quick size's smaller alpha, 2:
    the replica test error still falls below PAPER_LAM_GRID's smallest lambda (0.03), so the quick grid
    (QUICK_LAM_STAR_GRID) reaches lower and its argmin lies there. How far down it keeps falling is not a stable
    fact at this size: near lambda = 0.003-0.01 the frozen sets' fixed points approach RS instability and some sets
    have several (which one the solver reaches follows its rounding, i.e. the machine), so lambda* is either a root
    below 0.03 or, where the error still falls at the smallest RS-stable grid lambda, reported at the grid's edge
    (NaN) with its check not evaluated, never a number outside the grid. Every evaluated check passes."""
    from attnlab.duranthon.presets import PAPER_LAM_GRID, QUICK_LAM_STAR_GRID

    ds, (metrics, checks), _ = _run("duranthon-sample-complexity", lam="optimal", alphas=[2.0])
    assert float(ds.lambda_grid_argmin.max()) < min(PAPER_LAM_GRID)  # the optimum the paper's grid missed
    for status, lam in zip(ds.lambda_star_status.values.ravel(), ds.lambda_star.values.ravel()):
        assert status in ("root", "at_grid_edge"), status
        if status == "root":
            assert min(QUICK_LAM_STAR_GRID) < lam < min(PAPER_LAM_GRID)
        else:
            assert np.isnan(lam)
    star = [c for c in checks if c.name.startswith("lambda* within the grid's resolution")]
    assert star and all(c.passed == c.evaluated for c in star), star
    assert all(c.passed for c in checks if c.evaluated), [c for c in checks if c.evaluated and not c.passed]
    assert all(c.reason for c in checks if not c.evaluated)
