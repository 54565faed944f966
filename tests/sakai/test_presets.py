"""The Sakai presets at tiny sizes: every check passes, the same key gives the same dataset, the config validates."""

import jax
import numpy as np
import pytest

from attnlab import runtime
from attnlab.registry import all_presets, resolve_config

TINY = {"n_samples": 2000, "n_seeds": 2, "n_reference": 300, "n_boot": 20}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sakai-vary-width", "sakai-scores"])
def test_preset_runs_and_checks_pass(name):
    p = all_presets()[name]
    cfg = resolve_config(p, quick=True, overrides=TINY if name != "sakai-scores" else {})
    ds = p.run(cfg, jax.random.key(0))
    metrics, checks = p.summarize(ds, cfg)
    assert checks and all(c.passed for c in checks), [c.as_dict() for c in checks if not c.passed]
    assert all(np.isfinite(v) or np.isnan(v) for v in metrics.values())
    again = p.run(cfg, jax.random.key(0))
    for var in ds.data_vars:
        np.testing.assert_array_equal(ds[var].values, again[var].values)
    assert p.plot(ds, cfg)


def test_low_rank_needs_head_width():
    from attnlab.sakai.presets import SakaiConfig

    with pytest.raises(ValueError, match="head_width"):
        SakaiConfig(experiment="low_rank", n_heads=(1, 4))
    cfg = SakaiConfig(experiment="low_rank", n_heads=(1, 4), head_width=64)
    assert cfg.configs() == [(64, 64, 1), (256, 64, 4)]


def test_reference_check_drawn_apart(monkeypatch):
    """Above SEPARATE_REFERENCE_HEADS the exact side of the reference check is its own smaller draw
    (REFERENCE_EXACT_FACTOR * n_reference networks); the checks still pass and the same key gives the same numbers."""
    from attnlab.sakai import presets as sakai

    monkeypatch.setattr(sakai, "SEPARATE_REFERENCE_HEADS", 0)
    monkeypatch.setattr(sakai, "PAD_HEADS_BUDGET", 0)
    p = all_presets()["sakai-vary-heads"]
    cfg = resolve_config(p, quick=True, overrides={**TINY, "n_heads": [1, 3]})
    ds = p.run(cfg, jax.random.key(0))
    _, checks = p.summarize(ds, cfg)
    assert all(c.passed for c in checks), [c.as_dict() for c in checks if not c.passed]
    crit = sakai.dist.ks_critical(cfg.n_reference, sakai.REFERENCE_EXACT_FACTOR * cfg.n_reference, 1e-3)
    np.testing.assert_allclose(ds.reference_crit.values, crit)
    np.testing.assert_array_equal(ds.reference_ks.values, p.run(cfg, jax.random.key(0)).reference_ks.values)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sakai-vary-heads", "sakai-scores"])
def test_presets_without_the_native_kernel(monkeypatch, name):
    """Where the C kernels are not available (another backend, no compiler, ``ATTNLAB_NATIVE=0``) every draw, the
    brute-force reference and the distances take their JAX/NumPy paths, and the checks still pass; here with two H
    and each H's own reference program (``REFERENCE_PAD_NORMALS = 0``)."""
    from attnlab.sakai import native
    from attnlab.sakai import presets as sakai

    monkeypatch.setattr(native, "available", lambda: False)
    monkeypatch.setattr(sakai, "REFERENCE_PAD_NORMALS", 0)
    calls = []
    monkeypatch.setattr(native, "_KERNEL", type("Dead", (), {"require": lambda self: calls.append(1)})())
    p = all_presets()[name]
    extra = {**TINY, "n_heads": [1, 3]} if name != "sakai-scores" else {"n_samples": 2000, "n_reference": 300}
    cfg = resolve_config(p, quick=True, overrides=extra)
    ds = p.run(cfg, jax.random.key(0))
    _, checks = p.summarize(ds, cfg)
    assert checks and all(c.passed for c in checks), [c.as_dict() for c in checks if not c.passed]
    assert not calls  # the C kernel was never asked for


def test_reference_check_beyond_the_kernels_token_limit():
    """s = 17 tokens (beyond the C kernels' 16): the brute-force reference and the exact draws take the JAX paths
    and the check still runs and passes."""
    from attnlab.sakai import presets as sakai

    cfg = sakai.SakaiConfig(n_tokens=17, width=(8,), reference_width=4, n_reference=200)
    y, _ = sakai.sample_first_token_sweep(jax.random.key(1), widths=(4,), n_heads=2, n_tokens=17, n_samples=2000)
    impl = sakai.implementations(cfg)
    assert impl["sampler"] == impl["reference"] == "jax"  # auto resolves to the JAX paths beyond 16 tokens
    out = sakai._reference_check(jax.random.key(0), cfg, 2, None, np.asarray(y).ravel(), 2, impl)
    assert out["ks"] < out["crit"]
    from attnlab.errors import AttnlabError

    with pytest.raises(AttnlabError, match="n_tokens <= 16"):
        sakai.implementations(cfg.model_copy(update={"implementation": "native"}))


def test_progress_advances_through_the_run():
    """The progress callback moves through the run's stages (draws and reference per H, KDE, KS/W1, one bootstrap
    per configuration) instead of jumping from 0 to the end."""
    calls = []
    p = all_presets()["sakai-vary-width"]
    cfg = resolve_config(p, quick=True, overrides=TINY)
    with runtime.x64():
        p.run(cfg, jax.random.key(0), lambda done, total: calls.append((done, total)))
    done = [d for d, _ in calls]
    assert len(set(done)) >= 5 and done == sorted(done) and calls[-1][0] == calls[-1][1]


@pytest.mark.parametrize("name, dims", [("sakai-vary-width", {"heads": 1, "width": 4}),
                                        ("sakai-low-rank", {"heads": 3})])
def test_swept_quantity_is_the_dimension(name, dims, quick_run):
    """The finite-width results lie on their swept quantities, (heads, width) at full rank and heads at low rank
    (where the width n = H n_H is a coordinate along the heads), not on an index of configurations; the figures keep
    the conventions (mathtext labels, labelled axes). The session's shared quick runs."""
    from conventions import preset_problems

    run = quick_run(name)
    p, cfg, ds = run.preset, run.config, run.data
    assert dict(ds.ks_pooled.sizes) == dims
    assert ds.width.attrs["units"] == "1" and ds.width.attrs["long_name"]
    if name == "sakai-low-rank":
        assert ds.width.dims == ("heads",) and list(ds.width.values) == [64, 256, 1024]
    else:
        assert list(ds.width.values) == list(cfg.width)
    problems = preset_problems(p, ds, cfg)
    assert not problems, problems


def test_the_score_probe_refuses_the_fields_it_does_not_read():
    from attnlab.errors import AttnlabError

    with pytest.raises(AttnlabError, match="^sakai-scores does not use the config field 'n_heads'"):
        resolve_config("sakai-scores", quick=True, overrides={"n_heads": [4]})
    for field in ("head_width", "n_boot", "kde_points"):
        with pytest.raises(AttnlabError, match=f"'{field}'"):
            resolve_config("sakai-scores", quick=True, overrides={field: 64})
    with pytest.raises(AttnlabError, match="scores probes one width"):
        resolve_config("sakai-scores", quick=True, overrides={"width": [16, 256]})
    assert resolve_config("sakai-vary-width", quick=True, overrides={"n_heads": [4]}).n_heads == (4,)


@pytest.mark.parametrize("field, value, match", [
    ("ridge", 1e-300, "ridge must be >= 1e-08"),
    ("learning_rate", 1e308, "less than or equal to 2"),
])
def test_kernel_regression_refuses_meaningless_ridges_and_steps(field, value, match):
    from attnlab.errors import AttnlabError

    with pytest.raises(AttnlabError, match=match):
        resolve_config("sakai-kernel-regression", quick=True, overrides={field: value})


def test_the_stack_is_drawn_until_its_checks_control_is_resolved(quick_run):
    """sakai-kernel draws the stack in rounds of n_stack until the control of both stack checks (the joint law at
    H = 1) lies STACK_RESOLVED combined SEs away, at most stack_rounds: then the control is rejected by construction.
    At the quick size and seed 0 (the session's shared quick run) one round leaves it closer, so more rounds are
    drawn."""
    from attnlab.sakai.kernel_presets import STACK_RESOLVED, Z_TOL

    run = quick_run("sakai-kernel")
    n_stack, rounds = run.config.n_stack, run.config.stack_rounds
    draws = int(run.data.stack_draws.values[0])
    stack = [c for c in run.checks if "stack" in c.name]
    assert len(stack) == 2 and draws % n_stack == 0 and n_stack < draws < rounds * n_stack, draws
    assert all(c.control_error >= STACK_RESOLVED / Z_TOL * c.tolerance * (1 - 1e-12) for c in stack)
    assert all(c.control_rejected and c.passed for c in stack)
