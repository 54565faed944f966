"""The reproduction report opens with when and how (UTC date and time, quick or full, seeds, the implementation of
each kernel per preset, versions, machine) and the summary of the checks (passed, failed, not evaluated; negative
controls rejected); each preset shows its finding, figures and checks with their controls."""

import datetime
import html
import json
from pathlib import Path

from attnlab.app.report import check_summary, write_report
from attnlab.app.store import RunResult, machine, provenance
from attnlab.registry import Check, all_presets

NOW = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)


def _run(root: Path, name: str, checks, *, quick=True, seed=0, impl=None, versions=None, host=None) -> RunResult:
    run_dir = root / name / "abc"
    run_dir.mkdir(parents=True)
    record = {"preset": name, "quick": quick, "seed": seed, "config_hash": "abc", "config": {},
              "implementations": impl or {},
              "versions": versions or {"attnlab": "0.1.0", "jax": "0.10.2", "numpy": "2.4.6", "scipy": "1.17.1"},
              "git_commit": "deadbeef", "jax_backend": "cpu",
              "machine": host or {"platform": "Linux-test-x86_64", "cpu": "Test CPU 9000", "cores": 16}}
    (run_dir / "config.json").write_text(json.dumps(record))
    (run_dir / f"{name}-panels.png").write_bytes(b"\x89PNG fake")
    summary = {"preset": name, "quick": quick, "seed": seed, "elapsed_s": 1.5, "finding": f"{name} | finds < it",
               "metrics": {"m": 1.0}, "checks": [c.as_dict() for c in checks],
               "figures": [f"{name}-panels.png", f"{name}-panels.pdf"], "implementations": impl or {}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return RunResult(run_dir, summary, False)


def _results(tmp_path):
    a, b = [name for name, p in all_presets().items() if p.paper == "marion"][:2]
    checks_a = [Check("risk | closed form", 1.0, 1.001, 0.01, "5 SE", "half the time", control_simulation=2.0),
                Check("overlap <gap>", 0.0, 0.5, 0.01, "bound", "frozen tokens", control_simulation=0.001)]
    checks_b = [Check.not_evaluated("alignment", "too few repeats"), Check("plain", 1.0, 1.0, 0.1)]
    return {a: _run(tmp_path, a, checks_a, impl={"sampler": "native", "reference": "jax"}),
            b: _run(tmp_path, b, checks_b, seed=3, host={"platform": "Linux-other", "cpu": "Other CPU", "cores": 4})}


def test_check_summary_counts_statuses_and_controls(tmp_path):
    n = check_summary(_results(tmp_path))
    assert n == {"checks": 4, "passed": 2, "failed": 1, "not evaluated": 1, "inconclusive": 0, "controls": 2,
                 "rejected": 1}


def test_report_opens_with_when_and_how_and_the_summary(tmp_path):
    results = _results(tmp_path)
    a, b = results
    md = write_report(tmp_path / "out", results, all_presets(), failed={}, now=NOW).read_text()
    page = (tmp_path / "out" / "report.html").read_text()
    head = md[: md.index("## Summary of checks")]
    for text in ("2026-01-02 03:04:05 UTC", "quick", "0, 3", "attnlab 0.1.0", "jax 0.10.2", "numpy 2.4.6",
                 "scipy 1.17.1", "Linux-test-x86_64, Test CPU 9000, 16 cores", "Linux-other, Other CPU, 4 cores",
                 f"| {a} | sampler native, reference jax |", f"| {b} | JAX (no C kernel) |"):
        assert text in head, text
    assert md.index("## When and how") < md.index("## Summary of checks") < md.index(f"## {a}")
    assert ("2 of 4 checks passed, 1 failed, 1 not evaluated; negative controls rejected 1/2; 0 presets failed."
            in md)
    for text in ("2026-01-02 03:04:05 UTC", "Test CPU 9000", "scipy 1.17.1", "sampler native, reference jax",
                 "2 of 4 checks passed, 1 failed, 1 not evaluated; negative controls rejected 1/2"):
        assert html.escape(text) in page, text
    assert page.index("When and how") < page.index("Summary of checks") < page.index(f"<h2 id='{a}'>")


def test_each_preset_shows_finding_figures_and_checks_with_their_controls(tmp_path):
    results = _results(tmp_path)
    a, b = results
    md = write_report(tmp_path / "out", results, all_presets(), now=NOW).read_text()
    page = (tmp_path / "out" / "report.html").read_text()
    section = md[md.index(f"## {a}"):]
    assert f"**Finding:** {a} | finds < it" in section
    assert f"![{a}](../{a}/abc/{a}-panels.png)" in section
    rows = [ln for ln in md.splitlines() if "| risk \\| closed form |" in ln]
    assert len(rows) == 2 and rows[0].startswith(f"| {a} |")  # the summary table and the preset's own
    assert rows[1].count(" | ") == 9 and "| passed |" in rows[1] and "| half the time |" in rows[1]
    assert rows[1].endswith("| yes |")
    (gap,) = [ln for ln in md.splitlines() if ln.startswith("| overlap <gap> | failed")]
    assert "| frozen tokens |" in gap and gap.endswith("| NO |")
    assert "| alignment | not evaluated: too few repeats |" in md
    for ln in md.splitlines():  # every table row keeps its cells: no bare | inside a cell
        if ln.startswith("| risk"):
            assert ln.replace("\\|", "").count("|") == ln.count("|") - 1
    assert "overlap &lt;gap&gt;" in page and "<gap>" not in page.replace("<td>", "")
    assert "frozen tokens" in page and "not evaluated: too few repeats" in page
    assert "data:image/png;base64," in page
    assert f"{html.escape(a)} | finds &lt; it" in page


def test_config_json_records_the_machine():
    m = provenance()["machine"]
    assert m == machine() and m["cores"] >= 1 and m["cpu"] and m["platform"]
