"""The Dohmatob presets: config validation, and what their quick runs (shared with the conformance test) show."""

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


def test_rgd_quick(quick_run):
    run = quick_run("dohmatob-rgd")  # the session's shared quick run (its checks pass: tests/test_conformance.py)
    ds, metrics, checks = run.data, run.metrics, run.checks
    assert {"final_test_excess_risk_median_linear_mu0", "final_mu_median_linear_random", "final_nu_median_linear_mu0",
            "mean_field_vs_mc_max_gap_p_above_0_99"} <= set(metrics)
    has_p99 = metrics["n_final_iterates_p_above_0_99"] > 0  # the d_check comparison needs such iterates
    assert len(checks) == 3 + has_p99
    assert has_p99 == any("d = 1600" in c.name for c in checks)
    assert ds.mu.dims == ("link", "start", "step", "repeat")


def test_flow_and_phase_diagram_quick(quick_run):
    metrics = quick_run("dohmatob-flow").metrics  # the session's shared quick runs
    assert metrics["prop10_agreement_linear"] == metrics["prop10_listed_linear"] == 4
    assert 0 < quick_run("dohmatob-phase-diagram").metrics["learnable_fraction_of_grid"] < 1
