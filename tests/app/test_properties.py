"""Property tests over the command line: random ``--set``, ``--grid``, ``--seed`` and ``--out`` values are either
accepted, with a valid config, or rejected with exit status 2, one line on stderr, no traceback and nothing written.

Cheap: the store's ``run_preset`` (for ``run``) and the Dask engine (for ``sweep``) are replaced by stubs that
raise :class:`Reached`, so an accepted input never simulates anything; the stub records what the CLI validated.
"""

import contextlib
import math
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import attnlab.app.cli as cli
import attnlab.app.store as store
from attnlab.config import parse_value
from attnlab.registry import get_preset

PRESET = "marion-manifold"
FIELDS = sorted(get_preset(PRESET).config_cls.model_fields)
JUNK_KEYS = ["", " ", "nope", "D", "step size", "n_steps.x", "=", "__class__", "model_config"]
VALUES = ["inf", "-inf", "Infinity", "-Infinity", "nan", "NaN", "1e300", "-1e300", "1e400", "true", "false", "True",
          "", " ", "0", "-1", "1", "2", "0.5", "1e-3", "400", "100", "null", "[]", "[1, 2]", "[true]", "[1e999]",
          '"x"', "{}", "sphere", "pgd", "reduced", "full", str(2**63), str(10**30), "9" * 400, "0x10", "1_000",
          "\x00", "é"]
OUTS = ["", ".", "..", "./", "run", "a/b", "a-file", "a-file/x", "sub/..", "sub/../sub", "/", "\x00x", " ", "-"]


class Reached(Exception):
    def __init__(self, **kwargs):
        super().__init__("reached")
        self.kwargs = kwargs


def _reached_run(preset, config, seed, **kwargs):
    raise Reached(preset=preset, config=config, seed=seed, **kwargs)


def _reached_engine(tasks, *args, **kwargs):
    raise Reached(tasks=tasks)


text_values = st.one_of(st.sampled_from(VALUES), st.text(max_size=12),
                        st.integers(-2**70, 2**70).map(str), st.floats().map(repr))
sets = st.lists(st.tuples(st.one_of(st.sampled_from(FIELDS), st.sampled_from(JUNK_KEYS)), text_values),
                max_size=3)
seeds = st.one_of(st.integers(0, 10**6).map(str), st.integers(-5, 2**70).map(str),
                  st.sampled_from(["", "x", "1.5", "-0", "1e3", str(2**63 - 1)]))
outs = st.one_of(st.sampled_from(OUTS), st.text(max_size=8), st.sampled_from(["run", "x/y", "sub/run"]))


@contextlib.contextmanager
def _sandbox():
    """A fresh working directory holding a file ``a-file`` and a directory ``sub`` (restored afterwards)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)
        try:
            Path("a-file").write_text("x")
            Path("sub").mkdir()
            yield Path(d)
        finally:
            os.chdir(old)


def _snapshot(root: Path):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _check_rejection(rc, err, root, before):
    event("rejected")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2, (rc, err)
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert _snapshot(root) == before


def _assert_valid_config(config):
    cls = type(config)
    again = cls(**config.model_dump())  # the validators accept it again
    assert again == config
    for name, value in config.model_dump().items():
        flat = value if isinstance(value, (list, tuple)) else [value]
        for v in flat:
            if isinstance(v, float):
                assert math.isfinite(v) or "inf allowed" in (cls.model_fields[name].description or ""), (name, v)
            if isinstance(v, bool):
                assert cls.model_fields[name].annotation is bool, (name, v)


@pytest.fixture
def stubbed(monkeypatch):
    monkeypatch.setattr(store, "run_preset", _reached_run)
    monkeypatch.setattr(cli, "_engine", _reached_engine)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=sets, seed=seeds, out=st.one_of(st.none(), outs), force=st.booleans())
def test_run_accepts_valid_input_or_rejects_it_in_one_line(stubbed, capsys, pairs, seed, out, force):
    argv = ["run", PRESET, "--quick"]
    for k, v in pairs:
        argv += ["--set", f"{k}={v}"]
    argv += ["--seed", seed] + (["--out", out] if out is not None else []) + (["--force"] if force else [])
    with _sandbox() as root:
        before = _snapshot(root)
        capsys.readouterr()
        try:
            rc = cli.main(argv)
        except Reached as r:
            event("accepted")
            assert 0 <= r.kwargs["seed"] <= store.MAX_SEED
            _assert_valid_config(r.kwargs["config"])
            if out is not None:  # the output path passed its checks: a new directory, not "." nor a parent of it
                resolved = Path(out).resolve()
                assert resolved != root.resolve() and resolved not in root.resolve().parents, out
                assert not (resolved.exists() and not resolved.is_dir()), out
            last = {k.strip(): v for k, v in pairs}  # the last --set of a key wins
            for k, v in last.items():  # booleans were not read as numbers
                if k in FIELDS and isinstance(parse_value(v.strip()), bool):
                    assert getattr(r.kwargs["config"], k) is parse_value(v.strip()), (k, v)
            assert _snapshot(root) == before  # nothing written before the run
            return
        _check_rejection(rc, capsys.readouterr().err, root, before)


grid_items = st.lists(st.one_of(st.sampled_from(VALUES), st.text(max_size=6)), min_size=0, max_size=4)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(grids=st.lists(st.tuples(st.one_of(st.sampled_from(FIELDS), st.sampled_from(JUNK_KEYS)), grid_items,
                                st.booleans()), max_size=3),
       n_seeds=st.one_of(st.integers(-3, 2**70).map(str), st.sampled_from(["", "x", "2"])),
       plot=st.one_of(st.none(), st.sampled_from(["oracle_risk", "no such", "", "1x", "a.b"])))
def test_sweep_accepts_valid_grids_or_rejects_them_in_one_line(stubbed, capsys, grids, n_seeds, plot):
    argv = ["sweep", PRESET, "--quick", "--seeds", n_seeds, "--out", "sw"]
    for key, items, raw in grids:
        argv += ["--grid", f"{key}={','.join(items)}" if not raw else f"{key}{','.join(items)}"]
    if plot is not None:
        argv += ["--plot", plot]
    with _sandbox() as root:
        before = _snapshot(root)
        capsys.readouterr()
        try:
            rc = cli.main(argv)
        except Reached as r:
            event("accepted")
            assert r.kwargs["tasks"]
            for task in r.kwargs["tasks"]:
                from attnlab.registry import resolve_config

                _assert_valid_config(resolve_config(PRESET, quick=True, overrides=dict(task.overrides)))
            return
        _check_rejection(rc, capsys.readouterr().err, root, before)


api_values = st.one_of(st.sampled_from([math.inf, -math.inf, math.nan, 1e300, -1, 0, 1, 2, 0.5, 400, True, False, None,
                                        "x", "", [], [1, 2], (), {}, 2**64, -2**64, b"1"]),
                       st.integers(-2**70, 2**70), st.floats(), st.text(max_size=6))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(overrides=st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.sampled_from(JUNK_KEYS[2:])), api_values,
                                 max_size=3),
       seed=api_values, quick=st.one_of(st.booleans(), api_values), force=st.one_of(st.booleans(), api_values),
       out=st.one_of(st.none(), outs, st.integers(), st.floats()))
def test_the_api_validates_its_arguments_as_the_command_line_does(monkeypatch, overrides, seed, quick, force, out):
    """attnlab.run: every draw is run (here: reaches the stubbed computation with a valid config and seed) or refused
    with a one-line AttnlabError; never another exception."""
    import attnlab
    import attnlab.api as api
    from attnlab.errors import AttnlabError

    monkeypatch.setattr(api, "execute", lambda preset, config, seed, progress=None: _reached_run(preset, config, seed))
    monkeypatch.setattr(store, "run_preset", _reached_run)
    with _sandbox() as root:
        before = _snapshot(root)
        try:
            attnlab.run(PRESET, quick=quick, seed=seed, out=out, force=force, **overrides)
        except Reached as r:
            event("accepted")
            assert isinstance(r.kwargs["seed"], int) and 0 <= r.kwargs["seed"] <= store.MAX_SEED
            assert isinstance(quick, bool) and isinstance(force, bool)
            _assert_valid_config(r.kwargs["config"])
        except AttnlabError as e:
            event("rejected")
            assert len(str(e).splitlines()) == 1, str(e)
            assert _snapshot(root) == before
