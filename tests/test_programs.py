"""Saved traced programs (:mod:`attnlab.programs`): a later process calls the saved program instead of tracing, with
the numbers of ``jax.jit``; a program is used only for the code, static values and shapes it was traced for."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attnlab import programs

MODULE = """
from functools import partial
import jax.numpy as jnp
from attnlab.programs import jit

@partial(jit, static_argnames=("k",))
def f(x, c, k):
    return jnp.{op}(x) * c ** k


@partial(jit, static_argnames=("k",))
def g(x, c, k):  # a host callback: jax.export cannot save it
    import jax
    import numpy as np

    return jax.pure_callback(lambda y: np.{op}(y), jax.ShapeDtypeStruct(x.shape, x.dtype), x) * c ** k


@partial(jit, static_argnames=("k",), compiler_options={{"xla_no_such_option": True}})
def h(x, c, k):  # f with a compiler option XLA refuses: shows that the options reach the compiler
    return jnp.{op}(x) * c ** k
"""

MAIN = """
import json, sys
import jax, numpy as np
from attnlab import programs, runtime
if sys.argv[1] != "off":
    runtime.use_compile_cache(sys.argv[1])
if sys.argv[3] == "fixed-fingerprint":  # the control: a key blind to the code
    programs.fingerprint = lambda package="attnlab": "0" * 64
import probe_mod
traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda n, s, **kw: traced.append(kw.get("fun_name")) if n.endswith("jaxpr_trace_duration") else None)
with jax.enable_x64(True):
    x = np.linspace(0.0, 3.0, int(sys.argv[4]))
    fn = getattr(probe_mod, sys.argv[5])
    out = fn(x, 2.0, k=int(sys.argv[2]))
    traces = traced.count(sys.argv[5])
    plain = fn.plain(x, 2.0, k=int(sys.argv[2]))
print(json.dumps({"out": np.asarray(out).tolist(), "plain": np.asarray(plain).tolist(), "traced": traces > 0,
                  "traces": traces}))
"""


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "main.py").write_text(MAIN)

    def run(cache="cc", k=3, op="sin", fingerprint="real", n=5, fn="f"):
        (tmp_path / "probe_mod.py").write_text(MODULE.format(op=op))
        cache_arg = cache if cache == "off" else str(tmp_path / cache)
        res = subprocess.run([sys.executable, "main.py", cache_arg, str(k), fingerprint, str(n), fn], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300, env=_env(tmp_path))
        assert res.returncode == 0, res.stderr[-2000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    return run


def _env(tmp_path: Path) -> dict:
    import os

    env = dict(os.environ)
    # probe_mod.py is rewritten within a second at the same size (sin, cos): a bytecode file written by one probe
    # would pass for current in the next (Python compares the source's size and mtime in whole seconds)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(programs.__file__).parents[1]), str(tmp_path)])
    return env


def _saved(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cc" / "programs").rglob("*.jaxexport"))


def test_a_later_process_calls_the_saved_program_with_the_numbers_of_jax_jit(probe, tmp_path):
    first = probe()
    assert first["traced"] and first["out"] == first["plain"] and len(_saved(tmp_path)) == 1
    second = probe()
    assert not second["traced"]  # the saved program, not a new trace
    assert second["out"] == first["out"] == second["plain"]
    assert np.allclose(second["out"], np.sin(np.linspace(0, 3, 5)) * 8)
    # another static value or shape is another program: traced and saved
    assert probe(k=4)["traced"] and probe(n=6)["traced"] and len(_saved(tmp_path)) == 3


def test_compiler_options_reach_the_compiler_whether_the_program_is_traced_or_loaded(probe, tmp_path):
    """``h`` is ``f`` with a compiler option XLA does not know: its first call (traced, then saved before it is
    compiled), a later process's (the saved program loaded) and a call without the cache (plain ``jax.jit``) all
    fail with XLA's refusal, while ``f`` (the control, no option) runs."""
    assert probe(fn="f")["out"]
    with pytest.raises(AssertionError, match="No such compile option"):
        probe(fn="h")
    assert len(_saved(tmp_path)) == 2  # f's and h's
    for cache in ("cc", "off"):
        with pytest.raises(AssertionError, match="No such compile option"):
            probe(fn="h", cache=cache)


def test_changed_code_is_traced_again_and_a_key_blind_to_it_would_not(probe, tmp_path):
    probe(op="sin")
    changed = probe(op="cos")
    assert changed["traced"] and changed["out"] == changed["plain"]
    assert np.allclose(changed["out"], np.cos(np.linspace(0, 3, 5)) * 8)
    # the control: with the code's fingerprint held fixed, the program saved for sin answers for cos
    probe(op="sin", fingerprint="fixed-fingerprint")
    stale = probe(op="cos", fingerprint="fixed-fingerprint")
    assert not stale["traced"] and stale["out"] != stale["plain"]


def test_an_unreadable_program_is_traced_again_and_replaced(probe, tmp_path):
    probe()
    (saved,) = _saved(tmp_path)
    saved.write_bytes(saved.read_bytes()[:100])
    again = probe()
    assert again["traced"] and again["out"] == again["plain"]
    assert saved.stat().st_size > 100 and not list(saved.parent.glob(".*.tmp"))
    assert not probe()["traced"]


def test_a_program_export_cannot_save_is_traced_once_by_later_processes(probe, tmp_path):
    first = probe(fn="g")
    assert first["traces"] == 2 and first["out"] == first["plain"]  # the export's attempt, then jax.jit's trace
    assert not _saved(tmp_path) and len(list((tmp_path / "cc" / "programs").rglob("*.unsaved"))) == 1
    again = probe(fn="g")
    assert again["traces"] == 1 and again["out"] == first["out"]  # jax.jit's trace only


def _run_script(tmp_path: Path, name: str, text: str) -> dict:
    """Run ``text`` as the script ``name`` in a fresh process with the compilation cache ``tmp_path/cc``: the JSON
    object of its last line."""
    (tmp_path / name).write_text(text)
    res = subprocess.run([sys.executable, name, str(tmp_path / "cc")], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, env=_env(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


CHAIN = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from attnlab import programs, runtime
runtime.use_compile_cache(sys.argv[1])

@programs.jit
def scale(x, c):  # its second result is weak-typed (c's type: a Python float's)
    return jnp.sin(x), jnp.broadcast_to(c, x.shape) * 2

@programs.jit
def combine(y, z):
    return y + z

traced = []
jax.monitoring.register_event_duration_secs_listener(
    lambda n, s, **kw: traced.append(kw.get("fun_name")) if n.endswith("jaxpr_trace_duration") else None)
with jax.enable_x64(True):
    y, z = scale(np.linspace(0.0, 3.0, 5), 2.0)
    out = combine(y, z)
print(json.dumps({"weak": bool(z.weak_type), "out": np.asarray(out).tolist(),
                  "traced": sorted({t for t in traced if t in ("scale", "combine")})}))
"""


def test_a_programs_results_have_the_types_a_later_process_gets(tmp_path):
    """A result of the process that traces a program has the types a later process's call of the saved program
    gives it (``jax.export``'s serialisation keeps no weak types): the program it feeds then has the same argument
    types, hence the same key, in both, and is traced in the first process only."""
    first, second, third = (_run_script(tmp_path, "chain.py", CHAIN) for _ in range(3))
    assert first["traced"] == ["combine", "scale"]
    assert second["traced"] == third["traced"] == []  # both programs loaded: combine was saved for these types
    assert first["weak"] == second["weak"] and len(_saved(tmp_path)) == 2
    assert first["out"] == second["out"] == third["out"]
    assert np.allclose(first["out"], np.sin(np.linspace(0, 3, 5)) + 4)


LINALG = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax._src.export import _export
from attnlab import programs, runtime
runtime.use_compile_cache(sys.argv[1])
jax_function = _export._ensure_backends_initialized

@programs.jit
def plain(x):
    return jnp.sin(x) @ x

@programs.jit
def spectrum(x):  # a LAPACK routine (syevd)
    return jnp.linalg.eigvalsh(x)

x = np.diag([3.0, 1.0, 2.0])
with jax.enable_x64(True):
    out = plain(x)
    after_plain = "scipy.linalg" in sys.modules
    again = plain(x)  # compiled: no lowering, no set-up
    eig = spectrum(x)
    jax.clear_caches()
    relowered = plain(x)  # lowered again (with JAX's set-up, done by now)
print(json.dumps({"plain": np.asarray(out).tolist(), "after_plain": after_plain, "eig": np.asarray(eig).tolist(),
                  "again": np.asarray(again).tolist(), "relowered": np.asarray(relowered).tolist(),
                  "after_eig": "scipy.linalg" in sys.modules,
                  "restored": _export._ensure_backends_initialized is jax_function}))
"""


def test_saved_programs_set_up_linear_algebra_only_where_they_call_it(tmp_path):
    """Calling a saved program that calls no LAPACK routine leaves JAX's LAPACK set-up (``scipy.linalg``'s import)
    undone, in the process that saved it and in a later one that loads it; one that does call LAPACK (the control)
    has it set up and computes; JAX's function is its own again afterwards. (No path here says "lapack", the string
    the check looks for in a program's module, which holds its source paths.)"""
    for _ in range(2):  # saved, then loaded
        out = _run_script(tmp_path, "routines.py", LINALG)
        assert not out["after_plain"] and out["after_eig"] and out["restored"]
        assert np.allclose(out["plain"], np.sin(np.diag([3.0, 1.0, 2.0])) @ np.diag([3.0, 1.0, 2.0]))
        assert np.allclose(out["eig"], [1.0, 2.0, 3.0])
        assert out["again"] == out["relowered"] == out["plain"]
    assert len(_saved(tmp_path)) == 2


def test_without_attnlabs_compile_cache_nothing_is_saved(probe, tmp_path):
    res = probe(cache="off")
    assert res["traced"] and res["out"] == res["plain"] and not (tmp_path / "cc").exists()


def test_the_switch_turns_saving_and_loading_off(probe, tmp_path, monkeypatch):
    probe()
    monkeypatch.setenv("ATTNLAB_PROGRAMS", "off")
    res = probe()
    assert res["traced"] and res["out"] == res["plain"]  # the saved program is not loaded
    assert probe(k=4)["traced"] and len(_saved(tmp_path)) == 1  # nor a new one saved


def test_a_function_without_a_source_file_is_not_saved(tmp_path):
    """A function defined where there is no file to fingerprint (``python -c``, a notebook) could change without its
    key changing: its programs are traced by jax.jit, and nothing is saved."""
    code = textwrap.dedent("""
        import sys, jax, jax.numpy as jnp
        from attnlab import programs, runtime
        runtime.use_compile_cache(sys.argv[1])
        f = programs.jit(lambda x: jnp.sin(x))
        print(float(f(1.0)), programs.fingerprint("__main__"))
    """)
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "cc")], capture_output=True, text=True,
                         timeout=300, env=_env(tmp_path))
    assert res.returncode == 0, res.stderr[-2000:]
    value, code = res.stdout.split()
    assert abs(float(value) - np.sin(1.0)) < 1e-6 and code == "None"
    assert not list((tmp_path / "cc").rglob("*.jaxexport"))


def test_old_fingerprints_folders_are_pruned_and_nothing_else(tmp_path):
    import os

    root = tmp_path / "programs"
    names = [f"{i:020x}" for i in range(programs.KEEP_FINGERPRINTS + 3)]
    for i, name in enumerate(names):
        (root / name).mkdir(parents=True)
        (root / name / "a.jaxexport").write_bytes(b"x")
        os.utime(root / name, (1000 + i, 1000 + i))
    # a user's folders under programs/ (another name, or a fingerprint's name holding a file of the user's): kept
    for name, file in (("my-notes", "draft.txt"), ("f" * 20, "results.csv")):
        (root / name).mkdir()
        (root / name / file).write_text("mine")
        os.utime(root / name, (1, 1))
    current = root / ("c" * 20)
    programs._prune(current)
    kept = sorted(p.name for p in root.iterdir())
    assert kept == sorted([current.name, *names[3:], "my-notes", "f" * 20])
    assert (root / "my-notes" / "draft.txt").read_text() == "mine"


def test_jit_refuses_what_it_cannot_key():
    with pytest.raises(TypeError, match="args"):
        programs.jit(lambda *xs: xs[0])
    with pytest.raises(TypeError, match="args"):
        programs.jit(lambda x, **kw: x)


def test_static_values_are_keyed_by_structure():
    import dataclasses

    @dataclasses.dataclass(frozen=True)
    class Act:
        name: str
        c: float = 0.0

    assert programs._plain((("act", Act("erf", 0.5)),)) == programs._plain((("act", Act("erf", 0.5)),))
    assert programs._plain((("act", Act("erf", 0.5)),)) != programs._plain((("act", Act("erf", -0.5)),))
    assert programs._plain(-0.0) != programs._plain(0.0)  # jax.jit's static hash does not tell them apart
    with pytest.raises(programs._NotPlainData):
        programs._plain((("fn", textwrap.dedent),))


def test_arguments_bound_as_the_signature_binds_them_whatever_their_order():
    """A call's arguments, positional or by keyword in any order, name the same saved program (one trace), as
    ``inspect.Signature.bind`` would order them; a call that ``bind`` refuses raises ``TypeError`` as ``jax.jit``'s
    does, and leaves nothing behind (the next good call traces nothing)."""
    from functools import partial

    from attnlab import runtime

    if runtime.compile_cache_slot() is None:
        pytest.skip("attnlab's compile cache is off in this process (ATTNLAB_JAX_CACHE=off): nothing is saved")
    import uuid

    traced = []
    tag = uuid.uuid4().hex  # a static value of this run only: no earlier process saved these programs

    @partial(programs.jit, static_argnames=("k", "tag"))
    def scaled(x, c, k=2, tag=""):
        traced.append(k)
        return x * c**k

    x = np.linspace(0.0, 1.0, 4)
    with runtime.x64():
        outs = [scaled(x, 3.0, k=2, tag=tag), scaled(x, c=3.0, k=2, tag=tag), scaled(tag=tag, k=2, c=3.0, x=x),
                scaled(c=3.0, x=x, tag=tag, k=2)]
        assert traced == [2]
        for bad in (lambda: scaled(x, tag=tag), lambda: scaled(x, 3.0, c=3.0, tag=tag),
                    lambda: scaled(x, 3.0, z=1.0, tag=tag), lambda: scaled(x, 3.0, 2, tag, 5)):
            with pytest.raises(TypeError):
                bad()
        # no call of this function marked unsaved (here, and so on disk for later processes)
        assert not any(k[0] is scaled.__wrapped__ and v is programs._UNSAVED for k, v in programs._MEMO.items())
        outs.append(scaled(x, 3.0, 2, tag))
        assert traced == [2]
        assert np.asarray(scaled(x, 3.0, k=3, tag=tag)).tolist() == (x * 27.0).tolist() and traced == [2, 3]
    for out in outs:
        assert np.asarray(out).tolist() == (x * 9.0).tolist()
