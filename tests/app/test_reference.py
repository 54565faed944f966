"""The small things users expect at the command line: ``--version``, ``-h``, ``show``, ``runs``, ``plot``, and
output that fits the width it is given (``COLUMNS``, else 100 columns when piped)."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest

import attnlab
from attnlab.app.cli import app, main
from attnlab.app.ownership import MANIFEST
from attnlab.errors import AttnlabError
from attnlab.registry import all_presets, resolve_config

from .common import TINY, one_error_line

COMMANDS = ["list", "show", "run", "reproduce", "sweep", "runs", "plot", "new"]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# --- --version and -h -------------------------------------------------------------------------------------------

def test_version(capsys):
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"attnlab \d+\.\d+\.\d+\S*\n", out), out
    assert out.split()[1] == attnlab.__version__
    from importlib import metadata

    assert metadata.version("attnlab") == attnlab.__version__  # pyproject.toml takes it from there


def test_every_command_is_registered():
    import typer

    names = set(typer.main.get_command(app).commands)
    assert names == set(COMMANDS)


@pytest.mark.parametrize("command", [[], *([c] for c in COMMANDS)])
def test_dash_h_is_help_like_double_dash_help(command, capsys):
    assert main([*command, "--help"]) == 0
    long = capsys.readouterr().out
    assert main([*command, "-h"]) == 0
    short = capsys.readouterr().out
    assert "Usage" in long and short == long


# --- attnlab show -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("columns", ["200", "60"])
def test_show_lists_paper_figure_description_and_every_field(monkeypatch, capsys, columns):
    monkeypatch.setenv("COLUMNS", columns)
    from attnlab.app.describe import value_text

    for name in ("marion-manifold", "duranthon-population"):
        p = all_presets()[name]
        assert main(["show", name]) == 0
        out = capsys.readouterr().out
        flat = " ".join(out.replace("│", " ").split())
        for text in (p.citation, p.figure, p.description):
            assert " ".join(text.split()) in flat, text
        full, quick = resolve_config(p), resolve_config(p, quick=True)
        for field, info in type(full).model_fields.items():
            assert re.search(rf"(^|[\s│]){re.escape(field)}[\s(]", out, re.M), field
            for word in (info.description or "").split():
                assert word in out, (field, word)
            assert value_text(getattr(full, field)).split()[0] in out
            assert value_text(getattr(quick, field)).split()[0] in out
        assert max(len(line) for line in out.splitlines()) <= int(columns)


def test_show_rows_are_the_resolved_defaults_and_quick_values_of_every_preset():
    from attnlab.app.describe import config_fields, value_text

    for p in all_presets().values():
        full, quick = resolve_config(p), resolve_config(p, quick=True)
        rows = config_fields(p)
        assert [f.name for f in rows] == list(type(full).model_fields)
        for f in rows:
            info = type(full).model_fields[f.name]
            assert f.default == value_text(getattr(full, f.name)) and f.quick == value_text(getattr(quick, f.name))
            assert f.description == " ".join((info.description or "").split())
            assert f.type


def test_type_text():
    from typing import Literal

    import pydantic

    from attnlab.app.describe import type_text, value_text

    class C(pydantic.BaseModel):
        a: int = pydantic.Field(3, ge=2)
        b: float = pydantic.Field(1.0, gt=0)
        c: tuple[Literal["spiked", "max"], ...] = ("max",)
        d: int | None = None
        e: tuple[tuple[float, ...], ...] | None = None

    got = {k: type_text(f.annotation, f.metadata) for k, f in C.model_fields.items()}
    assert got == {"a": "int >= 2", "b": "float > 0", "c": "tuple['spiked' | 'max', ...]", "d": "int | None",
                   "e": "tuple[tuple[float, ...], ...] | None"}
    assert [value_text(v) for v in (math.inf, True, (1, 2.5), None, "pgd")] == ["inf", "true", "[1, 2.5]", "null",
                                                                                 "pgd"]


def test_show_unknown_preset_is_one_line_exit_2(capsys):
    assert main(["show", "no-such-preset"]) == 2
    assert "unknown preset" in one_error_line(capsys)


# --- a finished run to list and redraw --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished run of marion-manifold, without its figures."""
    root = tmp_path_factory.mktemp("runs")
    assert main(["run", "marion-manifold", "--quick", "--no-figures", "--out", str(root / "a" / "run1"), *TINY]) == 0
    return root / "a" / "run1"


# --- attnlab runs -----------------------------------------------------------------------------------------------

def _results_folder(tmp_path: Path, finished: Path) -> Path:
    """A results folder: the finished run, a copy with a check not evaluated and full size and seed 7, a temporary
    directory, a directory that is not a run, and a half-written run."""
    root = tmp_path / "results"
    shutil.copytree(finished, root / "marion-manifold" / "aaa")
    other = root / "sweeps" / "s1" / "bbb"
    shutil.copytree(finished, other)
    s = json.loads((other / "summary.json").read_text())
    s["checks"][0].update(status="not evaluated", passed=False, reason="too few", control_rejected=None)
    s["checks"][1].update(status="failed", passed=False)
    s.update(seed=7, quick=False, elapsed_s=125.0)
    (other / "summary.json").write_text(json.dumps(s))
    shutil.copytree(finished, root / "marion-manifold" / ".ccc.tmp-1234")
    (root / "notes").mkdir()
    (root / "notes" / "summary.json").write_text("{}")
    (root / "half").mkdir()
    (root / "half" / "config.json").write_text('{"seed": 0}')
    (root / "half" / "summary.json").write_text("{}")
    return root


@pytest.mark.parametrize("columns", ["160", "100", "72", "40"])
def test_runs_lists_every_finished_run_once(tmp_path, monkeypatch, capsys, finished, columns):
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.chdir(tmp_path)
    root = _results_folder(tmp_path, finished).relative_to(tmp_path)
    assert main(["runs", str(root)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= int(columns)
    assert "2 finished runs" in out
    if int(columns) >= 72:  # a table: whole cells in the essential columns
        (row_a,) = [ln for ln in out.splitlines() if "quick" in ln]
        (row_b,) = [ln for ln in out.splitlines() if " full " in ln]
        assert re.search(r"\bmarion-manifold\b.*\b0\b.*\bquick\b.*\b3/3\b.*\bs\b", row_a), row_a
        assert re.search(r"\bmarion-manifold\b.*\b7\b.*\bfull\b.*1/2 \+1 n/e.*2\.1 min", row_b), row_b
    else:
        words = " ".join(out.split())
        assert "seed 0, quick, checks 3/3," in words and "seed 7, full, checks 1/2 +1 n/e, 2.1 min" in words
    flat = "".join(out.replace("│", "").split())
    assert str(root / "marion-manifold" / "aaa").replace(" ", "") in flat
    assert ".ccc" not in out and "notes" not in out and "half" not in out
    if int(columns) >= 160:
        assert "runs reach the oracle" in out  # the finding


def test_runs_default_folder_empty_and_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 2  # results/ does not exist
    assert "no such folder: results" in one_error_line(capsys)
    (tmp_path / "results").mkdir()
    assert main(["runs"]) == 0
    assert "no finished runs under results" in capsys.readouterr().out
    (tmp_path / "file").write_text("x")
    assert main(["runs", "file"]) == 2
    assert "not a folder" in one_error_line(capsys)


# --- attnlab plot -----------------------------------------------------------------------------------------------

def test_plot_redraws_the_figures_and_changes_nothing_else(tmp_path, capsys, finished):
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    before = _tree(run_dir)
    assert not any(name.endswith(".png") for name in before)
    assert main(["plot", str(run_dir)]) == 0
    after = _tree(run_dir)
    new = sorted(set(after) - set(before))
    assert new == ["marion-manifold-panels.pdf", "marion-manifold-panels.png"], new
    assert {k: after[k] for k in before} == before  # config.json, summary.json and data.zarr untouched
    assert after["marion-manifold-panels.png"].startswith(b"\x89PNG")
    assert after["marion-manifold-panels.pdf"].startswith(b"%PDF")
    assert "2 figure files written" in capsys.readouterr().out
    # again: the files are replaced, nothing is left behind
    assert main(["plot", str(run_dir)]) == 0
    assert {p.name for p in run_dir.iterdir()} == {"config.json", "summary.json", "data.zarr", MANIFEST, *new}


def test_plot_failure_leaves_the_old_figures_and_no_temporary(tmp_path, monkeypatch, capsys, finished):
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    assert main(["plot", str(run_dir)]) == 0
    before = _tree(run_dir)
    real = Path.write_bytes

    def half_then_fail(self, data):
        if self.suffix == ".pdf":
            real(self, b"partial")
            raise OSError(28, "No space left on device")
        return real(self, data)

    monkeypatch.setattr(Path, "write_bytes", half_then_fail)
    assert main(["plot", str(run_dir)]) == 2
    assert "No space left on device" in one_error_line(capsys)
    after = _tree(run_dir)
    assert set(after) == set(before)  # no temporary file left
    assert after["marion-manifold-panels.pdf"] == before["marion-manifold-panels.pdf"]


def test_plot_refuses_what_is_not_a_finished_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text('{"seed": 0}')
    (tmp_path / "half" / "summary.json").write_text("{}")
    before = _tree(tmp_path)
    for target, fragment in (("mine", "not a finished attnlab run"), ("half", "not a finished attnlab run"),
                             ("nowhere", "no such run directory")):
        assert main(["plot", target]) == 2
        assert fragment in one_error_line(capsys)
    assert _tree(tmp_path) == before


def _preset_with_an_infinite_default():
    for p in all_presets().values():
        config = resolve_config(p, quick=True)
        for name in type(config).model_fields:
            if getattr(config, name) == math.inf:
                return p, config, name
    pytest.skip("no preset has an infinite default")


def test_plot_reads_back_an_infinite_field(tmp_path):
    """config.json writes inf as null (strict JSON): a field that allows inf reads it back as inf."""
    from attnlab.app.describe import load_run_config

    p, config, field = _preset_with_an_infinite_default()
    record = {"preset": p.name, "config_hash": "0123456789",
              "config": {**config.model_dump(mode="json"), field: None}}
    (tmp_path / "config.json").write_text(json.dumps(record))
    (tmp_path / "summary.json").write_text("{}")
    preset, rebuilt, _ = load_run_config(tmp_path)
    assert preset is p and rebuilt == config and getattr(rebuilt, field) == math.inf
    record["config"][field] = "nope"
    (tmp_path / "config.json").write_text(json.dumps(record))
    with pytest.raises(AttnlabError, match=field):
        load_run_config(tmp_path)


# --- width ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("columns, expected", [(None, 100), ("70", 70), ("130", 130), ("junk", 100)])
def test_piped_output_fits_columns_else_100(monkeypatch, capsys, columns, expected):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    widths = [len(line) for line in out.splitlines()]
    assert max(widths) <= expected
    assert max(widths) >= min(expected, 90) - 10  # the table uses the width it is given
    for name in all_presets():  # the preset's name never folds
        assert re.search(rf"(^|│ ){re.escape(name)}(\s+│|$)", out, re.M), name


@pytest.mark.parametrize("columns", ["100", "60"])
def test_checks_table_fits_and_keeps_numbers_whole(tmp_path, monkeypatch, capsys, finished, columns):
    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "marion-manifold", "--quick", "--no-figures", "--out", str(finished), *TINY]) == 0  # reused
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= int(columns)
    summary = json.loads((finished / "summary.json").read_text())
    for c in summary["checks"]:
        for key in ("theory", "simulation", "abs_error", "tolerance"):
            assert f"{c[key]:.6g}" in out, (key, out)
