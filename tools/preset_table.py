"""Write the README's table of presets from finished runs: paper, figure, what it shows, full and quick run time.

    python tools/preset_table.py --quick results-quick [--full results-full] [--machine "2-core ..."]

Each time is the ``elapsed_s`` of the preset's finished run under the given folder (the run's own timing,
compilation included); a preset with no run there shows "not measured". The table replaces the block between the
``<!-- presets -->`` markers of README.md.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from attnlab import presets


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


def table(quick: Path | None, full: Path | None) -> str:
    tq, tf = _times(quick), _times(full)
    rows = ["| preset | paper | figure | what it shows | full | quick |", "|---|---|---|---|---|---|"]
    for name, p in presets().items():
        what = p.description.replace("|", "/").split(". ")[0].rstrip(".")
        rows.append(f"| `{name}` | {p.paper} | {p.figure} | {what} | {_fmt(tf.get(name))} | {_fmt(tq.get(name))} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", type=Path)
    ap.add_argument("--full", type=Path)
    ap.add_argument("--machine", default="")
    ap.add_argument("--readme", type=Path, default=Path(__file__).resolve().parents[1] / "README.md")
    args = ap.parse_args()
    block = table(args.quick, args.full)
    if args.machine:
        block = (f"Run times on {args.machine}: quick from `make demo`, full from `attnlab reproduce`, each "
                 "preset's wall time as one of 2 Dask workers, compilation included (with the compile cache earlier "
                 f"runs left).\n\n{block}")
    text = args.readme.read_text()
    new = re.sub(r"<!-- presets -->.*?<!-- /presets -->", f"<!-- presets -->\n{block}\n<!-- /presets -->", text,
                 flags=re.S)
    args.readme.write_text(new)
    print(block)


if __name__ == "__main__":
    main()
