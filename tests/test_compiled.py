"""attnlab.compiled: compiled programs are dropped once the process nears the kernel's limit on memory mappings."""

import jax

import attnlab.compiled as compiled


def test_programs_are_dropped_past_the_threshold_only(monkeypatch):
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(compiled, "max_mappings", lambda: 1000)
    monkeypatch.setattr(compiled, "mapping_count", lambda: 400)
    assert not compiled.release_compiled_programs() and not cleared  # 400 of 1000: below half
    assert compiled.release_compiled_programs(force=True) and len(cleared) == 1
    monkeypatch.setattr(compiled, "mapping_count", lambda: 600)
    assert compiled.release_compiled_programs() and len(cleared) == 2
    assert not compiled.release_compiled_programs(fraction=0.7) and len(cleared) == 2
    monkeypatch.setattr(compiled, "mapping_count", lambda: None)  # not Linux: nothing to measure, nothing dropped
    assert not compiled.release_compiled_programs() and len(cleared) == 2


def test_this_process_reports_its_mappings_and_the_limit():
    n = compiled.mapping_count()
    assert n is None or 10 < n < compiled.max_mappings()
    assert compiled.max_mappings() >= 1000


def test_every_preset_run_first_checks_the_mappings(tmp_path, monkeypatch):
    import xarray as xr

    import attnlab.store as store
    from attnlab.config import ExperimentConfig
    from attnlab.presets import Preset

    calls = []
    monkeypatch.setattr(store, "release_compiled_programs", lambda: calls.append("release"))

    def run(config, key, progress=None):
        calls.append("run")
        return xr.Dataset({"x": ("i", [1.0, 2.0])})

    preset = Preset("tiny", "none", "none", "-", "a preset of one array", ExperimentConfig, run,
                    lambda ds, cfg: ({}, []), lambda ds, cfg: {})
    store.run_preset(preset, ExperimentConfig(), 0, quick=True, out_dir=tmp_path / "run")
    assert calls == ["release", "run"]
