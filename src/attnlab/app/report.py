"""The reproduction report: one table of every check of every paper, then per paper, per preset, its figures,
checks, metrics and run time. Written as ``report.md`` and as a self-contained ``report.html`` (figures embedded
as base64 PNG)."""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from attnlab.app.store import RunResult

__all__ = ["write_report", "check_rows"]

_CHECK_KEYS = ("name", "theory", "simulation", "abs_error", "tolerance", "passed")


def _fmt(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _cell(x) -> str:
    """``x`` as the text of one markdown table cell: on one line, with ``|`` escaped (a bare one splits the row)."""
    return " ".join(_fmt(x).split()).replace("|", "\\|")


def _row(cells) -> str:
    return "| " + " | ".join(_cell(x) for x in cells) + " |"


def check_rows(results: dict[str, RunResult]) -> list[tuple]:
    """``(preset, check, theory, simulation, abs_error, tolerance, passed)`` for every check of every run."""
    rows = []
    for name, res in results.items():
        for c in res.summary.get("checks", []):
            rows.append((name, c["name"], c["theory"], c["simulation"], c["abs_error"], c["tolerance"], c["passed"]))
    return rows


def implementation_text(summary: dict) -> str:
    """``"sampler native, reference jax"``: the implementation each kernel of a run used ("" when it has none)."""
    return ", ".join(f"{job} {impl}" for job, impl in summary.get("implementations", {}).items())


def _by_paper(results: dict[str, RunResult], presets: dict, failed: dict[str, str]):
    papers: dict[str, list[str]] = {}
    for name in list(results) + list(failed):
        papers.setdefault(presets[name].citation, []).append(name)
    return papers


def _markdown(out_dir: Path, results, presets, failed) -> str:
    rows = check_rows(results)
    n_pass = sum(r[-1] for r in rows)
    lines = ["# attnlab reproduction report", "",
             f"{n_pass} of {len(rows)} checks passed; {len(failed)} presets failed.", "",
             "| preset | check | theory | simulation | abs error | tolerance | passed |", "|---|---|---|---|---|---|---|"]
    lines += [_row(r) for r in rows]
    for paper, names in _by_paper(results, presets, failed).items():
        lines += ["", f"# {paper}"]
        for name in names:
            p = presets[name]
            lines += ["", f"## {name}", "", p.description, ""]
            if name in failed:
                lines += [f"**FAILED**: `{failed[name]}`"]
                continue
            res = results[name]
            s = res.summary
            rel = os.path.relpath(res.run_dir, out_dir)
            impl = implementation_text(s)
            if s.get("finding"):
                lines += [f"**Finding:** {s['finding']}", ""]
            lines += [f"Figure: {p.figure}. Run directory: `{rel}`. Run time: {s.get('elapsed_s', 0):.1f} s."
                      + (f" Implementation: {impl}." if impl else ""), ""]
            lines += [f"![{name}]({rel}/{f})" for f in s.get("figures", []) if f.endswith(".png")]
            lines += ["", "| check | theory | simulation | abs error | tolerance | passed | basis |",
                      "|---|---|---|---|---|---|---|"]
            for c in s.get("checks", []):
                lines.append(_row([*(c[k] for k in _CHECK_KEYS), c.get("basis", "")]))
            lines += ["", "| metric | value |", "|---|---|"]
            lines += [_row((k, v)) for k, v in s.get("metrics", {}).items()]
    return "\n".join(lines) + "\n"


def _table(header, rows, passed_col=None) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows:
        cls = ""
        if passed_col is not None:
            cls = ' class="pass"' if r[passed_col] else ' class="fail"'
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in r) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _html(results, presets, failed) -> str:
    rows = check_rows(results)
    n_pass = sum(r[-1] for r in rows)
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>attnlab reproduction report</title><style>",
             "body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}tr.pass td:last-child"
             "{color:#080}tr.fail td{background:#fdd}img{max-width:100%}",
             "</style></head><body><h1>attnlab reproduction report</h1>",
             f"<p>{n_pass} of {len(rows)} checks passed; {len(failed)} presets failed.</p>",
             _table(("preset", "check", "theory", "simulation", "abs error", "tolerance", "passed"), rows, 6)]
    for paper, names in _by_paper(results, presets, failed).items():
        parts.append(f"<h1>{html.escape(paper)}</h1>")
        for name in names:
            p = presets[name]
            parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(name)}</h2><p>{html.escape(p.description)}</p>")
            if name in failed:
                parts.append(f"<p class='fail'><b>FAILED</b>: {html.escape(str(failed[name]))}</p>")
                continue
            res = results[name]
            s = res.summary
            impl = implementation_text(s)
            if s.get("finding"):
                parts.append(f"<p class='finding'><b>Finding:</b> {html.escape(s['finding'])}</p>")
            parts.append(f"<p>Figure: {html.escape(p.figure)}. Run time: {s.get('elapsed_s', 0):.1f} s. "
                         + (f"Implementation: {html.escape(impl)}. " if impl else "")
                         + f"Run directory: <code>{html.escape(str(res.run_dir))}</code></p>")
            for f in s.get("figures", []):
                if f.endswith(".png") and (Path(res.run_dir) / f).is_file():
                    data = base64.b64encode((Path(res.run_dir) / f).read_bytes()).decode()
                    parts.append(f"<img alt='{html.escape(f)}' src='data:image/png;base64,{data}'>")
            checks = [tuple(c[k] for k in _CHECK_KEYS) + (c.get("basis", ""),) for c in s.get("checks", [])]
            parts.append(_table(("check", "theory", "simulation", "abs error", "tolerance", "passed", "basis"),
                                [c[:6] + (c[6],) for c in checks], 5))
            parts.append(_table(("metric", "value"), list(s.get("metrics", {}).items())))
    parts.append("</body></html>")
    return "\n".join(parts)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_report(out_dir: Path, results: dict[str, RunResult], presets: dict,
                 failed: dict[str, str] | None = None) -> Path:
    """Write ``report.md`` and ``report.html`` in ``out_dir`` (atomically); return the markdown path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = failed or {}
    md = out_dir / "report.md"
    _atomic_write(md, _markdown(out_dir, results, presets, failed))
    _atomic_write(out_dir / "report.html", _html(results, presets, failed))
    return md
