"""The reproduction report: per preset its figures, checks and metrics, and one table of every check."""

from __future__ import annotations

import os
from pathlib import Path

from attnlab.store import RunResult

__all__ = ["write_report", "check_rows"]


def _fmt(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "**NO**"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def check_rows(results: dict[str, RunResult]) -> list[tuple]:
    """``(preset, check, theory, simulation, abs_error, tolerance, passed)`` for every check of every run."""
    rows = []
    for name, res in results.items():
        for c in res.summary.get("checks", []):
            rows.append((name, c["name"], c["theory"], c["simulation"], c["abs_error"], c["tolerance"], c["passed"]))
    return rows


def write_report(out_dir: Path, results: dict[str, RunResult], presets: dict) -> Path:
    """Write ``report.md`` in ``out_dir`` (atomically) and return its path."""
    out_dir = Path(out_dir)
    rows = check_rows(results)
    n_pass = sum(r[-1] for r in rows)
    lines = ["# attnlab reproduction report", "", f"{n_pass} of {len(rows)} checks passed.", "",
             "| preset | check | theory | simulation | abs error | tolerance | passed |",
             "|---|---|---|---|---|---|---|"]
    lines += ["| " + " | ".join(_fmt(x) for x in r) + " |" for r in rows]
    for name, res in results.items():
        p = presets[name]
        rel = os.path.relpath(res.run_dir, out_dir)
        s = res.summary
        lines += ["", f"## {name}", "", f"{p.description}", "",
                  f"Paper: {p.citation}, {p.figure}. Run directory: `{rel}`. Run time: {s.get('elapsed_s', 0):.1f} s.",
                  ""]
        for fig in s.get("figures", []):
            if fig.endswith(".png"):
                lines.append(f"![{name}]({rel}/{fig})")
        lines += ["", "| check | theory | simulation | abs error | tolerance | passed | basis |",
                  "|---|---|---|---|---|---|---|"]
        for c in s.get("checks", []):
            lines.append("| " + " | ".join(_fmt(c[k]) for k in ("name", "theory", "simulation", "abs_error",
                                                                 "tolerance", "passed")) + f" | {c.get('basis', '')} |")
        lines += ["", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in s.get("metrics", {}).items()]
    path = out_dir / "report.md"
    tmp = out_dir / ".report.md.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)
    return path
