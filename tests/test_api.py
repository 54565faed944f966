"""The public Python API: attnlab.run / attnlab.presets, the one config resolver, and the recorded implementation of
every job with a C kernel and a JAX path (both exercised here, so neither can rot)."""

import json

import pytest
import xarray as xr

import attnlab
from app.common import TINY_KWARGS  # the command-line tests' tiny config: its programs are shared
from attnlab import native, registry
from attnlab.errors import AttnlabError

SAKAI_TINY = {"width": [16], "n_samples": 400, "n_seeds": 1, "n_reference": 100, "n_boot": 10, "kde_points": 50}
BRUNO_TINY = {"n_tokens": 60, "t_end": 0.5, "times": [0.25, 0.5], "kernel_dtype": "float32"}


def test_presets_lists_every_paper():
    names = attnlab.presets()
    assert {n.split("-")[0] for n in names} >= set(registry.PAPERS)  # and any installed plugin's
    assert all(isinstance(p, attnlab.Preset) for p in names.values())


def test_resolve_config_merges_defaults_quick_and_overrides_once():
    p = registry.get_preset("marion-sgd")
    full, quick = registry.resolve_config(p), registry.resolve_config(p, quick=True)
    for k, v in p.quick.items():
        assert getattr(quick, k) == (tuple(v) if isinstance(v, list) else v)
    assert full != quick
    assert registry.resolve_config("marion-sgd", quick=True, overrides={"n_repeats": 3}).n_repeats == 3
    with pytest.raises(AttnlabError, match="unknown config key"):
        registry.resolve_config(p, overrides={"nope": 1})


def test_run_returns_the_dataset_and_writes_nothing_without_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = attnlab.run("marion-manifold", quick=True, **TINY_KWARGS)
    assert isinstance(r.data, xr.Dataset) and r.run_dir is None and r.metrics and r.checks
    assert all(isinstance(c, attnlab.Check) for c in r.checks)
    assert list(tmp_path.iterdir()) == []
    assert set(r.figures) and all(hasattr(f, "savefig") for f in r.figures.values())


def test_run_with_out_writes_and_reuses(tmp_path):
    r = attnlab.run("sakai-vary-width", quick=True, out=tmp_path / "run", **SAKAI_TINY)
    assert r.run_dir == tmp_path / "run" and isinstance(r.data, xr.Dataset)
    again = attnlab.run("sakai-vary-width", quick=True, out=tmp_path / "run", **SAKAI_TINY)
    assert json.dumps(again.metrics) == json.dumps(r.metrics)  # NaN-safe: the finished run was reused


def _recorded(run_dir):
    cfg = json.loads((run_dir / "config.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert cfg["implementations"] == summary["implementations"]
    return cfg["implementations"]


def _none_failed(run):
    """No check failed (at these tiny sizes a check may be inconclusive: its control lies within the tolerance)."""
    return run.checks and all(c.status in ("passed", "inconclusive") for c in run.checks)


@pytest.mark.parametrize("preset, tiny, jobs", [
    ("sakai-vary-width", SAKAI_TINY, {"sampler", "reference", "distances"}),
    ("bruno-alignment", BRUNO_TINY, {"attention"}),
])
@pytest.mark.slow
def test_each_job_records_its_implementation_and_jax_is_forced_on_request(tmp_path, preset, tiny, jobs):
    auto = attnlab.run(preset, quick=True, out=tmp_path / "auto", **tiny)
    recorded = _recorded(tmp_path / "auto")
    kernels = {job: impl for job, impl in recorded.items() if not job.endswith("_vector_bits")}  # C builds' widths
    assert set(kernels) == jobs and recorded == auto.implementations
    forced = attnlab.run(preset, quick=True, out=tmp_path / "jax", implementation="jax", **tiny)
    assert set(_recorded(tmp_path / "jax").values()) == {"jax"} and _none_failed(forced)
    if set(kernels.values()) == {"native"}:  # this machine has the kernels: both paths ran, neither fails a check
        assert _none_failed(auto)
        assert attnlab.run(preset, quick=True, implementation="native", **tiny).implementations == recorded


def test_native_disabled_resolves_auto_to_jax_and_refuses_native(monkeypatch):
    monkeypatch.setenv("ATTNLAB_NATIVE", "0")
    try:
        for preset, tiny in (("sakai-scores", {"n_samples": 200, "n_seeds": 1, "n_reference": 50}),
                             ("bruno-alignment", BRUNO_TINY)):
            p = registry.get_preset(preset)
            cfg = registry.resolve_config(p, quick=True, overrides=tiny)
            assert set(p.implementations(cfg).values()) == {"jax"}
            with pytest.raises(AttnlabError, match="ATTNLAB_NATIVE=0"):
                p.implementations(registry.resolve_config(p, quick=True, overrides={**tiny,
                                                                                  "implementation": "native"}))
    finally:
        monkeypatch.delenv("ATTNLAB_NATIVE")


def test_choose():
    assert native.choose("auto", True, "x") == "native" and native.choose("auto", False, "x") == "jax"
    assert native.choose("jax", True, "x") == "jax"
    with pytest.raises(AttnlabError, match="needs d <= 8"):
        native.choose("native", False, "d <= 8")
    with pytest.raises(AttnlabError, match="unknown implementation"):
        native.choose("xla", True, "x")
