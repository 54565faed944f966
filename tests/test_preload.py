"""attnlab.preload: programs a run found in the compilation cache are loaded ahead on its next run, the run receives
exactly what JAX's lookup would return, and JAX's lookup is put back on exit."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import base64, json, os, sys
    cores = sorted(set(os.sched_getaffinity(0)) | set(range(min(os.cpu_count() or 1, 2))))
    os.sched_setaffinity(0, set(cores[:1] if sys.argv[1] == "one" else cores))
    import jax, jax.numpy as jnp
    import numpy as np
    from jax._src import compilation_cache as cc
    from attnlab import preload, runtime

    JAX_LOOKUP = cc.get_executable_and_time
    x = jnp.linspace(0.0, 1.0, 64)

    def step(x):  # three programs: two jitted functions and a jitted composition
        f = jax.jit(lambda v: jnp.sin(v) @ jnp.cos(v) + v.sum())
        g = jax.jit(lambda v: jnp.cumsum(jnp.exp(-v * v)))
        h = jax.jit(lambda v: jnp.sort(v[::-1]) * 3.0)
        return [np.asarray(f(x)), np.asarray(g(x)), np.asarray(h(x))]

    def run(name="t"):
        jax.clear_caches()
        with preload.ahead(name, "{}") as loader:
            values = step(x)
        assert cc.get_executable_and_time is JAX_LOOKUP
        return values, None if loader is None else loader.served

    report = {}
    with runtime.configured():
        manifest = preload.manifest_path("t", "{}")
        first, report["first"] = run()
        report["recorded"] = len(preload.read_manifest(manifest)) if manifest else 0
        second, report["second"] = run()
        report["same"] = all(np.array_equal(a, b) for a, b in zip(first, second))
        # control: the recorded compile options are not the run's; nothing is served, and the manifest is corrected
        requests = preload.read_manifest(manifest) if manifest else []
        if requests:
            other = jax._src.lib.xla_client.CompileOptions()
            other.num_replicas = 1
            other.num_partitions = 1
            wrong = [(k, other.SerializeAsString() + b"\\x08\\x07", d) for k, o, d in requests]
            preload.write_manifest(manifest, wrong)
            values, report["wrong_options"] = run()
            report["same_wrong_options"] = all(np.array_equal(a, b) for a, b in zip(first, values))
            report["corrected"] = preload.read_manifest(manifest) == requests
            manifest.write_text("{not json")
            values, report["corrupt"] = run()
            report["same_corrupt"] = all(np.array_equal(a, b) for a, b in zip(first, values))
            # a block that raises writes nothing
            gone = preload.manifest_path("raises", "{}")
            try:
                with preload.ahead("raises", "{}"):
                    step(x)
                    raise RuntimeError("stop")
            except RuntimeError:
                pass
            report["raised_wrote"] = gone.exists()
            report["restored_after_raise"] = cc.get_executable_and_time is JAX_LOOKUP
    print(json.dumps(report))
""")


def _child(tmp_path, cores, **env):
    environment = {**os.environ, "ATTNLAB_JAX_CACHE": str(tmp_path / "cache"), **env}
    out = subprocess.run([sys.executable, "-c", CHILD, cores], env=environment, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_two_cores = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2,
                                     reason="loading ahead needs a process that may run on two cores")


@needs_two_cores
def test_a_later_run_receives_the_recorded_programs_loaded_ahead_with_identical_results(tmp_path):
    """The first run records its three programs and receives none; the second receives all three, with bit-identical
    values. Controls: a manifest whose compile options are not the run's, or that is not JSON, serves nothing (the
    values are still identical, and the wrong manifest is rewritten with the run's requests); a block that raises
    writes no manifest; JAX's lookup is JAX's own after every block."""
    report = _child(tmp_path, "two")
    assert report["first"] is None and report["recorded"] == 3
    assert report["second"] == 3 and report["same"]
    assert report["wrong_options"] == 0 and report["same_wrong_options"] and report["corrected"]
    assert report["corrupt"] is None and report["same_corrupt"]
    assert not report["raised_wrote"] and report["restored_after_raise"]


@needs_two_cores
def test_nothing_is_loaded_ahead_on_one_core_or_when_switched_off(tmp_path):
    """A process that may run on one core only records and loads nothing; nor does one with ATTNLAB_PRELOAD=off (the
    control, two cores and the switch on, is the test above)."""
    for cores, env in (("one", {}), ("two", {"ATTNLAB_PRELOAD": "off"})):
        report = _child(tmp_path / cores, cores, **env)
        assert report["first"] is None and report["second"] is None and report["recorded"] == 0 and report["same"]


def test_api_execute_runs_the_preset_inside_preload_ahead_keyed_by_its_name_and_config(monkeypatch):
    """attnlab.api.execute (behind attnlab.run, the command line, the sweeps and plugins) runs and summarises a
    preset inside preload.ahead, keyed by the preset's name and its config's JSON; the control, the same preset under
    another config, gives another key."""
    import contextlib
    import dataclasses

    import xarray as xr

    from attnlab import api, preload, registry

    inside, seen = [], []

    @contextlib.contextmanager
    def spy(name, config_json):
        seen.append((name, config_json))
        inside.append(True)
        yield None
        inside.append(False)

    def run(config, key, progress=None):
        assert inside[-1]
        return xr.Dataset({"x": ("i", [1.0, 2.0])})

    def summarize(ds, config):
        assert inside[-1]
        return {}, []

    monkeypatch.setattr(preload, "ahead", spy)
    preset = dataclasses.replace(registry.get_preset("marion-manifold"), run=run, summarize=summarize, finding=None)
    for overrides in ({}, {"d": 200}):
        config = registry.resolve_config(preset, quick=True, overrides=overrides)
        api.execute(preset, config, 0)
        assert seen[-1] == (preset.name, config.model_dump_json()) and inside[-1] is False
    assert seen[0] != seen[1]


def test_a_manifest_reads_back_as_written_and_the_folder_keeps_the_last_written(tmp_path, monkeypatch):
    """write_manifest then read_manifest gives the requests back, in order, with shared compile options stored once;
    past MAX_MANIFESTS the oldest manifests are removed (the control: at the limit none is)."""
    from attnlab import preload

    requests = [("k1", b"opts-a", (0,)), ("k2", b"opts-b", (0, 1)), ("k3", b"opts-a", (0,))]
    preload.write_manifest(tmp_path / "m.json", requests)
    assert preload.read_manifest(tmp_path / "m.json") == requests
    assert len(json.loads((tmp_path / "m.json").read_text())["options"]) == 2
    monkeypatch.setattr(preload, "MAX_MANIFESTS", 3)
    folder = tmp_path / "many"
    for i in range(3):
        preload.write_manifest(folder / f"{i}.json", requests)
        os.utime(folder / f"{i}.json", (i, i))
    assert sorted(p.name for p in folder.glob("*.json")) == ["0.json", "1.json", "2.json"]
    preload.write_manifest(folder / "3.json", requests)
    assert sorted(p.name for p in folder.glob("*.json")) == ["1.json", "2.json", "3.json"]
