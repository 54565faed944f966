"""bench/reproduce.py reads the reproduction's finished runs: each preset's time, the checks passed and the controls
rejected; it passes only when every check passed and every control was rejected."""

import json

from tool_modules import load_tool


def _run(folder, preset, elapsed, checks):
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"preset": preset, "elapsed_s": elapsed, "checks": checks}))


def test_the_runs_are_summed_and_a_failed_check_or_unrejected_control_fails(tmp_path):
    bench = load_tool("reproduce", folder="bench")
    ok = {"passed": True, "control_rejected": True}
    _run(tmp_path / "a" / "h1", "paper-a", 30.0, [ok, ok])
    _run(tmp_path / "b" / "h2", "paper-b", 12.5, [ok, {"passed": False, "reason": "one repeat",
                                                       "control_rejected": None}])
    (tmp_path / "report.json").write_text(json.dumps({"not": "a run"}))
    s = bench.summarize(tmp_path)
    assert s["presets"] == 2 and s["presets_worker_s"] == 42.5
    assert (s["checks"], s["checks_passed"]) == (4, 3)
    assert (s["controls"], s["controls_rejected"]) == (3, 3)  # the check not evaluated has no control
    assert [p["preset"] for p in s["longest"]] == ["paper-a", "paper-b"]
    assert not bench.passed(0, s)  # a check did not pass
    every = {**s, "checks_passed": 4}
    assert bench.passed(0, every) and not bench.passed(1, every)
    assert not bench.passed(0, {**every, "controls_rejected": 2})
    assert not bench.passed(0, {**every, "presets": 0})
