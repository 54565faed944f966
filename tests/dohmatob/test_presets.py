"""The Dohmatob presets: config validation and small runs whose checks all pass."""

import jax
import pytest

from attnlab.errors import AttnlabError
from attnlab.registry import all_presets, resolve_config


@pytest.mark.parametrize("name,overrides,match", [
    ("dohmatob-rgd", {"gamma": 1.0}, "gamma"),
    ("dohmatob-rgd", {"beta": 0.0}, "beta"),
    ("dohmatob-rgd", {"links": ["linear", "tanh"]}, "unknown link"),
    ("dohmatob-rgd", {"n_steps": 100, "log_every": 30}, "log_every"),
    ("dohmatob-flow", {"links": ["softplus"]}, "unknown link"),
    ("dohmatob-phase-diagram", {"gammas_mc": [0.5, 1.2]}, "gammas_mc"),
    ("dohmatob-phase-diagram", {"L_mc": [2, 10]}, "L_mc"),
])
def test_bad_config_rejected(name, overrides, match):
    p = all_presets()[name]
    with pytest.raises(AttnlabError, match=match):
        resolve_config(p, overrides=overrides)


def _run(name, **overrides):
    p = all_presets()[name]
    cfg = resolve_config(p, quick=True, overrides=overrides)
    ds = p.run(cfg, jax.random.key(1))
    metrics, checks = p.summarize(ds, cfg)
    assert all(c.passed for c in checks), [c.as_dict() for c in checks if not c.passed]
    figs = p.plot(ds, cfg)
    assert figs
    return ds, metrics, checks


@pytest.mark.slow
def test_rgd_quick():
    ds, metrics, checks = _run("dohmatob-rgd", n_steps=100, n_test=1000, n_test_rd=200, n_train=100)
    assert {"final_test_excess_risk_median_linear_mu0", "final_mu_median_linear_random", "final_nu_median_linear_mu0",
            "mean_field_vs_mc_max_gap_p_above_0_99"} <= set(metrics)
    has_p99 = metrics["n_final_iterates_p_above_0_99"] > 0  # the d_check comparison needs such iterates
    assert len(checks) == 3 + has_p99
    assert has_p99 == any("d = 1600" in c.name for c in checks)
    assert ds.mu.dims == ("link", "start", "step", "repeat")


@pytest.mark.slow
def test_flow_and_phase_diagram_quick():
    _, metrics, _ = _run("dohmatob-flow", n_grid=2, n_times=5, n_mc=2000)
    assert metrics["prop10_agreement_linear"] == 4
    _, metrics, _ = _run("dohmatob-phase-diagram", n_gamma=6, n_alpha=6, n_mc=1000, gammas_mc=[0.3], L_mc=[21])
    assert 0 < metrics["learnable_fraction_of_grid"] < 1
