"""The command line and the result store: errors, atomic runs, reuse, reproduce and its report."""

import html
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import xarray as xr

from attnlab.app.cli import main
from attnlab.app.ownership import MANIFEST
from attnlab.registry import all_presets

from .common import TINY


def test_list_shows_every_preset(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    for name in all_presets():
        assert name in text


def test_get_preset_imports_only_its_paper_module():
    """A process that needs one preset (a Dask worker, ``attnlab run``) imports that paper's module only; unknown
    names still fail with the one-line error, and a name whose prefix is no paper module is looked up in all."""
    code = ("import sys; from attnlab.registry import get_preset; get_preset('marion-manifold'); "
            "print(sorted(m for m in sys.modules if m.endswith('.presets') and m.startswith('attnlab.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['attnlab.marion.presets']"
    from attnlab.errors import AttnlabError
    from attnlab.registry import get_preset

    for name in ("marion-nope", "nope"):
        with pytest.raises(AttnlabError, match="unknown preset"):
            get_preset(name)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "no-such-preset"], "unknown preset"),
        (["run", "marion-manifold", "--set", "nope=1"], "unknown config key"),
        (["run", "marion-manifold", "--set", "d=1"], "'d'"),
        (["run", "marion-manifold", "--set", "L=1"], "'L'"),
        (["run", "marion-manifold", "--set", "gamma=0"], "'gamma'"),
        (["run", "marion-manifold", "--set", "step_size=0"], "'step_size'"),
        (["run", "marion-manifold", "--set", "n_steps=0"], "'n_steps'"),
        (["run", "marion-manifold", "--set", "init=cube"], "'init'"),
        (["run", "marion-manifold", "--set", "log_every=7"], "log_every"),
        (["run", "marion-manifold", "--set", "d"], "malformed --set"),
        (["run", "marion-manifold", "--set", "=3"], "malformed --set"),
        (["run", "marion-manifold", "--bogus"], "No such option"),
        (["run", "marion-manifold", "--seed", "-1"], "seed"),
        (["reproduce", "no-such-paper"], "unknown paper"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, monkeypatch, capsys, argv, fragment):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], captured.err
    assert "Traceback" not in captured.err
    assert list(tmp_path.iterdir()) == []


def test_unwritable_output_is_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    assert main(["run", "marion-manifold", "--quick", "--out", "a-file/run", *TINY]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]


def test_run_writes_a_complete_directory_and_reuses_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", *TINY]) == 0
    (run_dir,) = (tmp_path / "results" / "marion-manifold").iterdir()
    assert len(run_dir.name) == 10
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.json", "summary.json", "data.zarr", "marion-manifold-panels.png",
            "marion-manifold-panels.pdf"} <= names
    summary = json.loads((run_dir / "summary.json").read_text())
    assert set(summary) >= {"preset", "elapsed_s", "metrics", "checks"}
    for m in ("final_abs_kappa_median", "final_abs_nu_median", "final_distance_to_manifold_max",
              "final_excess_risk_median", "oracle_risk", "fraction_reaching_oracle"):
        assert isinstance(summary["metrics"][m], float)
    for c in summary["checks"]:
        assert set(c) >= {"name", "theory", "simulation", "abs_error", "tolerance", "passed"}
    config = json.loads((run_dir / "config.json").read_text())
    assert config["seed"] == 0 and config["config"]["n_steps"] == 1000 and "jax" in config["versions"]
    ds = xr.open_zarr(run_dir / "data.zarr")
    assert ds.kappa.dims == ("step", "repeat") and "units" in ds.excess_risk.attrs
    mtime = (run_dir / "summary.json").stat().st_mtime_ns
    capsys.readouterr()
    assert main(["run", "marion-manifold", "--quick", *TINY]) == 0
    assert "reusing" in capsys.readouterr().err
    assert (run_dir / "summary.json").stat().st_mtime_ns == mtime
    assert main(["run", "marion-manifold", "--quick", "--force", *TINY]) == 0
    assert (run_dir / "summary.json").stat().st_mtime_ns != mtime
    # a different seed is a different run
    assert main(["run", "marion-manifold", "--quick", "--seed", "3", *TINY]) == 0
    assert len(list((tmp_path / "results" / "marion-manifold").iterdir())) == 2


def test_out_dir_holds_the_files_directly(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--out", "mine", "--no-figures", *TINY]) == 0
    assert (tmp_path / "mine" / "summary.json").is_file()
    # --no-figures: data, summary and config only
    assert {p.name for p in (tmp_path / "mine").iterdir()} == {"config.json", "summary.json", "data.zarr", MANIFEST}
    assert json.loads((tmp_path / "mine" / "summary.json").read_text())["figures"] == []
    assert not (tmp_path / "results").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


def test_interrupted_run_leaves_nothing_that_looks_finished(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    import dataclasses

    import attnlab.registry as registry

    preset = all_presets()["marion-manifold"]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setitem(registry._REGISTRY, preset.name, dataclasses.replace(preset, run=interrupted))
    assert main(["run", "marion-manifold", "--quick", "--out", "out", *TINY]) == 130
    assert not (tmp_path / "out").exists()
    leftovers = [p for p in tmp_path.rglob("*")]
    assert leftovers == []


def test_a_swallowed_ctrl_c_still_stops_the_commit(tmp_path, monkeypatch):
    """SIGINT whose KeyboardInterrupt is lost (as when it lands in a __del__): the run is still not committed."""
    monkeypatch.chdir(tmp_path)
    import dataclasses

    import attnlab.registry as registry

    preset = all_presets()["marion-manifold"]

    def swallowed(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)  # the handler runs here
        except KeyboardInterrupt:
            pass  # what "Exception ignored in __del__" amounts to
        return preset.run(*args, **kwargs)

    monkeypatch.setitem(registry._REGISTRY, preset.name, dataclasses.replace(preset, run=swallowed))
    # Python's own Ctrl-C handler, as in an interactive shell (a test runner may run with SIGINT ignored)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        assert main(["run", "marion-manifold", "--quick", "--out", "out", *TINY]) == 130
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the CLI put it back
    finally:
        signal.signal(signal.SIGINT, before)
    assert list(tmp_path.iterdir()) == []


def test_sigint_to_a_running_process(tmp_path):
    """A real Ctrl-C (SIGINT) in the middle of a run: exit status 130, no run directory, no temp directory."""
    # Ctrl-C handled as in an interactive shell: a child inherits "ignored" from a test runner started as a
    # background job, and then (rightly) ignores SIGINT, so the child sets Python's handler before the CLI starts
    start = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "sys.argv[0] = 'attnlab'; runpy.run_module('attnlab.app.cli', run_name='__main__')")
    proc = subprocess.Popen([sys.executable, "-c", start, "run", "marion-sgd", "--quick", "--set",
                             "n_steps=200000", "--out", "out"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"})
    deadline = time.time() + 60
    def started():
        return any(p.name.startswith(".out.attnlab-tmp-") for p in tmp_path.iterdir())
    while time.time() < deadline and not started():
        time.sleep(0.2)
    assert started(), "the run did not start within a minute"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)  # the interrupt lands when the current compiled segment returns
    assert proc.returncode == 130, stderr.decode()[-3000:]
    assert list(tmp_path.iterdir()) == []


def test_a_run_command_exits_with_its_status_and_everything_written(tmp_path):
    """``attnlab run`` skips the interpreter's finalisation (:func:`attnlab.app.cli._exit`): the run is whole on
    disk, the report fully printed through a pipe, and the exit status kept; the same hard exit after buffered output
    and a non-zero status (control: nothing written unflushed is lost, the status is not reset to 0)."""
    start = "import sys; sys.argv[0] = 'attnlab'; from attnlab.app.cli import console_main; console_main()"
    res = subprocess.run([sys.executable, "-c", start, "run", "marion-manifold", "--quick", *TINY, "--out", "out"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["checks"] and all(c["passed"] for c in summary["checks"])
    report = res.stdout.rstrip()  # a pipe: one block per check, the last line its verdict
    assert report.count("pass yes") == len(summary["checks"]) and report.endswith("pass yes"), report[-2000:]
    with xr.open_zarr(tmp_path / "out" / "data.zarr") as ds:
        assert ds.sizes["repeat"] == 2
    assert (tmp_path / "out" / "marion-manifold-panels.pdf").stat().st_size > 0
    code = ("import sys; from attnlab.app import cli; cli._computed_here = True; "
            "sys.stdout.write('buffered'); sys.stderr.write('unflushed'); cli._exit(3)")
    buffered = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe's stdout: block-buffered
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=buffered)
    assert (res.returncode, res.stdout, res.stderr) == (3, "buffered", "unflushed")


PAPER = "bruno"  # the cheapest paper at quick size: the conformance test runs every preset of every paper


def _paper():
    return {name: p for name, p in all_presets().items() if p.paper == PAPER}


@pytest.fixture(scope="module")
def reproduced(tmp_path_factory):
    """One paper's presets at quick size through reproduce (tests/test_conformance.py runs every preset; ``make demo``
    reproduces them all)."""
    out = tmp_path_factory.mktemp("repro")
    rc = main(["reproduce", PAPER, "--quick", "--out", str(out)])
    return rc, out


def test_reproduce_quick_runs_every_preset_and_writes_the_report(reproduced):
    rc, out = reproduced
    assert rc == 0  # every check of every preset passed
    report = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    presets = _paper()
    for name in presets:
        (run_dir,) = (out / name).iterdir()
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["checks"], name
        assert f"## {name}" in report
        for c in summary["checks"]:
            assert c["name"].replace("|", "\\|") in report
            assert html.escape(c["name"]) in page
        assert f"<h2 id='{name}'>" in page
        assert any(f.endswith(".png") and f in report for f in summary["figures"])


def test_reproduce_again_reuses_finished_runs(reproduced, capsys, monkeypatch):
    """Every run finished: reproduce reuses them without starting a cluster (one would fail here), keeps the
    user's files and rewrites its report."""
    from attnlab.app import sweep as engine

    rc, out = reproduced

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(engine, "make_client", no_cluster)
    run_dir = next(p for p in (out / next(iter(_paper()))).iterdir() if not p.name.startswith("."))
    mine = {out / "notes.md": "beside the report", run_dir / "notes.md": "inside a run",
            out / "figs" / ".cache.tmp-keep" / "f": "a hidden cache"}
    for path, text in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    t0 = time.perf_counter()
    assert main(["reproduce", PAPER, "--quick", "--out", str(out)]) == 0
    assert time.perf_counter() - t0 < 30
    assert capsys.readouterr().err.count("reusing") == len(_paper())
    assert all(path.read_text() == text for path, text in mine.items())
    assert "written by attnlab" in (out / "report.md").read_text()


def test_module_entry_point_exists():
    assert Path(sys.modules["attnlab.app.cli"].__file__).name == "cli.py"
