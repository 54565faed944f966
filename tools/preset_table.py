"""Write the README's table of presets from finished runs: paper, figure, what it shows, full and quick run time.

    python tools/preset_table.py --quick results-quick [--full results-full] [--machine "2-core ..."]

Each time is the ``elapsed_s`` of the preset's finished run under the given folder (the run's own timing,
compilation included); a preset with no run there keeps its previous times (those of ``EXPECTED_S``), or shows "not
measured". The table (attnlab's own presets) replaces
the block between the ``<!-- presets -->`` markers of README.md, and the same times replace
:data:`attnlab.app.scheduling.EXPECTED_S` (between its ``# expected-s`` markers), the order in which ``reproduce``
submits its tasks, longest first; a preset not measured there keeps its previous times. The package's shipped
catalogue (``make catalogue``) is written again, since its digest covers ``scheduling.py``.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from attnlab import presets
from attnlab.registry import PAPERS

ROOT = Path(__file__).resolve().parents[1]
SCHEDULING = ROOT / "src" / "attnlab" / "app" / "scheduling.py"


def _times(root: Path | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if root is None:
        return out
    for summary in Path(root).rglob("summary.json"):
        try:
            s = json.loads(summary.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if "preset" in s and "elapsed_s" in s:
            out[s["preset"]] = float(s["elapsed_s"])
    return out


def _fmt(t: float | None) -> str:
    if t is None:
        return "not measured"
    return f"{t:.0f} s" if t >= 10 else f"{t:.1f} s"


def _own_presets() -> dict:
    """attnlab's own presets, in the catalogue's order (a plugin's presets installed here left out)."""
    return {name: p for name, p in presets().items() if p.paper in PAPERS}


def table(quick: Path | None, full: Path | None, previous: dict[str, tuple[float, float]] | None = None) -> str:
    """The README's table: each time measured where a run is found under ``quick`` / ``full``, else the ``previous``
    one (``EXPECTED_S``, which holds the README's times), else "not measured"."""
    tq, tf = _times(quick), _times(full)
    for name, (f, q) in (previous or {}).items():
        tf.setdefault(name, f)
        tq.setdefault(name, q)
    rows = ["| preset | paper | figure | what it shows | full | quick |", "|---|---|---|---|---|---|"]
    for name, p in _own_presets().items():
        what = p.description.replace("|", "/").split(". ")[0].rstrip(".")
        rows.append(f"| `{name}` | {p.paper} | {p.figure} | {what} | {_fmt(tf.get(name))} | {_fmt(tq.get(name))} |")
    return "\n".join(rows)


def _seconds(t: float) -> float:
    return round(t) if t >= 10 else round(t, 1)


def expected_s(quick: Path | None, full: Path | None, previous: dict[str, tuple[float, float]]) -> str:
    """The source of ``EXPECTED_S``: preset -> (full, quick) seconds, measured where a run is found, else as
    ``previous``; presets in the catalogue's order, a line per preset."""
    tq, tf = _times(quick), _times(full)
    lines = ["EXPECTED_S: dict[str, tuple[float, float]] = {"]
    for name in _own_presets():
        old = previous.get(name)
        f = tf.get(name, old[0] if old else None)
        q = tq.get(name, old[1] if old else None)
        if f is None or q is None:
            continue
        lines.append(f"    {name!r}: ({_seconds(f)}, {_seconds(q)}),".replace("'", '"'))
    return "\n".join(lines + ["}"])


def _expected_s_block(text: str):
    """The match of the ``# expected-s`` ... ``# /expected-s`` block (group 1: the assignment), or None."""
    return re.search(r"# expected-s\n(.*?)\n# /expected-s", text, flags=re.S)


def read_expected_s(text: str) -> dict[str, tuple[float, float]]:
    """The ``EXPECTED_S`` dictionary of a source text's block (the assignment's right-hand side, a literal)."""
    m = _expected_s_block(text)
    if m is None:
        raise SystemExit("no '# expected-s' ... '# /expected-s' block")
    return ast.literal_eval(m.group(1).split("=", 1)[1].strip())


def rewrite_expected_s(quick: Path | None, full: Path | None, path: Path = SCHEDULING) -> None:
    text = path.read_text()
    previous = read_expected_s(text)
    m = _expected_s_block(text)
    path.write_text(text[:m.start(1)] + expected_s(quick, full, previous) + text[m.end(1):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", type=Path)
    ap.add_argument("--full", type=Path)
    ap.add_argument("--machine", default="")
    ap.add_argument("--readme", type=Path, default=ROOT / "README.md")
    args = ap.parse_args()
    block = table(args.quick, args.full, read_expected_s(SCHEDULING.read_text()))
    if args.machine:
        block = (f"Run times on {args.machine}: quick from `make demo`, full from `attnlab reproduce`, each "
                 "preset's wall time as one of 2 Dask workers, compilation included (with the compile cache earlier "
                 f"runs left).\n\n{block}")
    text = args.readme.read_text()
    new = re.sub(r"<!-- presets -->.*?<!-- /presets -->", f"<!-- presets -->\n{block}\n<!-- /presets -->", text,
                 flags=re.S)
    args.readme.write_text(new)
    rewrite_expected_s(args.quick, args.full)
    from attnlab.app import catalogue

    catalogue.write_shipped()  # scheduling.py is among the sources whose digest the shipped catalogue holds
    print(block)


if __name__ == "__main__":
    main()
