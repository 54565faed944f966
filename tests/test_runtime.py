"""attnlab.runtime: nothing changes at import; float64 scoped; XLA flags and JAX's locked compile cache on request;
compiled programs dropped once the process nears the kernel's limit on memory mappings."""

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

import jax
import pytest

import attnlab.runtime as compiled


def test_programs_are_dropped_past_the_threshold_only(monkeypatch):
    cleared = []
    monkeypatch.setattr(jax, "clear_caches", lambda: cleared.append(1))
    monkeypatch.setattr(compiled, "max_mappings", lambda: 1000)
    monkeypatch.setattr(compiled, "mapping_count", lambda: 400)
    assert not compiled.release_compiled_programs() and not cleared  # 400 of 1000: below half
    assert compiled.release_compiled_programs(force=True) and len(cleared) == 1
    monkeypatch.setattr(compiled, "mapping_count", lambda: 600)
    assert compiled.release_compiled_programs() and len(cleared) == 2
    assert not compiled.release_compiled_programs(fraction=0.7) and len(cleared) == 2
    monkeypatch.setattr(compiled, "mapping_count", lambda: None)  # not Linux: nothing to measure, nothing dropped
    assert not compiled.release_compiled_programs() and len(cleared) == 2


def test_this_process_reports_its_mappings_and_the_limit():
    n = compiled.mapping_count()
    assert n is None or 10 < n < compiled.max_mappings()
    assert compiled.max_mappings() >= 1000


def test_every_preset_run_first_checks_the_mappings(tmp_path, monkeypatch):
    import xarray as xr

    import attnlab.app.store as store
    from attnlab.config import ExperimentConfig
    from attnlab.registry import Preset

    calls = []
    monkeypatch.setattr(compiled, "release_compiled_programs", lambda: calls.append("release"))

    def run(config, key, progress=None):
        calls.append("run")
        return xr.Dataset({"x": ("i", [1.0, 2.0])})

    preset = Preset("tiny", "none", "none", "-", "a preset of one array", ExperimentConfig, run,
                    lambda ds, cfg: ({}, []), lambda ds, cfg: {})
    store.run_preset(preset, ExperimentConfig(), 0, quick=True, out_dir=tmp_path / "run")
    assert calls == ["release", "run"]


def test_importing_attnlab_changes_nothing_in_the_process():
    """Every module of attnlab imported: JAX's configuration, the environment and JAX's cache class as before."""
    code = r"""
import os, json, pkgutil, importlib, jax, matplotlib
from jax._src import lru_cache
before = (dict(os.environ), jax.config.jax_enable_x64, jax.config.jax_compilation_cache_dir,
          lru_cache.LRUCache.put, matplotlib.rcParams._get_backend_or_none())
import attnlab
names = [m.name for m in pkgutil.walk_packages(attnlab.__path__, "attnlab.")]
for name in names:
    importlib.import_module(name)
attnlab.presets()
after = (dict(os.environ), jax.config.jax_enable_x64, jax.config.jax_compilation_cache_dir,
         lru_cache.LRUCache.put, matplotlib.rcParams._get_backend_or_none())
assert before == after, [a for a, b in zip(before, after) if a != b]
print(len(names))
"""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "MPLBACKEND")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) > 30


def test_x64_is_scoped_and_float64_decorator_uses_it():
    import jax.numpy as jnp

    from attnlab import runtime

    with jax.enable_x64(False):
        assert jnp.ones(1).dtype == jnp.float32
        with runtime.x64():
            assert jnp.ones(1).dtype == jnp.float64
        assert jnp.ones(1).dtype == jnp.float32
        assert runtime.float64(lambda: jnp.ones(1).dtype)() == jnp.float64
        with pytest.raises(RuntimeError, match="float64"):
            runtime.require_x64("this")


def test_configure_raises_pythons_default_gc_thresholds_only_and_configured_restores_them():
    """attnlab's thresholds replace Python's defaults (the command line, attnlab.run); a process's own thresholds are
    kept; on leaving configured() the caller's are back."""
    import gc

    before = gc.get_threshold()
    try:
        gc.set_threshold(*compiled.PYTHON_GC_THRESHOLDS)
        with compiled.configured():
            assert gc.get_threshold() == compiled.GC_THRESHOLDS != compiled.PYTHON_GC_THRESHOLDS
        assert gc.get_threshold() == compiled.PYTHON_GC_THRESHOLDS
        gc.set_threshold(500, 5, 5)  # the process's own choice
        with compiled.configured():
            assert gc.get_threshold() == (500, 5, 5)
        assert gc.get_threshold() == (500, 5, 5)
    finally:
        gc.set_threshold(*before)


XARRAY_PROBE = """
import sys, numpy as np, xarray as xr
from xarray.namedarray import pycompat
from attnlab import runtime
from xarray.namedarray import utils
with runtime.xarray_without_dask():
    ds = xr.Dataset({"a": ("x", np.arange(3.0))})
    utils.is_duck_dask_array(ds.a.data)
    inside = "dask.array" in sys.modules, "dask" in sys.modules
cached = "dask" in pycompat._cached_duck_array_modules
utils.is_duck_dask_array(np.arange(3.0))
dask_base = "dask.base" in sys.modules and "dask.array" not in sys.modules
xr.Dataset({"a": ("x", np.arange(3.0))})
print(*inside, cached, dask_base, "dask.array" in sys.modules)
"""


def test_xarray_without_dask_is_scoped_to_its_block():
    """In a fresh process: inside the block xarray makes variables and tests for Dask collections without importing
    Dask; on leaving it xarray's cache no longer holds the answer and its test is its own again: the next variable
    made outside imports dask.array, the next test dask.base (the controls: what the block spares)."""
    res = subprocess.run([sys.executable, "-c", XARRAY_PROBE], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["False", "False", "False", "True", "True"], res.stdout


def test_add_xla_flags_appends_missing_and_keeps_the_users(monkeypatch):
    from attnlab import runtime

    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    runtime.add_xla_flags("--xla_backend_optimization_level=1", "--xla_cpu_multi_thread_eigen=false")
    flags = os.environ["XLA_FLAGS"].split()
    assert flags == ["--xla_backend_optimization_level=3", "--xla_cpu_multi_thread_eigen=false"]
    monkeypatch.delenv("XLA_FLAGS")
    runtime.add_xla_flags("--xla_backend_optimization_level=1")
    assert os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=1"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux only")
def test_a_process_on_one_core_compiles_each_program_as_one_module(tmp_path):
    """configure() adds ONE_CORE_FLAGS in a process that may run on one core only; the control, a process that may
    run on two (where the machine has them), does not; a user's own split count wins."""
    code = ("import os, sys; os.sched_setaffinity(0, set(map(int, sys.argv[1].split(',')))); "
            "from attnlab import runtime; runtime.configure(); print(os.environ['XLA_FLAGS'])")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"ATTNLAB_JAX_CACHE": "off"}
    cores = sorted(os.sched_getaffinity(0))
    allowed = sorted(set(cores) | set(range(min(os.cpu_count() or 1, 2))))  # a test worker is pinned to one core

    def flags(on, **extra):
        return subprocess.run([sys.executable, "-c", code, ",".join(map(str, on))], env=env | extra,
                              capture_output=True, text=True, check=True).stdout.split()

    from attnlab import runtime

    assert set(runtime.ONE_CORE_FLAGS) <= set(flags(cores[:1]))
    if len(allowed) > 1:
        assert not set(runtime.ONE_CORE_FLAGS) & set(flags(allowed[:2]))
    split = next(f for f in runtime.ONE_CORE_FLAGS if f.startswith("--xla_cpu_parallel_codegen_split_count="))
    mine = split.split("=")[0] + "=4"
    theirs = flags(cores[:1], XLA_FLAGS=mine)
    assert theirs.count(mine) == 1 and split not in theirs
    assert set(runtime.ONE_CORE_FLAGS) - {split} <= set(theirs)


def test_a_later_process_loads_programs_from_its_slot_and_concurrent_ones_never_share(tmp_path):
    """Two processes in turn compile the same program through :func:`configure`: the second reuses the first's slot
    and finds it on disk. While a process holds a slot, another takes the next one."""
    code = ("from attnlab import runtime; d = runtime.use_compile_cache(); import jax, jax.numpy as jnp; "
            "print(d.name, float(jax.jit(lambda x: jnp.sin(x) @ x)(jnp.arange(3.0))))")
    env = {**os.environ, "ATTNLAB_JAX_CACHE": str(tmp_path)}
    out = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
           for _ in range(2)]
    assert out[0] == out[1] and out[0].startswith("slot-0 ")
    assert [p for p in (tmp_path / "slot-0").iterdir() if p.name.endswith("-cache")]
    from attnlab import runtime

    held = runtime._claim_slot(tmp_path)  # this process holds slot-0: a new process must take slot-1
    try:
        assert held is not None and held[1].name == "slot-0"
        other = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert other.stdout.startswith("slot-1 ")
    finally:
        os.close(held[0])


def _cache_probe(expression: str, n: int) -> str:
    """The code of a process that takes a slot of the cache, compiles ``x -> expression`` on ``arange(n)`` and prints
    its slot, its compilation-cache hits and misses."""
    return ("import jax, jax.numpy as jnp; seen = []; jax.monitoring.register_event_listener("
            "lambda name, **kw: seen.append(name.rsplit('/', 1)[-1])); "
            "from attnlab import runtime; d = runtime.use_compile_cache(); "
            f"jax.jit(lambda x: {expression})(jnp.arange({float(n)})).block_until_ready(); "
            "print(d.name, seen.count('cache_hits'), seen.count('cache_misses'))")


def test_a_process_finds_the_programs_compiled_in_other_free_slots(tmp_path):
    """A program compiled by a process that ran in slot-1 (slot-0 was held) is loaded from disk by a later process that
    takes slot-0: claiming a slot links in the entries of the free slots."""
    code = _cache_probe("jnp.cos(x) @ x + 7.0", 5)
    env = {**os.environ, "ATTNLAB_JAX_CACHE": str(tmp_path)}
    from attnlab import runtime

    held = runtime._claim_slot(tmp_path)
    try:
        first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    finally:
        os.close(held[0])
    slot, hits, misses = first.stdout.split()
    assert (slot, hits) == ("slot-1", "0") and int(misses) >= 1
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert second.stdout.split() == ["slot-0", misses, "0"]  # every program the first compiled, none compiled again


def test_seeding_links_complete_entries_only(tmp_path):
    """From a free slot every entry is linked; from a held slot only those written before its holder claimed it."""
    from attnlab import runtime

    for k in (1, 2):
        (tmp_path / f"slot-{k}").mkdir(parents=True)
    (tmp_path / "slot-1" / "jit_a-1-cache").write_bytes(b"a" * 4)
    held = tmp_path / "slot-2"
    (held / "jit_old-2-cache").write_bytes(b"o" * 5)
    (held / ".claimed").touch()
    claimed = (held / ".claimed").stat().st_mtime_ns
    os.utime(held / "jit_old-2-cache", ns=(claimed - 10**9, claimed - 10**9))
    (held / "jit_new-2-cache").write_bytes(b"n" * 6)  # may be half written: its process is running
    os.utime(held / "jit_new-2-cache", ns=(claimed + 10**9, claimed + 10**9))
    busy = os.open(held / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(busy, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a running process holds slot-2
    try:
        fd, mine = runtime._claim_slot(tmp_path)
        try:
            assert mine.name == "slot-0"
            assert runtime._seed(tmp_path, mine) == 2
            assert sorted(p.name for p in mine.iterdir() if not p.name.startswith(".")) == ["jit_a-1-cache",
                                                                                        "jit_old-2-cache"]
            assert (mine / "jit_a-1-cache").stat().st_ino == (tmp_path / "slot-1" / "jit_a-1-cache").stat().st_ino
            assert runtime._seed(tmp_path, mine) == 0  # nothing left to link
        finally:
            os.close(fd)
    finally:
        os.close(busy)


def test_seeding_lists_an_unchanged_slot_once(tmp_path, monkeypatch):
    """A slot listed fully once is not listed again while its directory's time (older than the settling margin)
    and its mark stay the same; an entry added there changes the time and is linked at the next call; a slot
    changed within the margin is listed every time (an entry in the same clock tick would not move its time)."""
    from attnlab import runtime

    other = tmp_path / "slot-1"
    other.mkdir(parents=True)
    (other / "jit_a-1-cache").write_bytes(b"a")
    (other / ".lock").touch()  # as a process that held the slot left it
    old = time.time_ns() - 10 * 10**9
    os.utime(other, ns=(old, old))
    listed = []
    names = runtime._names
    monkeypatch.setattr(runtime, "_names", lambda d: listed.append(Path(d).name) or names(d))
    fd, mine = runtime._claim_slot(tmp_path)
    try:
        assert runtime._seed(tmp_path, mine) == 1 and listed.count("slot-1") == 1
        assert runtime._seed(tmp_path, mine) == 0 and listed.count("slot-1") == 1 and listed.count("slot-0") == 2
        (other / "jit_b-1-cache").write_bytes(b"b")  # the directory's time moves to now
        assert runtime._seed(tmp_path, mine) == 1 and listed.count("slot-1") == 2
        assert (mine / "jit_b-1-cache").is_file()
        assert runtime._seed(tmp_path, mine) == 0 and listed.count("slot-1") == 3  # changed within the margin
    finally:
        os.close(fd)


def test_seeding_from_a_held_slot_takes_what_its_process_shared(tmp_path):
    """A running process's entries written after its claim are linked once it has shared them (``.shared`` touched by
    :func:`share_compile_cache`), and those written after that share are not."""
    from attnlab import runtime

    held = tmp_path / "slot-1"
    held.mkdir(parents=True)
    (held / ".claimed").touch()
    claimed = (held / ".claimed").stat().st_mtime_ns
    for name, t in (("jit_old-1-cache", claimed - 10**9), ("jit_mid-1-cache", claimed + 10**9),
                    ("jit_new-1-cache", claimed + 3 * 10**9)):
        (held / name).write_bytes(b"x")
        os.utime(held / name, ns=(t, t))
    busy = os.open(held / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(busy, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        fd, mine = runtime._claim_slot(tmp_path)
        try:
            assert runtime._seed(tmp_path, mine) == 1  # before any share: the entries older than the claim
            (held / ".shared").touch()
            os.utime(held / ".shared", ns=(claimed + 2 * 10**9, claimed + 2 * 10**9))
            assert runtime._seed(tmp_path, mine) == 1
            assert sorted(p.name for p in mine.iterdir() if not p.name.startswith(".")) == ["jit_mid-1-cache",
                                                                                        "jit_old-1-cache"]
        finally:
            os.close(fd)
    finally:
        os.close(busy)


_SHARER = """
import sys, jax, jax.numpy as jnp
from attnlab import runtime
d = runtime.use_compile_cache()
jax.jit(lambda x: jnp.tanh(x) @ x + 11.0)(jnp.arange(6.0)).block_until_ready()
if sys.argv[1] == "share":
    runtime.share_compile_cache()
print(d.name, flush=True)
sys.stdin.read()  # hold the slot until the test closes stdin
"""


@pytest.mark.parametrize("share", [True, False])
def test_a_running_process_offers_its_programs_once_it_shares_them(tmp_path, share):
    """Process A compiles a program and keeps running (its slot held); process B, started next, compiles the same
    program. B loads it from A's slot if A called :func:`share_compile_cache` after compiling, and compiles it again
    if A did not (A's entries newer than its claim may be half written)."""
    code = _cache_probe("jnp.tanh(x) @ x + 11.0", 6)
    env = {**os.environ, "ATTNLAB_JAX_CACHE": str(tmp_path)}
    a = subprocess.Popen([sys.executable, "-c", _SHARER, "share" if share else "keep"], env=env, text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert a.stdout.readline().strip() == "slot-0"
        b = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    finally:
        a.communicate("")
    slot, hits, misses = b.stdout.split()
    assert slot == "slot-1"
    assert (int(hits) >= 1 and misses == "0") if share else (hits == "0" and int(misses) >= 1), b.stdout


def test_the_size_bound_counts_each_linked_file_once_and_spares_held_slots(tmp_path):
    """The bound applies to the cache's files, each counted once however many slots link it; when it is exceeded the
    claiming process empties its slot and the free ones, and leaves a held slot to its process."""
    from attnlab import runtime

    for k in (1, 2, 3):
        (tmp_path / f"slot-{k}").mkdir(parents=True)
    (tmp_path / "slot-1" / "a-cache").write_bytes(b"a" * 10)
    os.link(tmp_path / "slot-1" / "a-cache", tmp_path / "slot-2" / "a-cache")
    (tmp_path / "slot-2" / "b-cache").write_bytes(b"b" * 10)
    (tmp_path / "slot-3" / "c-cache").write_bytes(b"c" * 10)
    busy = os.open(tmp_path / "slot-3" / ".lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(busy, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a running process holds slot-3
    try:
        fd, mine = runtime._claim_slot(tmp_path)
        try:
            assert not runtime._trim(tmp_path, mine, 30)  # 30 bytes of files (40 counted per link)
            assert runtime._trim(tmp_path, mine, 29)
            left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("slot-*/*-cache"))
            assert left == ["slot-3/c-cache"]
        finally:
            os.close(fd)
    finally:
        os.close(busy)


def test_the_size_is_measured_at_most_once_an_interval(tmp_path):
    """The first claim measures the size, the next ones within TRIM_INTERVAL_S do not, one after it does again."""
    from attnlab import runtime

    assert runtime._trim_due(tmp_path)
    assert not runtime._trim_due(tmp_path)
    past = time.time() - runtime.TRIM_INTERVAL_S - 1
    os.utime(tmp_path / runtime._TRIM_MARK, (past, past))
    assert runtime._trim_due(tmp_path) and not runtime._trim_due(tmp_path)


def test_cache_off_leaves_jax_alone(monkeypatch):
    from attnlab import runtime

    monkeypatch.setenv("ATTNLAB_JAX_CACHE", "off")
    assert runtime.use_compile_cache() is None
