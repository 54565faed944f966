"""Bad input and faults at the command line: nothing the user owns is deleted, every bad input is one line and exit
status 2 before anything runs (seed range, output path, memory), non-finite input is invalid and non-finite results
are never committed, and report.md keeps its table rows whole."""

import dataclasses
import json
import math
import re
from pathlib import Path

import pytest

import attnlab.registry as registry
from attnlab.app.cli import main
from attnlab.app.report import write_report
from attnlab.app.resources import estimate
from attnlab.app.store import RunResult
from attnlab.registry import PAPERS, Check, all_presets, resolve_config

from .common import TINY, one_error_line


@pytest.fixture
def no_simulation(monkeypatch):
    """The marion presets, with a run that fails the test if reached: the inputs below must be refused before."""
    def never(*args, **kwargs):
        raise AssertionError("the simulation started")

    for name, p in all_presets().items():
        if p.paper == "marion":
            monkeypatch.setitem(registry._REGISTRY, name, dataclasses.replace(p, run=never))


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else "" for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("force", [False, True])
def test_force_never_replaces_a_directory_that_is_not_a_run(tmp_path, monkeypatch, capsys, no_simulation, force):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("my notes")
    (tmp_path / "half").mkdir()  # looks like a run, but has no config_hash: not one of attnlab's
    (tmp_path / "half" / "summary.json").write_text("{}")
    (tmp_path / "half" / "config.json").write_text('{"seed": 0}')
    before = _tree(tmp_path)
    for out in ("mine", "half"):
        argv = ["run", "marion-manifold", "--quick", "--out", out, *TINY] + (["--force"] if force else [])
        assert main(argv) == 2
        line = one_error_line(capsys)
        assert "not a finished attnlab run" in line and "--force" not in line, line
    assert _tree(tmp_path) == before


def test_a_finished_run_of_another_config_needs_force(tmp_path, monkeypatch, capsys, no_simulation):
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "old"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"config_hash": "0123456789"}))
    (run / "summary.json").write_text("{}")
    assert main(["run", "marion-manifold", "--quick", "--out", "old", *TINY]) == 2
    assert "use --force to replace the files attnlab wrote" in one_error_line(capsys)


@pytest.mark.parametrize("seed", ["9223372036854775808", "18446744073709551616", str(10**40)])
def test_seed_beyond_64_bits_is_one_line(tmp_path, monkeypatch, capsys, seed):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--seed", seed, *TINY]) == 2
    assert "seed" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", [".", "", "..", "sub/.."])
def test_out_the_current_directory_is_refused_before_running(tmp_path, monkeypatch, capsys, no_simulation, out):
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--out", out, *TINY]) == 2
    assert "current directory" in one_error_line(capsys)
    assert [p.name for p in tmp_path.iterdir()] == ["sub"]


@pytest.mark.parametrize("command", [["reproduce", "marion"], ["sweep", "marion-manifold"]])
def test_out_an_existing_file_is_one_line(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("x")
    assert main([*command, "--quick", "--out", "a-file"]) == 2
    assert "not a directory" in one_error_line(capsys)
    assert _tree(tmp_path) == {"a-file": "x"}


def test_a_config_too_large_for_memory_is_refused_with_the_estimate(tmp_path, monkeypatch, capsys, no_simulation):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--set", "d=1000000000"]) == 2
    line = one_error_line(capsys)
    # the estimate in binary units (TiB or more: the marion quick sizes set the other dimensions)
    assert "memory" in line and re.search(r"needs about [\d.]+ [TPE]iB", line), line
    assert list(tmp_path.iterdir()) == []
    # sweeps and reproduce check every task's config before starting Dask
    assert main(["sweep", "marion-manifold", "--quick", "--grid", "d=10,1000000000"]) == 2
    assert "needs about" in one_error_line(capsys)
    monkeypatch.setattr("attnlab.app.resources.available_bytes", lambda: 1000.0)
    assert main(["reproduce", "marion", "--quick"]) == 2
    assert "needs about" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_every_preset_has_a_memory_estimate_that_fits_a_laptop():
    """Each paper's memory.memory_bytes gives every preset a finite positive estimate; the defaults and the quick
    sizes fit in 8 GiB (the check must not refuse the presets themselves), and it grows with the sizes."""
    for name, p in all_presets().items():
        if p.paper not in PAPERS:  # a plugin's estimate is optional (attnlab.extend)
            continue
        for quick in (False, True):
            need = estimate(p, resolve_config(p, quick=quick))
            assert need is not None and math.isfinite(need) and 0 < need < 8 * 2**30, (name, quick, need)
    p = all_presets()["marion-manifold"]
    assert estimate(p, resolve_config(p, overrides={"d": 10**9})) > 2**50


@pytest.mark.parametrize("value, fragment", [("inf", "finite"), ("Infinity", "finite"), ("-Infinity", "step_size"),
                                             ("nan", "step_size"), ("NaN", "step_size"), ("true", "boolean")])
def test_non_finite_and_boolean_numbers_are_invalid(tmp_path, monkeypatch, capsys, no_simulation, value, fragment):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--set", f"step_size={value}", *TINY]) == 2
    line = one_error_line(capsys)
    assert "'step_size'" in line and fragment in line, line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", ["true", "false"])
def test_booleans_are_not_integers(tmp_path, monkeypatch, capsys, no_simulation, value):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--set", f"n_steps={value}"]) == 2
    assert "'n_steps'" in one_error_line(capsys)


def test_a_run_whose_results_overflow_is_not_committed(tmp_path, monkeypatch, capsys):
    """step_size = 1e300 is finite and valid, but the iterates overflow: exit 1, one line, nothing written."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--no-figures", "--set", "step_size=1e300", *TINY]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "not finite" in errors[0] and "check '" in errors[0], err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("theory, simulation", [(1.0, math.nan), (math.inf, 1.0)])
def test_non_finite_checks_stop_the_commit(tmp_path, monkeypatch, capsys, theory, simulation):
    monkeypatch.chdir(tmp_path)
    p = all_presets()["marion-manifold"]

    def summarize(ds, cfg):
        metrics, checks = p.summarize(ds, cfg)
        bad = Check("a | b", theory, simulation, 1.0)
        return metrics, [Check.not_evaluated("skipped", "too few repeats"), *checks, bad]

    monkeypatch.setitem(registry._REGISTRY, p.name, dataclasses.replace(p, summarize=summarize))
    assert main(["run", "marion-manifold", "--quick", "--no-figures", *TINY]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "check 'a | b'" in errors[0] and "not finite" in errors[0], err
    assert list(tmp_path.iterdir()) == []  # neither the run, its temporary directory, nor results/


def test_report_md_escapes_pipes_in_table_cells(tmp_path):
    p = all_presets()["marion-manifold"]
    checks = [Check("|kappa| > 0.9 | nu", 1.0, 1.0, 0.5, basis="5 SE | bound").as_dict()]
    summary = {"checks": checks, "metrics": {"a|b": 1.0}, "figures": [], "elapsed_s": 1.0}
    md = write_report(tmp_path, {p.name: RunResult(tmp_path / "run", summary, False)}, {p.name: p}).read_text()
    rows = [ln for ln in md.splitlines() if ln.startswith("|") and "kappa" in ln or "a\\|b" in ln]
    assert len(rows) == 3, md
    for row in rows:
        cells = row.replace("\\|", "").strip("|").split("|")
        assert len(cells) in (2, 8, 10), row  # metrics; the summary of every check; the preset's checks


def test_show_prints_every_value_in_the_form_set_takes():
    """What ``attnlab show`` prints as a field's default and quick value, given back to ``--set``, is that value
    (lists of names were printed as ``[gaussian, planted]``, which ``--set`` refuses)."""
    from attnlab.app.describe import config_fields
    from attnlab.config import parse_set
    from attnlab.registry import resolve_config

    for name, preset in all_presets().items():
        unused = set(preset.unused)
        for quick in (False, True):
            config = resolve_config(preset, quick=quick)
            for f in config_fields(preset):
                if f.name in unused:
                    continue
                text = f.quick if quick else f.default
                again = resolve_config(preset, quick=quick, overrides=parse_set([f"{f.name}={text}"]))
                assert getattr(again, f.name) == getattr(config, f.name), (name, f.name, text)
