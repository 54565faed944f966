"""The reproduction report: when and how it was made (UTC date and time; quick or full, seeds, the implementation of
each kernel per preset, the versions of attnlab, JAX, NumPy and SciPy and the machine, as recorded in each run's
``config.json``), the summary of the checks (passed, failed, not evaluated; negative controls rejected), one table of
every check of every paper, then per paper, per preset, its finding, figures, checks (each with its negative
control and whether it was rejected), metrics and run time; a preset skipped (not run: a local input it needs was not
given) shows the reason instead. Written as ``report.md`` and as a self-contained
``report.html`` (figures embedded as base64 PNG)."""

from __future__ import annotations

import base64
import datetime
import html
import os
from pathlib import Path

from attnlab.app.ownership import REPORT_SIGNATURE, is_attnlab_report
from attnlab.app.store import RunResult, machine, read_config
from attnlab.errors import AttnlabError

__all__ = ["write_report", "check_rows", "check_summary", "provenance_lines", "status_text"]

_CHECK_KEYS = ("name", "theory", "simulation", "abs_error", "tolerance", "passed")
_REPORTED_VERSIONS = ("attnlab", "jax", "numpy", "scipy")


def _fmt(x) -> str:
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        return f"{x:.6g}"
    if x is None:
        return "-"
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


def _status(c: dict) -> str:
    """A check's status as written in ``summary.json`` (older summaries: from ``passed``)."""
    status = c.get("status") or ("passed" if c.get("passed") else "failed")
    return status if status in ("passed", "failed", "not evaluated", "inconclusive") else "failed"


def status_text(c: dict) -> str:
    """A check's status with its reason (``"not evaluated: too few repeats"``, ``"inconclusive: the negative
    control ... is within the tolerance too"``), as written in ``summary.json``."""
    status = _status(c)
    if status != "passed" and isinstance(c.get("verdict"), str) and c["verdict"].startswith(status):
        return c["verdict"]
    return f"not evaluated: {c['reason']}" if status == "not evaluated" and c.get("reason") else status



def _rejected_text(c: dict) -> str:
    r = c.get("control_rejected")
    return "-" if r is None else "yes" if r else "NO"


def check_summary(results: dict[str, RunResult]) -> dict[str, int]:
    """Counts over every check of every run: ``checks``, ``passed``, ``failed``, ``not evaluated``, ``inconclusive``
    (within tolerance, but so was the negative control), ``controls`` (checks whose negative control was evaluated)
    and ``rejected`` (controls the check rejected, as it should)."""
    n = {"checks": 0, "passed": 0, "failed": 0, "not evaluated": 0, "inconclusive": 0, "controls": 0, "rejected": 0}
    for res in results.values():
        for c in res.summary.get("checks", []):
            n["checks"] += 1
            n[_status(c)] += 1
            if c.get("control_rejected") is not None:
                n["controls"] += 1
                n["rejected"] += bool(c["control_rejected"])
    return n


def _summary_sentence(n: dict[str, int], n_failed_presets: int, n_skipped: int = 0) -> str:
    inconclusive = f", {n['inconclusive']} inconclusive" if n.get("inconclusive") else ""
    return (f"{n['passed']} of {n['checks']} checks passed, {n['failed']} failed, {n['not evaluated']} not "
            f"evaluated{inconclusive}; negative controls rejected {n['rejected']}/{n['controls']}; "
            f"{n_failed_presets} presets failed" + (f"; {n_skipped} skipped (not run)." if n_skipped else "."))


def _distinct(values) -> list:
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _machine_text(m: dict) -> str:
    cores = m.get("cores")
    usable = m.get("usable_cores")
    core_text = f"{cores} cores" + (f" ({usable} usable)" if usable not in (None, cores) else "")
    return f"{m.get('platform', '?')}, {m.get('cpu', '?')}, {core_text}"


def provenance_lines(results: dict[str, RunResult], now: datetime.datetime | None = None) -> list[tuple[str, str]]:
    """``(label, text)`` lines saying when and how the report's runs were made: the report's UTC date and time (and
    the span of the runs' finishing times), quick or full, the seeds, the versions of attnlab, JAX, NumPy and SciPy,
    the git commit, the JAX backend, its devices (kind and count) and the machine, as recorded in the runs'
    ``config.json`` (several values where the runs differ)."""
    now = now or datetime.datetime.now(datetime.UTC)
    records = {name: read_config(res.run_dir) or {} for name, res in results.items()}
    lines = []
    when = now.strftime("%Y-%m-%d %H:%M:%S UTC")
    stamps = []
    for res in results.values():
        try:
            stamps.append((Path(res.run_dir) / "summary.json").stat().st_mtime)
        except OSError:
            pass
    if stamps:
        utc = lambda t: datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")  # noqa: E731
        lo, hi = utc(min(stamps)), utc(max(stamps))
        when += f" (report written); runs finished {lo} UTC" + (f" to {hi} UTC" if hi != lo else "")
    lines.append(("When", when))
    sizes = [res.summary.get("quick") for res in results.values()]
    size_names = {True: "quick", False: "full", None: "unknown"}
    counts = {size_names.get(q, "unknown"): sizes.count(q) for q in _distinct(sizes)}
    lines.append(("Size", ", ".join(f"{k} ({v} presets)" if len(counts) > 1 else k for k, v in counts.items())
                  or "no runs"))
    seeds = _distinct(res.summary.get("seed") for res in results.values())
    lines.append(("Seeds", ", ".join(str(s) for s in seeds) or "-"))
    versions = []
    for pkg in _REPORTED_VERSIONS:
        vals = _distinct(r.get("versions", {}).get(pkg) for r in records.values())
        vals = [v for v in vals if v] or ["unknown"]
        versions.append(f"{pkg} {' / '.join(vals)}")
    lines.append(("Versions", ", ".join(versions)))
    commits = [c for c in _distinct(r.get("git_commit") for r in records.values()) if c]
    if commits:
        lines.append(("Git commit", ", ".join(commits)))
    backends = [b for b in _distinct(r.get("jax_backend") for r in records.values()) if b]
    if backends:
        lines.append(("JAX backend", ", ".join(backends)))
    devices = [d for d in _distinct(r.get("devices") for r in records.values()) if isinstance(d, dict)]
    if devices:
        lines.append(("Devices", "; ".join(f"{d.get('count', '?')} x {d.get('kind', '?')}" for d in devices)))
    machines = [m for m in _distinct(r.get("machine") for r in records.values()) if isinstance(m, dict)]
    if machines:
        lines.append(("Machine", "; ".join(_machine_text(m) for m in machines)))
    else:
        lines.append(("Machine", _machine_text(machine()) + " (the machine that wrote the report; the runs recorded "
                      "none)"))
    return lines


def _implementation_rows(results: dict[str, RunResult]) -> list[tuple[str, str]]:
    return [(name, implementation_text(res.summary) or "JAX (no C kernel)") for name, res in results.items()]


def _by_paper(results: dict[str, RunResult], presets: dict, failed: dict[str, str], skipped: dict[str, str]):
    papers: dict[str, list[str]] = {}
    for name in list(results) + list(failed) + list(skipped):
        papers.setdefault(presets[name].citation, []).append(name)
    return papers


def _check_table_rows(s: dict) -> list[tuple]:
    """Per check of a run: name, status, theory, simulation, abs error, tolerance, basis, control, control error,
    control rejected."""
    return [(c["name"], status_text(c), c.get("theory"), c.get("simulation"), c.get("abs_error"), c.get("tolerance"),
             c.get("basis", ""), c.get("control") or "-", c.get("control_error"), _rejected_text(c))
            for c in s.get("checks", [])]


_CHECK_HEADER = ("check", "status", "theory", "simulation", "abs error", "tolerance", "basis", "negative control",
                 "control error", "control rejected")
_ALL_HEADER = ("preset", "check", "status", "theory", "simulation", "abs error", "tolerance", "control rejected")


def _all_rows(results) -> list[tuple]:
    return [(name, c["name"], status_text(c), c.get("theory"), c.get("simulation"), c.get("abs_error"),
             c.get("tolerance"), _rejected_text(c))
            for name, res in results.items() for c in res.summary.get("checks", [])]


def _markdown(out_dir: Path, results, presets, failed, now=None, skipped=None) -> str:
    skipped = skipped or {}
    n = check_summary(results)
    lines = ["# attnlab reproduction report", "", REPORT_SIGNATURE, "", "## When and how", ""]
    lines += [f"- **{label}:** {text}" for label, text in provenance_lines(results, now)]
    lines += ["", "Implementation of each kernel, per preset:", "", "| preset | implementation |", "|---|---|"]
    lines += [_row(r) for r in _implementation_rows(results)]
    lines += ["", "## Summary of checks", "", _summary_sentence(n, len(failed), len(skipped)), "",
              "| " + " | ".join(_ALL_HEADER) + " |", "|" + "---|" * len(_ALL_HEADER)]
    lines += [_row(r) for r in _all_rows(results)]
    for paper, names in _by_paper(results, presets, failed, skipped).items():
        lines += ["", f"# {paper}"]
        for name in names:
            p = presets[name]
            lines += ["", f"## {name}", "", p.description, ""]
            if name in failed:
                lines += [f"**FAILED**: `{failed[name]}`"]
                continue
            if name in skipped:
                lines += [f"**SKIPPED** (not run): {skipped[name]}"]
                continue
            res = results[name]
            s = res.summary
            rel = os.path.relpath(res.run_dir, out_dir)
            impl = implementation_text(s)
            if s.get("finding"):
                lines += [f"**Finding:** {s['finding']}", ""]
            size = {True: "quick", False: "full"}.get(s.get("quick"), "unknown size")
            lines += [f"Figure: {p.figure}. Run directory: `{rel}`. Size: {size}, seed {s.get('seed', '?')}. "
                      f"Run time: {s.get('elapsed_s', 0):.1f} s." + (f" Implementation: {impl}." if impl else ""), ""]
            lines += [f"![{name}]({rel}/{f})" for f in s.get("figures", []) if f.endswith(".png")]
            lines += ["", "| " + " | ".join(_CHECK_HEADER) + " |", "|" + "---|" * len(_CHECK_HEADER)]
            lines += [_row(r) for r in _check_table_rows(s)]
            lines += ["", "| metric | value |", "|---|---|"]
            lines += [_row((k, v)) for k, v in s.get("metrics", {}).items()]
    return "\n".join(lines) + "\n"


def _table(header, rows, status_col=None) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows:
        cls = ""
        if status_col is not None:
            status = str(r[status_col])
            cls = {"passed": ' class="pass"', "failed": ' class="fail"'}.get(status, ' class="ne"')  # not evaluated
        out.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in r) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _html(results, presets, failed, now=None, skipped=None) -> str:
    skipped = skipped or {}
    n = check_summary(results)
    parts = ["<!DOCTYPE html>", REPORT_SIGNATURE,
             "<html><head><meta charset='utf-8'><title>attnlab reproduction report</title><style>",
             "body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}table{border-collapse:collapse;"
             "margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}tr.pass td:nth-child(2)"
             "{color:#080}tr.fail td{background:#fdd}tr.ne td{background:#ffd}img{max-width:100%}",
             "</style></head><body><h1>attnlab reproduction report</h1>", "<h2>When and how</h2><ul>"]
    parts += [f"<li><b>{html.escape(label)}:</b> {html.escape(text)}</li>"
              for label, text in provenance_lines(results, now)]
    parts.append("</ul><p>Implementation of each kernel, per preset:</p>")
    parts.append(_table(("preset", "implementation"), _implementation_rows(results)))
    parts.append(f"<h2>Summary of checks</h2><p>{html.escape(_summary_sentence(n, len(failed), len(skipped)))}</p>")
    parts.append(_table(_ALL_HEADER, _all_rows(results), 2))
    for paper, names in _by_paper(results, presets, failed, skipped).items():
        parts.append(f"<h1>{html.escape(paper)}</h1>")
        for name in names:
            p = presets[name]
            parts.append(f"<h2 id='{html.escape(name)}'>{html.escape(name)}</h2><p>{html.escape(p.description)}</p>")
            if name in failed:
                parts.append(f"<p class='fail'><b>FAILED</b>: {html.escape(str(failed[name]))}</p>")
                continue
            if name in skipped:
                parts.append(f"<p class='skipped'><b>SKIPPED</b> (not run): {html.escape(str(skipped[name]))}</p>")
                continue
            res = results[name]
            s = res.summary
            impl = implementation_text(s)
            if s.get("finding"):
                parts.append(f"<p class='finding'><b>Finding:</b> {html.escape(s['finding'])}</p>")
            size = {True: "quick", False: "full"}.get(s.get("quick"), "unknown size")
            parts.append(f"<p>Figure: {html.escape(p.figure)}. Size: {size}, seed {html.escape(str(s.get('seed', '?')))}. "
                         f"Run time: {s.get('elapsed_s', 0):.1f} s. "
                         + (f"Implementation: {html.escape(impl)}. " if impl else "")
                         + f"Run directory: <code>{html.escape(str(res.run_dir))}</code></p>")
            for f in s.get("figures", []):
                if f.endswith(".png") and (Path(res.run_dir) / f).is_file():
                    data = base64.b64encode((Path(res.run_dir) / f).read_bytes()).decode()
                    parts.append(f"<img alt='{html.escape(f)}' src='data:image/png;base64,{data}'>")
            rows = _check_table_rows(s)
            parts.append(_check_html(rows, s))
            parts.append(_table(("metric", "value"), list(s.get("metrics", {}).items())))
    parts.append("</body></html>")
    return "\n".join(parts)


def _check_html(rows, s) -> str:
    """The checks of one run as an HTML table, each row classed by its status (pass, fail, ne)."""
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in _CHECK_HEADER)
           + "</tr></thead><tbody>"]
    for r, c in zip(rows, s.get("checks", [])):
        cls = {"passed": "pass", "failed": "fail"}.get(_status(c), "ne")
        out.append(f"<tr class='{cls}'>" + "".join(f"<td>{html.escape(_fmt(x))}</td>" for x in r) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.attnlab-tmp-{os.getpid():08x}"[-64:])
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise AttnlabError(f"cannot write {path}: {e.strerror or e}") from None


def write_report(out_dir: Path, results: dict[str, RunResult], presets: dict,
                 failed: dict[str, str] | None = None, now: datetime.datetime | None = None,
                 skipped: dict[str, str] | None = None) -> Path:
    """Write ``report.md`` and ``report.html`` in ``out_dir`` (atomically); return the markdown path. ``now``: the
    report's date and time (default: the current UTC time); ``skipped``: preset -> why it was not run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failed = failed or {}
    now = now or datetime.datetime.now(datetime.UTC)
    md = out_dir / "report.md"
    for path in (md, out_dir / "report.html"):
        if path.exists() and not is_attnlab_report(path):
            raise AttnlabError(f"{path} was not written by attnlab: it is left untouched; choose another --out")
    _atomic_write(md, _markdown(out_dir, results, presets, failed, now, skipped))
    _atomic_write(out_dir / "report.html", _html(results, presets, failed, now, skipped))
    return md
