"""Presets from outside attnlab: the entry-point group, broken plugins, ``attnlab new`` and the conformance kit."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import attnlab
from app.common import TINY_KWARGS  # the command-line tests' tiny config: its programs are shared
from attnlab import registry
from attnlab.app.cli import main
from attnlab.extend import ENTRY_POINT_GROUP

BUILTIN = ("marion", "dohmatob", "duranthon", "sakai", "bruno")


def _attnlab(*args, cwd, env_extra=None, timeout=600):
    env = {**os.environ, **(env_extra or {})}
    code = "import sys; from attnlab.app.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=timeout)


def _fake_distribution(root: Path, dist: str, entry_points: dict[str, str], modules: dict[str, str]) -> Path:
    """A distribution on a path of its own (a ``.dist-info`` with its entry points, and its modules): what pip
    installs, without pip."""
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    for name, text in modules.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def test_attnlabs_own_papers_register_through_the_entry_point_group():
    names = {ep.name: ep.value for ep in registry._group()}
    for paper in BUILTIN:
        assert names[paper] == f"attnlab.{paper}.presets"
    papers = {p.paper for p in registry.all_presets().values()}
    assert set(BUILTIN) <= papers


def test_the_catalogue_order_does_not_depend_on_which_preset_was_asked_for_first():
    """all_presets lists the papers in the entry points' order even where a later paper's preset was loaded first
    (get_preset loads one paper): the shipped catalogue and ``attnlab list`` compare equal whatever ran before."""
    code = textwrap.dedent("""
        from attnlab import registry
        registry.get_preset("bruno-alignment"); registry.get_preset("sakai-vary-width")
        papers = [p.paper for p in registry.all_presets().values()]
        print(",".join(dict.fromkeys(papers)))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().split(",")[:len(BUILTIN)] == list(BUILTIN), res.stdout


@pytest.mark.parametrize("kind", ["import error", "duplicate name", "contract"])
def test_a_broken_plugin_costs_one_line_and_never_the_builtin_presets(tmp_path, kind):
    modules = {
        "import error": {"brokenpaper/__init__.py": "", "brokenpaper/presets.py": "import no_such_module_xyz\n"},
        "duplicate name": {"brokenpaper/__init__.py": "", "brokenpaper/presets.py": """
            import dataclasses
            from attnlab.extend import get_preset, register
            register(dataclasses.replace(get_preset("marion-manifold")))
            """},
        "contract": {"brokenpaper/__init__.py": "", "brokenpaper/presets.py": """
            import dataclasses
            from attnlab.extend import get_preset, register
            register(dataclasses.replace(get_preset("marion-manifold"), name="brokenpaper-x", paper="brokenpaper",
                                         quick={"no_such_field": 1}))
            """},
    }[kind]
    site = _fake_distribution(tmp_path / "site", "broken-dist", {"brokenpaper": "brokenpaper.presets"}, modules)
    res = _attnlab("list", cwd=tmp_path, env_extra={"PYTHONPATH": str(site), "COLUMNS": "200"})
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "'brokenpaper'" in lines[0] and "'broken-dist'" in lines[0], res.stderr
    assert {"import error": "ModuleNotFoundError", "duplicate name": "registered twice",
            "contract": "no_such_field"}[kind] in lines[0]
    for name in registry.all_presets():
        assert name in res.stdout, name


def test_attnlab_new_writes_a_plugin_that_installs_and_passes_the_kit(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "kitpaper"]) == 0
    assert main(["new", "kitpaper"]) == 2  # never over an existing directory
    assert main(["new", "Not-A-Package!"]) == 2
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", "kitpaper"]
    assert subprocess.run(pip, cwd=tmp_path, capture_output=True, timeout=600).returncode == 0
    try:
        res = _attnlab("list", cwd=tmp_path, env_extra={"COLUMNS": "200"})
        assert res.returncode == 0 and "kitpaper-mean" in res.stdout and not res.stderr.strip(), res.stderr
        res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "kitpaper/tests"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout[-3000:]
        res = _attnlab("run", "kitpaper-mean", "--quick", "--out", "run", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-q", "-y", "kitpaper"], capture_output=True)


def test_the_kit_rejects_a_preset_whose_control_is_not_rejected(monkeypatch):
    import dataclasses

    import attnlab.testing
    from attnlab.extend import Check

    p = registry.get_preset("marion-manifold")

    def summarize(ds, config):
        metrics, checks = p.summarize(ds, config)
        weak = [dataclasses.replace(c, control_theory=c.theory, control_simulation=c.simulation) for c in checks]
        return metrics, weak

    run = attnlab.run("marion-manifold", quick=True, **TINY_KWARGS)
    bad = dataclasses.replace(p, summarize=summarize)
    monkeypatch.setitem(registry._REGISTRY, p.name, bad)
    metrics, checks = summarize(run.data, run.config)
    weak_run = dataclasses.replace(run, checks=checks, run_dir=None)
    with pytest.raises(AssertionError, match="negative control .* is not rejected"):
        attnlab.testing.check_preset("marion-manifold", run=weak_run, determinism=False)
    assert all(isinstance(c, Check) and c.status == "inconclusive" for c in checks)



EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "plugins" / "attnlab-icl"


def _example_installed() -> bool:
    return any(ep.name == "icl" for ep in registry._group())


needs_example = pytest.mark.skipif(not _example_installed(), reason="the example plugin is not installed "
                                   "(make test installs it; by hand: pip install -e examples/plugins/attnlab-icl)")


def test_the_example_plugin_uses_the_public_api_only():
    """Every ``attnlab`` import of the example plugin is from a public module, by a public name."""
    import ast

    public = {"attnlab": set(attnlab.__all__), "attnlab.extend": None, "attnlab.testing": None}
    for path in EXAMPLE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "attnlab":
                assert node.module in public, f"{path.name} imports from {node.module}"
                names = public[node.module]
                assert names is None or all(a.name in names for a in node.names), f"{path.name}: {node.module}"
                assert all(not a.name.startswith("_") for a in node.names), path.name
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "attnlab":
                        assert a.name in public, f"{path.name} imports {a.name}"


def test_the_example_plugin_is_under_250_lines_of_python_besides_docstrings():
    import ast
    import io
    import tokenize

    total = 0
    for path in (EXAMPLE / "src").rglob("*.py"):
        text = path.read_text()
        doc_lines = set()
        for node in ast.walk(ast.parse(text)):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                doc_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
        code = set()
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                                tokenize.ENDMARKER):
                code.update(range(tok.start[0], tok.end[0] + 1))
        total += len(code - doc_lines)
    assert total < 250, total


@needs_example
def test_the_example_plugin_lists_runs_sweeps_and_reproduces(tmp_path):
    env = {"COLUMNS": "200"}
    res = _attnlab("list", cwd=tmp_path, env_extra=env)
    assert res.returncode == 0 and "icl-lsa" in res.stdout and not res.stderr.strip(), res.stderr
    res = _attnlab("run", "icl-lsa", "--quick", cwd=tmp_path, env_extra=env)  # into results/icl-lsa/<config hash>
    assert res.returncode == 0, res.stderr + res.stdout
    assert res.stdout.count(" yes ") == 6, res.stdout  # two checks per prompt length, all passed
    # the sweep's tasks cut down (60 steps, 2 seeds, 512 test prompts): what is tested is the sweep of a plugin
    res = _attnlab("sweep", "icl-lsa", "--quick", "--grid", "condition=2,5", "--grid", "steps=60", "--grid", "n_seeds=2",
                   "--grid", "n_test=512", "--workers", "1", "--out", "sw", "--no-figures", cwd=tmp_path, env_extra=env)
    assert res.returncode == 0 and "2/2 tasks finished" in res.stdout, res.stderr[-2000:]
    # the plugin's finished run is found and reused by reproduce, as a built-in preset's is
    res = _attnlab("reproduce", "icl", "--quick", "--out", "results", "--workers", "1", cwd=tmp_path, env_extra=env)
    assert res.returncode == 0 and "icl-lsa: reusing finished run" in res.stderr, res.stderr[-2000:]
    report = (tmp_path / "results" / "report.md").read_text()
    assert "## icl-lsa" in report and "Zhang, Frei, Bartlett" in report


