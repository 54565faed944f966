"""Start-up of the reference commands: ``--version``, ``-h``, ``list`` and ``show`` import neither JAX nor the papers
(``list`` and ``show`` read the catalogue cache, :mod:`attnlab.app.catalogue`), the cache is rebuilt when stale or
damaged and then prints what an uncached run prints, a broken plugin is never cached, and ``import attnlab`` is lazy.

Each command runs in a fresh process with a cache directory of its own (``ATTNLAB_CACHE_DIR``) and a plugin
distribution of the test's own on ``PYTHONPATH`` (its entry point registers no preset), whose source file a test
touches to make the cache stale."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attnlab.app import catalogue

WRAPPER = textwrap.dedent("""
    import json, os, sys
    from pathlib import Path
    from attnlab.app import catalogue
    if os.environ.get("TEST_SHIPPED"):  # the shipped catalogue, as a test writes it for its own environment
        catalogue.SHIPPED = Path(os.environ["TEST_SHIPPED"])
    from attnlab.app.cli import main
    rc = main(sys.argv[1:])
    sys.stdout.flush()
    mods = sys.modules
    print("@@" + json.dumps({"rc": rc, "jax": "jax" in mods, "marion": "attnlab.marion" in mods,
                             "papers": any(m.startswith(("attnlab.marion", "attnlab.dohmatob", "attnlab.duranthon",
                                                         "attnlab.sakai", "attnlab.bruno")) for m in mods),
                             "numpy": "numpy" in mods, "matplotlib": "matplotlib" in mods}), file=sys.stderr)
""")
"""Runs ``main(argv)`` and reports, on the last line of stderr, its status and what it imported; with
``TEST_SHIPPED`` set, the shipped catalogue is that file."""

LIVE = "import sys; import attnlab.registry; from attnlab.app.cli import main; sys.exit(main(sys.argv[1:]))"
"""The command as it runs without the cache: a process that has the registry reads it (and never the cache)."""


def _plugin(root: Path, dist: str, package: str, presets_py: str) -> Path:
    """A distribution on a path of its own (what pip installs, without pip): entry point ``package`` of the group
    ``attnlab.presets`` -> ``package.presets:presets``."""
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{catalogue.ENTRY_POINT_GROUP}]\n{package} = {package}.presets:presets\n")
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "presets.py").write_text(textwrap.dedent(presets_py))
    return root


def _env(cache: Path, site: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "ATTNLAB_CACHE_DIR": str(cache), "PYTHONPATH": path, "COLUMNS": "120"}


def _attnlab(env, *argv, live=False):
    """``(stdout, stderr without the report, report)`` of ``attnlab argv`` in a fresh process."""
    code = LIVE if live else WRAPPER
    res = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=600)
    if live:
        return res.stdout, res.stderr, {"rc": res.returncode}
    lines = res.stderr.splitlines()
    assert lines and lines[-1].startswith("@@"), res.stderr
    return res.stdout, "\n".join(lines[:-1]), json.loads(lines[-1][2:])


def _catalogues(cache: Path) -> list[Path]:
    return sorted(cache.glob("catalogue-*.json"))


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A cache directory holding the catalogue, written by a first ``attnlab list`` (which imported the papers), and
    that first call's output."""
    root = tmp_path_factory.mktemp("startup")
    site = _plugin(root / "site", "empty-dist", "emptypaper", "def presets():\n    return []\n")
    env = _env(root / "cache", site)
    out, err, report = _attnlab(env, "list")
    assert report["rc"] == 0 and report["marion"], (err, report)
    assert len(_catalogues(root / "cache")) == 1
    return {"env": env, "cache": root / "cache", "site": site, "list": out}


@pytest.mark.parametrize("argv", [["--version"], ["-h"], ["list"], ["show", "marion-manifold"]])
def test_reference_commands_import_neither_jax_nor_the_papers(warm, argv):
    out, err, report = _attnlab(warm["env"], *argv)
    assert report["rc"] == 0, err
    assert not report["jax"] and not report["papers"] and not report["matplotlib"], (argv, report)
    assert out.strip() and not err.strip(), err
    if argv == ["list"]:
        assert out == warm["list"]


def test_cached_show_prints_what_the_registry_gives(warm):
    cached, _, _ = _attnlab(warm["env"], "show", "marion-manifold")
    live, err, report = _attnlab(warm["env"], "show", "marion-manifold", live=True)
    assert report["rc"] == 0, err
    assert cached == live and "config fields" in cached and "n_steps" in cached


def test_cached_unknown_preset_is_the_same_one_line_error(warm):
    _, err, report = _attnlab(warm["env"], "show", "marion-nope")
    assert report["rc"] == 2 and not report["jax"]
    assert err.strip() == "error: unknown preset 'marion-nope' (run 'attnlab list' to see them)"


DEFERRED = ("diffrax", "scipy.integrate", "scipy.optimize", "scipy.sparse.csgraph", "scipy.special")
"""Modules the papers import where they use them, not when their presets load (each costs a tenth of a second or
more at every preset's start)."""


@pytest.mark.parametrize("paper", ["marion", "dohmatob", "duranthon", "sakai", "bruno"])
def test_loading_a_papers_presets_imports_none_of_the_deferred_modules(paper):
    code = f"import sys, attnlab.{paper}.presets; print([m for m in {DEFERRED!r} if m in sys.modules])"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr


def test_the_deferred_imports_are_made_by_the_functions_that_use_them():
    """The control of the test above: the functions that use them import them and compute (E[max of 2 N(0, 1)] =
    1/sqrt(pi); the angle of two particles shrinks; the dominant mode; one cluster of identical tokens)."""
    code = textwrap.dedent("""
        import math, sys
        import numpy as np
        from attnlab.bruno import observables, reduced
        from attnlab.duranthon import population
        print(abs(population.expected_max_gaussian(2) - 1 / math.sqrt(math.pi)) < 1e-9,
              float(reduced.two_point_angle(1.0, [0.5], 1.0)[0]) < 1.0, reduced.dominant_mode(2.0) >= 1,
              observables.clusters(np.tile([[1.0, 0.0]], (50, 1)), beta=4.0)[0] == 1)
        print([m for m in ("scipy.integrate", "scipy.sparse.csgraph", "scipy.special") if m not in sys.modules])
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.stdout.split("\n")[:2] == ["True True True True", "[]"], res.stdout + res.stderr


def test_import_attnlab_is_lazy_and_keeps_its_names():
    code = textwrap.dedent("""
        import sys
        import attnlab
        print(sorted(m for m in ("attnlab.api", "attnlab.registry", "pydantic", "numpy", "jax") if m in sys.modules))
        print(all(name in dir(attnlab) for name in attnlab.__all__))
        from attnlab import run, Check, AttnlabError
        import attnlab.api, attnlab.registry, attnlab.errors
        print(run is attnlab.api.run, attnlab.Preset is attnlab.registry.Preset,
              AttnlabError is attnlab.errors.AttnlabError, "jax" in sys.modules)
        try:
            attnlab.no_such_name
        except AttributeError:
            print("AttributeError")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:4] == ["[]", "True", "True True True False", "AttributeError"]


def test_a_stale_cache_is_rebuilt_and_prints_the_same(warm):
    source = warm["site"] / "emptypaper" / "presets.py"
    source.write_text(source.read_text() + "# edited\n")  # a plugin's source edited: a new key
    out, err, report = _attnlab(warm["env"], "list")
    assert report["rc"] == 0 and report["marion"], (err, report)  # rebuilt: the papers imported again
    assert out == warm["list"]
    assert (warm["cache"] / f"catalogue-{_key(warm['env'])}.json").is_file()
    assert len(_catalogues(warm["cache"])) == 2
    out, _, report = _attnlab(warm["env"], "list")
    assert out == warm["list"] and not report["jax"]


def _key(env) -> str:
    code = "from attnlab.app import catalogue; print(catalogue.cache_key())"
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


def test_the_key_follows_a_sources_content_not_its_modification_time(tmp_path):
    site = _plugin(tmp_path / "site", "touched-dist", "touchedpaper", "def presets():\n    return []\n")
    env = _env(tmp_path / "cache", site)
    key = _key(env)
    source = site / "touchedpaper" / "presets.py"
    st = source.stat()
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a fresh clone, a checkout: same content
    assert _key(env) == key
    source.write_text(source.read_text() + "# edited\n")
    assert _key(env) != key


def test_a_new_cache_directory_reads_the_shipped_catalogue_and_writes_nothing(warm, tmp_path):
    """The shipped catalogue, written for this environment's key (in an environment of attnlab alone it is the
    package's own), is read by the first ``list`` and ``show`` of an empty cache directory: no paper imported, nothing
    written, the same output. A shipped catalogue of another key is not read."""
    written = warm["cache"] / f"catalogue-{_key(warm['env'])}.json"
    shipped = tmp_path / "catalogue.json"
    shipped.write_text(written.read_text())
    env = {**warm["env"], "ATTNLAB_CACHE_DIR": str(tmp_path / "new"), "TEST_SHIPPED": str(shipped)}
    for argv in (["list"], ["show", "marion-manifold"]):
        out, err, report = _attnlab(env, *argv)
        assert report["rc"] == 0 and not report["jax"] and not report["papers"], (argv, err, report)
        assert out == (warm["list"] if argv == ["list"] else _attnlab(warm["env"], *argv)[0])
    assert not (tmp_path / "new").exists()
    data = json.loads(written.read_text())
    shipped.write_text(json.dumps({**data, "key": "another"}))
    out, err, report = _attnlab(env, "list")
    assert report["rc"] == 0 and report["marion"] and out == warm["list"], (err, report)  # built, as before
    assert len(_catalogues(tmp_path / "new")) == 1


def test_the_shipped_catalogue_is_current():
    """The package's catalogue was written (``make catalogue``) from these sources, lists what the registry lists,
    and, where this environment's versions are those it was written with, under the key of attnlab alone."""
    data = json.loads(catalogue.SHIPPED.read_text(encoding="utf-8"))
    assert data["sources"] == catalogue.source_digest("attnlab"), "attnlab's sources changed: run make catalogue"
    shipped = catalogue._read(catalogue.SHIPPED, data["key"])
    assert shipped == catalogue.own_entries(), "the registry lists other presets: run make catalogue"
    if data["basis"] == catalogue.basis():
        assert data["key"] == catalogue.cache_key(own_only=True)


def test_a_corrupt_cache_is_ignored_and_rewritten(warm):
    path = Path(warm["cache"]) / f"catalogue-{_key(warm['env'])}.json"
    assert path.is_file()
    path.write_text('{"format": 1, "presets": [')  # truncated
    out, err, report = _attnlab(warm["env"], "list")
    assert report["rc"] == 0 and report["marion"] and not err.strip(), err
    assert out == warm["list"]
    assert json.loads(path.read_text())["presets"]


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"format": 1, "key": "K", "presets": [{"name": 1}]}',
                                  '{"format": 1, "key": "K", "presets": [{"name": "a", "paper": "a", "citation": "",'
                                  ' "figure": "", "description": "", "fields": [{"name": "x"}]}]}',
                                  '{"format": 99, "key": "K", "presets": []}', '{"format": 1, "key": "L", "presets": []}'])
def test_a_malformed_cache_file_reads_as_missing(tmp_path, text):
    path = tmp_path / "catalogue-K.json"
    path.write_text(text)
    assert catalogue._read(path, "K") is None
    assert catalogue._read(tmp_path / "missing.json", "K") is None


def test_a_broken_plugin_is_reported_and_never_cached(tmp_path):
    site = _plugin(tmp_path / "site", "broken-dist", "brokenpaper", "import no_such_module_xyz\n")
    env = _env(tmp_path / "cache", site)
    out, err, report = _attnlab(env, "list")
    assert report["rc"] == 0 and "marion-manifold" in out
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "'brokenpaper'" in lines[0] and "ModuleNotFoundError" in lines[0], err
    assert _catalogues(tmp_path / "cache") == []  # the next call loads the plugin again, and says so again


def test_the_catalogue_names_the_registrys_entry_point_group():
    from attnlab import registry

    assert catalogue.ENTRY_POINT_GROUP == registry.ENTRY_POINT_GROUP


def test_loading_every_paper_imports_no_matplotlib_until_a_figure_is_drawn():
    """The papers' presets give their figure functions as ``deferred("module:name")``: the whole catalogue loads, and
    a preset's plot resolves to its figure function, without matplotlib; the first draw imports it."""
    code = textwrap.dedent("""
        import sys
        from attnlab.registry import all_presets
        presets = all_presets()
        before = "matplotlib" in sys.modules
        p = presets["sakai-scores"]
        resolved = p.plot.__name__ == "plot" and p.plot.__module__ == "attnlab.sakai.figures"
        import xarray as xr, numpy as np
        try:
            p.plot(xr.Dataset(), None)
        except Exception:
            pass
        print(before, resolved, "matplotlib" in sys.modules)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert res.stdout.split() == ["False", "True", "True"], res.stdout + res.stderr


def test_deferred_refuses_a_target_without_module_and_name():
    from attnlab.registry import deferred

    for bad in ("attnlab.sakai.figures", ":plot", "attnlab.sakai.figures:"):
        with pytest.raises(ValueError):
            deferred(bad)


def test_help_defers_markdown_and_tracebacks_and_prints_what_typer_prints():
    """``attnlab -h`` loads Typer's help formatter without ``rich.markdown`` and ``rich.traceback``
    (:mod:`attnlab.app.help_format`): the same page as with the formatter imported the plain way, and a later
    ``import rich.markdown`` is the real module."""
    code = textwrap.dedent("""
        import contextlib, io, json, sys
        if sys.argv[1] == "plain":
            import typer.rich_utils
        from attnlab.app.cli import main
        page = io.StringIO()
        with contextlib.redirect_stdout(page):
            rc = main(["run", "-h"])
        loaded = [m for m in ("markdown_it", "pygments", "rich.markdown", "rich.traceback") if m in sys.modules]
        import rich.markdown, typer.rich_utils
        real = type(typer.rich_utils.Markdown("*x*")) is rich.markdown.Markdown
        print(json.dumps({"page": page.getvalue(), "rc": rc, "loaded": loaded, "real": real}))
    """)
    env = {**os.environ, "COLUMNS": "120"}
    deferred, plain = [json.loads(subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True,
                                                 env=env, timeout=600, check=True).stdout) for how in ("deferred", "plain")]
    assert deferred["page"] == plain["page"] and "Usage: attnlab run" in deferred["page"]
    assert deferred["rc"] == plain["rc"] == 0 and deferred["real"] and plain["real"]
    assert deferred["loaded"] == [] and "rich.markdown" in plain["loaded"]  # the control: the plain way loads it
