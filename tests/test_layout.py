"""The layout rules of the source tree: no module over 600 lines, and no import circle inside a paper's folder
(the configs live in each paper's ``configs`` module, which the presets, summaries and figures import)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
MODULES = {".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__"): p
           for p in SRC.rglob("*.py")}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_is_over_600_lines(name):
    assert len(MODULES[name].read_text().splitlines()) <= 600, name


def _imports(path: Path) -> set[str]:
    """The attnlab modules ``path`` imports anywhere (module level, functions, ``TYPE_CHECKING`` blocks)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("attnlab"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("attnlab"))
    return {m for m in found if m in MODULES}


def _paper(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else None


def test_no_import_circle_inside_a_paper_folder():
    graph = {m: {d for d in _imports(p) if d != m and _paper(d) == _paper(m)} for m, p in MODULES.items() if _paper(m)}
    circles = []
    for start in graph:
        stack, seen = list(graph[start]), set()
        while stack:
            m = stack.pop()
            if m == start:
                circles.append(start)
                break
            if m not in seen:
                seen.add(m)
                stack += graph.get(m, ())
    assert not circles, f"modules on an import circle: {sorted(circles)}"
