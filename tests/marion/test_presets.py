"""The Marion presets at full size against the official code's trajectories (spec A7.1).

Official medians are over 6 (schedule) and 4 (SGD) runs of another seed stream, ours over this preset's repeats.
Tolerances: half a unit of the printed digit plus 5 standard errors of the difference of two medians, the SE of a
median being taken as 1.2533 sigma / sqrt(n) with sigma the spread across our runs.
"""

import math

import jax
import numpy as np
import pytest

from attnlab.registry import all_presets, resolve_config


def _run(name, **overrides):
    p = all_presets()[name]
    cfg = resolve_config(p, overrides=overrides)
    ds = p.run(cfg, jax.random.key(0))
    return ds, p.summarize(ds, cfg)


def _tolerance(values, printed, n_official):
    half_unit = 0.5 * 10 ** -len(repr(printed).split(".")[1])
    sigma = np.std(values, ddof=1)
    return half_unit + 5 * 1.2533 * sigma * math.sqrt(1 / n_official + 1 / values.size)


def _compare(ds, variable, table, n_official, transform=np.abs):
    for step, printed in table.items():
        values = transform(ds[variable].sel(step=step).values)
        assert abs(np.median(values) - printed) <= _tolerance(values, printed, n_official), (variable, step)


@pytest.fixture(scope="module")
def schedule(quick_run):
    """marion-sphere-schedule at seed 0: its quick size is its full size, so the session's shared quick run."""
    run = quick_run("marion-sphere-schedule")
    assert run.config == resolve_config("marion-sphere-schedule")  # the official table's settings
    return run.data, (run.metrics, run.checks)


@pytest.mark.slow
def test_schedule_trajectory_matches_the_official_table(schedule):
    ds, (metrics, checks) = schedule
    _compare(ds, "kappa", {3000: 0.14, 9000: 0.22, 15000: 0.32, 30000: 0.51, 60000: 0.79, 90000: 0.97, 120000: 1.000}, 6)
    _compare(ds, "nu", {3000: 0.999, 9000: 1.0, 30000: 1.0, 120000: 1.0}, 6)
    _compare(ds, "excess_risk", {3000: 3.45, 9000: 2.14, 15000: 1.41, 30000: 0.64, 60000: 0.23, 90000: 0.114,
                                 120000: 0.0750}, 6, transform=lambda x: x)
    assert all(c.passed for c in checks)
    assert abs(metrics["oracle_risk"] - 0.07501) < 5e-6
    # distance to M collapses to float64 round-off (the official float32 code stops at ~1e-7)
    reached = np.abs(ds.kappa.values[-1]) > 0.999
    assert np.all(ds.distance_to_manifold.values[-1][reached] < 1e-12)


@pytest.mark.slow
def test_sgd_trajectory_matches_the_official_table():
    ds, (metrics, checks) = _run("marion-sgd", n_repeats=8)
    _compare(ds, "kappa", {10000: 0.21, 25000: 0.34, 50000: 0.55, 100000: 0.93, 150000: 0.994, 200000: 0.998}, 4)
    _compare(ds, "nu", {10000: 0.58, 25000: 0.88, 50000: 0.96, 100000: 0.994, 150000: 0.998, 200000: 0.998}, 4)
    _compare(ds, "test_excess_risk", {10000: 4.72, 25000: 2.57, 50000: 1.06, 100000: 0.37, 150000: 0.21,
                                      200000: 0.177}, 4, transform=lambda x: x)
    assert all(c.passed for c in checks)
    assert abs(metrics["oracle_risk"] - 0.18207) < 5e-6


def _quick(name, **overrides):
    p = all_presets()[name]
    cfg = resolve_config(p, quick=True, overrides=overrides)
    ds = p.run(cfg, jax.random.key(0))
    return ds, p.summarize(ds, cfg), p.finding


def test_sgd_with_one_repeat_leaves_the_held_out_check_not_evaluated():
    ds, (metrics, checks), _ = _quick("marion-sgd", n_repeats=1, n_steps=2000, log_every=1000, n_mc=1000,
                                      n_mc_frame=10_000)
    held_out = [c for c in checks if "held-out" in c.name]
    assert len(held_out) == 1 and not held_out[0].evaluated and not held_out[0].passed
    assert "1 repeat" in held_out[0].reason and held_out[0].status == "not evaluated"


@pytest.mark.slow
def test_monte_carlo_check_rejects_the_spurious_point(quick_run):
    """The closed form at the oracle-bound final iterate against 10^6 in-frame sequences: within 5 SE, while the
    spurious point's risk (1.8% above the oracle's at lambda = 0.1) lies beyond them (the session's shared run of
    marion-manifold, whose quick size is its full size)."""
    run = quick_run("marion-manifold")
    metrics, checks = run.metrics, run.checks
    mc = next(c for c in checks if "in the frame" in c.name)
    assert mc.passed and mc.control_rejected and "spurious" in mc.control
    assert mc.control_theory == pytest.approx(0.11551, abs=1e-5)  # spec A7.1, lambda = 0.1
    assert all(c.passed and c.control_rejected for c in checks)
    n = run.config.n_repeats
    assert n >= 2 and metrics["fraction_reaching_oracle"] == 1.0
    assert run.preset.finding(metrics, run.config).startswith(f"{n}/{n} runs reach the oracle")


def test_a_diverged_run_leaves_its_checks_not_evaluated():
    """step_size = 1e300 overflows: every tolerance and simulated value is non-finite, so summarize returns
    not-evaluated checks with the reason instead of failing to build a Check with a NaN tolerance."""
    import attnlab

    run = attnlab.run("marion-sgd", quick=True, step_size=1e300)  # the quick run's programs: step_size is traced
    assert run.checks and not run.passed
    for c in run.checks:
        assert c.status == "not evaluated" and "non-finite" in c.reason, (c.name, c.reason)
        assert c.control_rejected is None


@pytest.mark.parametrize("name", ["marion-manifold", "marion-toy-multihead"])
def test_an_attention_scale_beyond_the_sign_regime_is_refused(name):
    from attnlab.errors import AttnlabError
    from attnlab.marion.predictors import LAMBDA_MAX

    with pytest.raises(AttnlabError, match="^invalid value for 'lambda0': .*less than or equal to 10000"):
        resolve_config(name, quick=True, overrides={"lambda0": 1e308})
    assert resolve_config(name, quick=True, overrides={"lambda0": LAMBDA_MAX}).lambda0 == LAMBDA_MAX
