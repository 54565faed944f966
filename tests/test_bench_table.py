"""tools/bench_table.py: the benchmark and targets tables of docs/speed.md are what the saved results say."""

import json
from pathlib import Path

import pytest

from tool_modules import load_tool


@pytest.fixture
def bench_table():
    return load_tool("bench_table")


def _save(folder: Path, script: str, result: dict, device=None):
    folder.mkdir(parents=True, exist_ok=True)
    record = {"cpu": {"model": "Test CPU", "vector_extensions": ["avx2"], "cores": 4}, "result": result}
    if device:
        record["device"] = device
    (folder / f"{script}.json").write_text(json.dumps(record))


def test_targets_met_missed_and_unevaluated(bench_table, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_table, "RESULTS", tmp_path)
    _save(tmp_path / "cpu", "softmax_rgd", {"ratio_vs_reference": 25.0, "total_preset_s": 75.0})
    _save(tmp_path / "cpu", "replica", {"ratio_vs_reference": 12.0, "converged_fraction_ours": 0.9})
    _save(tmp_path / "cpu", "particles", {"gpairs_per_s_n10000": 3.0})  # the target's value not recorded
    _save(tmp_path / "gpu", "softmax_rgd", {"ratio_vs_reference": 1.0}, device="Some GPU")  # not a CPU result
    rows = {line.split(" | ")[0].strip("| "): line for line in bench_table.targets_table().splitlines()[2:]}
    assert rows["RGD >= 20x the plain reference"].endswith("| yes |")
    assert "| no: " in rows["`dohmatob-rgd` preset <= 60 s"]  # 75 s against at most 60
    assert "| no: " in rows["replica curve >= 10x, every point converged"]  # the ratio is met, convergence is not
    assert rows["particle kernel >= 0.75 of the measured exp bound"].endswith("| cannot be evaluated |")
    assert not any("Some GPU" in row for row in rows.values())
    assert len(rows) == 4  # targets without any saved result have no row


def test_marion_manifold_miss_gives_the_profile(bench_table, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_table, "RESULTS", tmp_path)
    profile = {"pgd_s": 0.2, "tracing_and_compilation_s": 2.0, "monte_carlo_checks_s": 1.5,
               "cross_check_full_vector_pgd_s": 0.5, "figures_s": 1.0}
    _save(tmp_path / "cpu", "slr_pgd", {"manifold_preset_over_official_speed_reference": 0.5,
                                        "official_speed_reference_manifold_s": 2.5, "manifold_profile_s": profile})
    row = next(r for r in bench_table.targets_table().splitlines() if "marion-manifold" in r)
    assert "no: 10x needs the whole preset in 0.25 s" in row and "2.00 s (0.8x the reference's run)" in row


def _met_only_when_passed(bench_table, tmp_path, script: str, result: dict, target: str, shown: str):
    """The target row of ``target`` is met by ``result`` (in time, passed) and missed by the same result with a
    failure (``passed`` false); returns a function reading that row again."""

    def row():
        return next(r for r in bench_table.targets_table().splitlines() if target in r)

    _save(tmp_path / "cpu", script, result)
    assert row().endswith(f"| {shown} | yes |")
    _save(tmp_path / "cpu", script, {**result, "passed": False})  # in time, but a test or check failed
    assert "| no: " in row()
    return row


def test_make_test_target_needs_a_passing_suite_and_says_what_compilation_costs(bench_table, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_table, "RESULTS", tmp_path)
    result = {"cold_make_test_wall_s": 420.0, "passed": True, "warm_suite_wall_s": 300.0, "cold_setup_s": 45.0,
              "cold_programs": 4000, "cold_compile_share": 0.5}

    row = _met_only_when_passed(bench_table, tmp_path, "suite", result, "`make test`", "420 s")
    _save(tmp_path / "cpu", "suite", {**result, "cold_make_test_wall_s": 700.0})
    assert "no: with every program already compiled the suite takes 300 s" in row() and "4,000 compilations" in row()
    assert "50% of the test workers' time" in row()


def test_docs_tables_are_regenerated_from_the_saved_results(bench_table):
    """docs/speed.md holds exactly what `python tools/bench_table.py` writes from bench/results/."""
    doc = bench_table.DOC.read_text()
    assert bench_table.rewrite_doc(bench_table.table(sorted(bench_table.BENCH.glob("*.py")))) == doc


def test_script_arguments_go_with_one_script_run(bench_table, capsys):
    assert bench_table.main(["--args", "--sizes full"]) == 2  # not without --run
    assert bench_table.main(["--run", "presets", "preload", "--args", "--sizes full"]) == 2  # one script only
    assert "--args goes with --run and one script" in capsys.readouterr().err


def test_presets_table_has_a_section_per_size_measured(bench_table, tmp_path, monkeypatch):
    monkeypatch.setattr(bench_table, "RESULTS", tmp_path)
    phases = {"computation_s": 1.0, "fixed_s": 2.0, "tracing_s": 0.5, "compilation_s": 0.5, "programs": 3,
              "checks_s": 0.1, "figures_s": 0.4, "imports_s": 0.8, "startup_s": 0.1, "writing_s": 0.1}
    rows = [{"preset": "p", "size": size, "cache": cache, "wall_s": wall, **phases}
            for size, wall in (("quick", 3.0), ("full", 30.0)) for cache in ("cold", "warm")]
    _save(tmp_path / "cpu", "presets", {"rows": rows})
    text = bench_table.presets_table()
    assert "quick size, " in text and "full size, " in text
    assert "| `p` | 3.0 s |" in text and "| `p` | 30.0 s |" in text


def test_a_run_of_one_size_keeps_the_saved_rows_of_the_other(bench_table):
    """``--args '--sizes quick'`` replaces the quick rows and figures and keeps the saved full ones, saying which
    command measured each size; a result without size rows is saved as it is."""
    def row(size, wall):
        return {"preset": "p", "size": size, "cache": "warm", "wall_s": wall}

    old = {"command": "python bench/presets.py --sizes quick,full", "date": "d0",
           "result": {"rows": [row("quick", 3.0), row("full", 30.0)], "quick_warm_wall_s_sum": 3.0,
                      "full_warm_wall_s_sum": 30.0}}
    new = {"command": "python bench/presets.py --sizes quick", "date": "d1",
           "result": {"rows": [row("quick", 2.0)], "quick_warm_wall_s_sum": 2.0}}
    merged = bench_table.keep_other_sizes(old, new)
    assert merged["result"]["rows"] == [row("quick", 2.0), row("full", 30.0)]
    assert merged["result"]["quick_warm_wall_s_sum"] == 2.0 and merged["result"]["full_warm_wall_s_sum"] == 30.0
    assert merged["sizes"] == {"quick": {"command": new["command"], "date": "d1"},
                               "full": {"command": old["command"], "date": "d0"}}
    # both sizes measured again: nothing is kept
    both = dict(new, result={"rows": [row("quick", 2.0), row("full", 20.0)]})
    assert bench_table.keep_other_sizes(old, both) == both
    plain = {"command": "c", "date": "d", "result": {"ratio": 2.0}}
    assert bench_table.keep_other_sizes(old, plain) == plain


def test_reproduce_target_needs_a_full_passing_reproduction_and_says_what_bounds_it(bench_table, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setattr(bench_table, "RESULTS", tmp_path)
    result = {"full_wall_s": 580.0, "passed": True, "presets_worker_s": 1100.0, "presets_over_workers_s": 550.0,
              "workers": 2, "longest": [{"preset": "marion-transformer-single-head", "elapsed_s": 300.0}]}

    row = _met_only_when_passed(bench_table, tmp_path, "reproduce", result, "`attnlab reproduce`", "580 s")
    _save(tmp_path / "cpu", "reproduce", {**result, "full_wall_s": 790.0, "presets_worker_s": 1500.0,
                                          "presets_over_workers_s": 750.0})
    assert "no: the presets' own times sum to 1500 s, 750 s on 2 workers" in row()
    assert "marion-transformer-single-head 300 s" in row()
    quick = {k: v for k, v in result.items() if k != "full_wall_s"}
    _save(tmp_path / "cpu", "reproduce", {**quick, "quick_wall_s": 70.0})  # a quick reproduction: no full time
    assert "cannot be evaluated" in row()
