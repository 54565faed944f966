"""tools/preset_table.py: the README's table of presets and the reproduction's task order come from the same runs."""

import ast
import json
from pathlib import Path

import pytest

from attnlab.app import scheduling
from tool_modules import load_tool

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def preset_table():
    return load_tool("preset_table")


def _run(root: Path, preset: str, elapsed: float):
    folder = root / preset / "abc"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"preset": preset, "elapsed_s": elapsed}))


def test_the_committed_block_is_what_the_tool_writes_from_no_runs(preset_table):
    """With no runs the tool rewrites EXPECTED_S as it is: the committed block is the tool's format and is read
    back by the module (markers present, one entry per preset it names)."""
    text = (ROOT / "src" / "attnlab" / "app" / "scheduling.py").read_text()
    assert preset_table.read_expected_s(text) == scheduling.EXPECTED_S
    assert ast.literal_eval(preset_table.expected_s(None, None, scheduling.EXPECTED_S).split("=", 1)[1].strip()) == \
        scheduling.EXPECTED_S


def test_measured_times_replace_the_old_and_unmeasured_keep_them(preset_table, tmp_path):
    quick, full = tmp_path / "quick", tmp_path / "full"
    _run(full, "marion-manifold", 4.26)
    _run(quick, "marion-manifold", 3.04)
    _run(full, "sakai-kernel", 1234.5)  # no previous times and no quick run: left out
    _run(quick, "icl-lsa", 9.0)  # a plugin's preset: not attnlab's to schedule by this table
    path = tmp_path / "scheduling.py"
    path.write_text('X = 1\n# expected-s\nEXPECTED_S: dict[str, tuple[float, float]] = {\n'
                    '    "marion-manifold": (6.7, 6.2), "marion-sgd": (84, 7.9),\n}\n# /expected-s\n"""doc"""\n')
    preset_table.rewrite_expected_s(quick, full, path)
    text = path.read_text()
    assert text.startswith("X = 1\n# expected-s\n") and text.endswith('}\n# /expected-s\n"""doc"""\n')
    assert preset_table.read_expected_s(text) == {"marion-manifold": (4.3, 3.0), "marion-sgd": (84, 7.9)}
    _run(quick, "sakai-kernel", 12.4)
    preset_table.rewrite_expected_s(quick, full, path)
    assert preset_table.read_expected_s(path.read_text())["sakai-kernel"] == (1234, 12)
    assert "icl-lsa" not in preset_table.read_expected_s(path.read_text())


def test_the_readme_table_keeps_the_previous_time_of_an_unmeasured_preset(preset_table, tmp_path):
    """A folder holding one preset's runs updates that preset's row; the others keep their times (EXPECTED_S, which
    the README's table was written with) or, never measured, say so."""
    quick, full = tmp_path / "quick", tmp_path / "full"
    _run(full, "marion-manifold", 4.26)
    previous = {"marion-manifold": (6.7, 6.2), "marion-sgd": (84, 7.9)}
    rows = {line.split(" | ")[0].strip("| `"): line for line in preset_table.table(quick, full, previous).splitlines()}
    assert rows["marion-manifold"].endswith("| 4.3 s | 6.2 s |")
    assert rows["marion-sgd"].endswith("| 84 s | 7.9 s |")
    assert rows["dohmatob-rgd"].endswith("| not measured | not measured |")
