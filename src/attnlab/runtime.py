"""Process-wide settings that attnlab asks for, applied only when asked: float64, XLA flags, the compile cache, and
the memory-mapping guard.

Importing attnlab changes nothing in the process. The command line, the Dask sweep workers and :func:`attnlab.run`
call :func:`configure` (XLA flags and the persistent compilation cache) and compute every preset inside :func:`x64`;
a notebook can call the same functions.

* **float64** (:func:`x64`, :func:`float64`). Closed-form risks, dynamics and distances to invariant manifolds are
  compared at round-off level, which float32 cannot resolve. :func:`x64` is a scoped context (JAX's own
  ``jax.enable_x64`` state, local to the thread): inside it JAX computes in float64, outside it the user's setting
  holds. The public functions re-exported by each paper's package run inside it (decorated with :func:`float64`).
* **XLA flags** (:func:`add_xla_flags`). attnlab asks XLA's CPU backend for LLVM optimisation level 1
  (``--xla_backend_optimization_level=1``, the default being 3) and its loop emitters
  (``--xla_cpu_use_fusion_emitters=false``): the presets run many small programs, whose compilation both shorten;
  the few programs whose run time dominates ask for the fusion emitters back (:data:`LONG_RUNNING`). A flag already
  in ``XLA_FLAGS`` wins (``--xla_backend_optimization_level=3 --xla_cpu_use_fusion_emitters=true`` restores XLA's
  defaults). A process that may run on one core only (a pinned sweep or test worker, a command under ``taskset``)
  also asks for one LLVM module per program (:data:`ONE_CORE_FLAGS`). Flags act only before JAX starts its backend
  (the first computation of the process).
* **Compilation cache** (:func:`use_compile_cache`). A preset's run time on a small machine is mostly XLA
  compilation; JAX's persistent cache lets a later process load a program from disk. Each process takes a cache
  directory of its own (a locked slot), so no process ever reads an entry another is still writing, and on taking
  it links in the other slots' entries that no running process can be writing: a process finds every program
  compiled by the processes that ended before it started, whichever slot they ran in. Long-lived processes (sweep
  workers, test workers) also exchange their programs between two tasks (:func:`share_compile_cache`). Directory:
  ``$ATTNLAB_JAX_CACHE`` (``off`` disables it), default ``~/.cache/attnlab/jax``; when its entries exceed
  ``$ATTNLAB_JAX_CACHE_MAX_MB`` (default 2048), a process claiming a slot empties it and every free slot.
* **Garbage collection** (:data:`GC_THRESHOLDS`). Tracing a program allocates Python objects by the hundred
  thousand; at Python's default thresholds (700, 10, 10) the cyclic collector then runs hundreds of times per
  preset, its full collections traversing every object of JAX, SciPy and attnlab each time (``docs/speed.md``
  gives the cost). :func:`configure` raises the thresholds where they are Python's defaults (a process
  that set its own keeps them; :func:`configured` restores the caller's on exit).
* **Memory mappings** (:func:`release_compiled_programs`). XLA's CPU backend gives every compiled kernel its own
  memory mappings and JAX keeps every program alive, so a long-lived process (a test worker, a Dask worker, a
  notebook running many presets) can reach the kernel's ``vm.max_map_count`` (65,530 by default), past which XLA's
  JIT fails ("LLVM compilation error: Cannot allocate memory") or crashes. This drops JAX's compiled programs once
  the process holds more than a fraction of the limit; arrays are untouched and programs recompile (or load from the
  cache) when next called. Linux only; elsewhere it does nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

__all__ = ["OPTIMISATION_FLAGS", "ONE_CORE_FLAGS", "GC_THRESHOLDS", "PYTHON_GC_THRESHOLDS", "LONG_RUNNING",
           "add_xla_flags", "xla_flags_with", "use_compile_cache", "compile_cache_slot", "share_compile_cache",
           "usable_cores", "one_core", "configure", "configured", "accelerator_plugin", "xarray_without_dask", "x64",
           "float64", "require_x64", "mapping_count", "max_mappings", "release_compiled_programs"]

OPTIMISATION_FLAGS: tuple[str, ...] = ("--xla_backend_optimization_level=1", "--xla_cpu_use_fusion_emitters=false")
"""The XLA flags :func:`configure` adds where JAX has no accelerator plugin, both for shorter compilation of the
presets' many small programs on the CPU backend: LLVM optimisation level 1 (the same run time), and XLA's older loop
emitters instead of its fusion emitters (the default), which compile faster. The fusion emitters run some programs
faster: those whose run time outweighs their compilation ask for them back (:data:`LONG_RUNNING`)."""

GC_THRESHOLDS: tuple[int, int, int] = (10_000, 20, 20)
"""The cyclic garbage collector's thresholds (:func:`gc.set_threshold`) under :func:`configure`: a collection of
the youngest generation every 10,000 net allocations instead of 700, of the older ones every 20 of the younger
instead of 10. Cycles are freed as before, a little later; memory is still released by reference counting at
once."""

PYTHON_GC_THRESHOLDS: tuple[int, int, int] = (700, 10, 10)
"""Python's own default thresholds: :func:`configure` replaces only these."""

ONE_CORE_FLAGS: tuple[str, ...] = ("--xla_cpu_parallel_codegen_split_count=1", "--xla_cpu_multi_thread_eigen=false")
"""The XLA flags :func:`configure` adds, besides :data:`OPTIMISATION_FLAGS`, in a process that may run on one core
only (:func:`one_core`), and that a local cluster's workers start with (:data:`attnlab.app.sweep.WORKER_XLA_FLAGS`):

* one LLVM module per program: XLA's CPU compiler splits each program's LLVM module into up to 32 parts to compile
  them in parallel on its thread pool; on one core the parts are compiled one after another, each with its own
  set-up and its own memory mappings. One part: the same machine code, compiled in less time and with about half
  the memory mappings (``bench/xla_level.py`` measures the time);
* Eigen's matrix products on the calling thread (its thread pool has no other core to use).

JAX hashes ``XLA_FLAGS`` into every compilation-cache key: with the same flags as the workers, a process on one core
(a pinned command line, a test worker) and the sweep workers it starts load each other's compiled programs."""

LONG_RUNNING: dict[str, bool] = {"xla_cpu_use_fusion_emitters": True}
"""Compiler options of a program whose run time outweighs its compilation (a particle flow's integration, a
transformer's training): ``jax.jit(f, compiler_options=LONG_RUNNING)`` or ``attnlab.programs.jit`` with the same
argument. XLA's CPU fusion emitters (its default, which :data:`OPTIMISATION_FLAGS` turns off), whatever the flags;
other backends ignore the option."""

_DEFAULT_MAX_MAPPINGS = 65530
F = TypeVar("F", bound=Callable)


def xla_flags_with(*flags: str) -> str:
    """This process's ``XLA_FLAGS`` with each ``--name=value`` flag appended unless a flag of that name is already
    there (the user's choice wins); the environment is left as it is. For processes started
    with their own environment (Dask workers): JAX hashes ``XLA_FLAGS`` into every program's compilation-cache key
    when it compiles, so a process that changed its own after starting would miss every program it had cached."""
    current = os.environ.get("XLA_FLAGS", "")
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name not in current:
            current = f"{current} {flag}".strip()
    return current


def add_xla_flags(*flags: str) -> None:
    """Append each ``--name=value`` flag to ``XLA_FLAGS`` unless a flag of that name is already there (the user's
    choice wins; :func:`xla_flags_with`). Effective only before JAX initialises its backend (before the first
    computation): for the command line's own process, at its start."""
    os.environ["XLA_FLAGS"] = xla_flags_with(*flags)


def default_cache_dir() -> Path | None:
    """``$ATTNLAB_JAX_CACHE`` (None when it is ``off``/``0``/``none``/empty), else ``~/.cache/attnlab/jax``."""
    value = os.environ.get("ATTNLAB_JAX_CACHE")
    if value is None:
        return Path.home() / ".cache" / "attnlab" / "jax"
    return None if value.strip().lower() in ("", "off", "0", "none") else Path(value)


_SLOT: tuple[int, Path] | None = None  # (open lock file descriptor, directory) of this process's cache slot
_MAX_SLOTS = 64
_CLAIMED = ".claimed"  # touched in a slot when a process claims it: entries older than it were written before
_SHARED = ".shared"  # touched by the slot's process when it writes nothing (share_compile_cache): older entries whole
_LISTED: dict[tuple[Path, Path], tuple[int, int | None]] = {}  # (slot, other slot) -> what _seed last listed fully
_SETTLED_NS = 100_000_000  # a directory time this much older than now can no longer take another entry's tick


def _claim_slot(base: Path) -> tuple[int, Path] | None:
    """The first ``base/slot-K`` whose lock this process can take (an exclusive ``flock``, held until the process
    ends, released by the kernel even after ``kill -9``), or None."""
    for k in range(_MAX_SLOTS):
        directory = base / f"slot-{k}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        (directory / _CLAIMED).touch()
        return fd, directory
    return None


def _entries(directory: Path) -> list[Path]:
    """A slot's cache entries (its lock and claim mark left out)."""
    return [directory / name for name in _names(directory)]


def _names(directory: Path) -> list[str]:
    """The names of a slot's cache entries (one ``listdir``: a slot holds thousands)."""
    try:
        return [name for name in os.listdir(directory) if not name.startswith(".")]
    except OSError:
        return []


def _seed(base: Path, directory: Path) -> int:
    """Hard-link into the claimed slot ``directory`` the entries it lacks from every other slot under ``base``, so
    that programs compiled in one slot serve the processes of all slots. From a free slot (its lock taken,
    non-blocking, for the copy) every entry is linked; from a slot a running process holds, only the entries older
    than that process's claim (``.claimed``) or its last :func:`share_compile_cache` (``.shared``): the process may
    be writing the newer ones. Links cost no space and
    leave each slot whole when another is trimmed. A slot whose listing cannot have changed since this process last
    linked all it could from it (the same directory time, older than a few clock ticks, and the same mark) is not
    listed again: most slots are idle, and a long-lived process calls this between every two pieces of work.
    Returns the number of entries linked."""
    have = set(_names(directory))
    linked = 0
    settled = time.time_ns() - _SETTLED_NS
    for other in sorted(base.glob("slot-*")):
        if other == directory:
            continue
        try:
            changed = os.stat(other).st_mtime_ns
            fd = os.open(other / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                before = None
            except OSError:  # held by a running process: its entries written before it claimed the slot or last
                before = _complete_before(other)  # shared them
                if before is None:
                    continue
            seen = (directory, other)
            if _LISTED.get(seen) == (changed, before):
                continue
            for name in _names(other):
                if name in have:
                    continue
                entry = other / name
                try:
                    if before is not None and entry.stat().st_mtime_ns >= before:
                        continue
                    os.link(entry, directory / name)
                except FileExistsError:
                    pass
                except FileNotFoundError:  # trimmed meanwhile
                    continue
                except OSError:  # no hard links on this file system: each slot keeps its own programs
                    return linked
                have.add(name)
                linked += 1
            if changed < settled:  # an entry added in the listing's clock tick would leave the directory's time
                _LISTED[seen] = (changed, before)
        finally:
            os.close(fd)
    return linked


def _complete_before(slot: Path) -> int | None:
    """For a slot a running process holds: the time (ns) before which its entries are complete, the later of its
    claim and its last :func:`share_compile_cache`; None without a claim mark."""
    try:
        claimed = (slot / _CLAIMED).stat().st_mtime_ns
    except OSError:
        return None
    try:
        return max(claimed, (slot / _SHARED).stat().st_mtime_ns)
    except OSError:
        return claimed


def share_compile_cache() -> int:
    """Between two pieces of work of a long-lived process (a sweep worker's tasks, a test worker's tests): offer the
    programs this process has compiled to the other processes of the cache, and link in theirs (:func:`_seed`).

    JAX writes an entry in place, so a slot's entries are offered only up to a mark (``.shared``) that this call
    touches: every entry older than the mark is whole, **provided this process is writing none at the moment of the
    call** (no computation is being compiled in another of its threads). Call it only at such a point. Without the
    cache (:func:`compile_cache_slot` None) it does nothing. Returns the number of entries linked."""
    slot = compile_cache_slot()
    if slot is None:
        return 0
    mark = slot / _SHARED
    with contextlib.suppress(OSError):
        # file times tick coarsely (a clock tick of a few milliseconds): an entry written just before this call may
        # bear the mark's first time, so the mark is touched again until its time has moved past it
        mark.touch()
        first, deadline = mark.stat().st_mtime_ns, time.monotonic() + 1.0
        while time.monotonic() < deadline:
            time.sleep(0.001)
            mark.touch()
            if mark.stat().st_mtime_ns > first:
                break
    return _seed(slot.parent, slot)


def _trim(base: Path, directory: Path, max_bytes: float) -> bool:
    """Empty the cache when its entries exceed ``max_bytes``, each file counted once however many slots link it: the
    claimed ``directory`` and every free slot (its lock taken, non-blocking); a held slot is emptied when it is next
    claimed. Returns whether the cache was emptied."""
    first = {}  # inode (from the directory listing, no stat) -> a path that links it
    for slot in base.glob("slot-*"):
        with contextlib.suppress(OSError), os.scandir(slot) as listing:
            for entry in listing:
                if not entry.name.startswith("."):
                    first.setdefault(entry.inode(), entry.path)
    total = 0
    for path in first.values():
        with contextlib.suppress(OSError):
            total += os.stat(path).st_size
    if total <= max_bytes:
        return False
    for slot in base.glob("slot-*"):
        if slot != directory:
            try:
                fd = os.open(slot / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # held: its process may be reading
                os.close(fd)
                continue
        try:
            for p in _entries(slot):
                p.unlink(missing_ok=True)
        finally:
            if slot != directory:
                os.close(fd)
    return True


TRIM_INTERVAL_S = 600.0
"""The cache's size is measured (:func:`_trim`) by at most one claiming process in this many seconds: measuring
means a listing of every slot and a ``stat`` of each file, a cost growing with the cache that every command, Dask
worker and test worker would otherwise pay on start. The bound is then exceeded at most by
what is compiled in that time."""
_TRIM_MARK = ".trim-checked"


def _trim_due(base: Path) -> bool:
    """Whether the cache's size is to be measured now: :data:`TRIM_INTERVAL_S` since the last measure (the mark's
    modification time), which this call records."""
    mark = base / _TRIM_MARK
    try:
        if time.time() - mark.stat().st_mtime < TRIM_INTERVAL_S:
            return False
    except OSError:
        pass
    with contextlib.suppress(OSError):
        mark.touch()
    return True


def use_compile_cache(path: str | os.PathLike | None = None, *, max_mb: float | None = None) -> Path | None:
    """Turn on JAX's persistent compilation cache in a directory of this process's own under ``path`` (default
    :func:`default_cache_dir`), and return it (None when the cache is off or cannot be had: the run goes on without).

    JAX writes a cache entry in place, so a process reading an entry that another is writing could load half of it
    (this crashed XLA's deserialiser). Each process therefore takes a slot, ``path/slot-K``, locked for its lifetime:
    concurrent processes (test workers, Dask workers, two command lines) never share a directory. On claiming its slot
    a process hard-links into it the complete entries of the other slots (:func:`_seed`), so it finds every program
    compiled by the processes that ended before it started, in whichever slot, and the programs running processes
    have offered (:func:`share_compile_cache`). When the cache's entries (each file
    counted once) exceed ``max_mb`` (default ``$ATTNLAB_JAX_CACHE_MAX_MB`` or 2048), a claiming process empties its
    slot and every free one (:func:`_trim`; the size is measured at most once in :data:`TRIM_INTERVAL_S`). Every
    program is cached, however quick its compilation: a new process then skips the hundreds of small compilations a
    preset needs."""
    global _SLOT
    import jax

    base = Path(path) if path is not None else default_cache_dir()
    if base is None:
        return None
    if _SLOT is None or _SLOT[1].parent != base:
        if _SLOT is not None:
            os.close(_SLOT[0])
            _SLOT = None
        _SLOT = _claim_slot(base)
        if _SLOT is None:
            return None
        size = max_mb if max_mb is not None else float(os.environ.get("ATTNLAB_JAX_CACHE_MAX_MB", 2048))
        if _trim_due(base):
            _trim(base, _SLOT[1], size * 2**20)
        _seed(base, _SLOT[1])
    jax.config.update("jax_compilation_cache_dir", str(_SLOT[1]))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    # JAX's default also turns on XLA's GPU autotuning cache in a folder of the cache directory, whose path enters
    # every program's cache key: keys would differ from slot to slot and no slot could serve another's programs.
    jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    return _SLOT[1]


def compile_cache_slot() -> Path | None:
    """This process's compilation-cache directory (:func:`use_compile_cache`) while JAX uses it, else None."""
    if _SLOT is None:
        return None
    import jax

    return _SLOT[1] if jax.config.jax_compilation_cache_dir == str(_SLOT[1]) else None


@functools.cache
def accelerator_plugin() -> str | None:
    """The name of an installed JAX accelerator plugin (``jax-cuda12-plugin``, ``jax-cuda13-plugin``,
    ``jax-rocm...``), or None: JAX then computes on the CPU. Read from the installed distributions, without starting
    JAX; read once per process (every :func:`configure` asks)."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name.startswith(("jax-cuda", "jax-rocm")) and name.endswith("plugin"):
            return name
    return None


def usable_cores() -> int:
    """The number of cores this process may run on: its CPU affinity (a ``taskset``, a container's CPU set, a pinned
    worker), else :func:`os.cpu_count` where the platform has no affinities."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def one_core() -> bool:
    """Whether this process may run on one core only (:func:`usable_cores`)."""
    return usable_cores() == 1


def configure() -> None:
    """What attnlab's command line, its workers and :func:`attnlab.run` apply at start: :data:`OPTIMISATION_FLAGS`, the
    compile cache, the garbage collector's :data:`GC_THRESHOLDS` (where they are Python's defaults), and
    ``EQX_ON_ERROR=nan`` unless set (equinox's documented switch, read when equinox is first imported: its runtime
    checks inside diffrax's solves then return NaN instead of calling back to the host, so the solves can be stored in
    the compile cache; the solvers report failures through diffrax's result codes)."""
    if not accelerator_plugin():  # the flag is measured on CPUs only; it also sets the GPU compiler's LLVM level
        add_xla_flags(*OPTIMISATION_FLAGS, *(ONE_CORE_FLAGS if one_core() else ()))
    os.environ.setdefault("EQX_ON_ERROR", "nan")
    if gc.get_threshold() == PYTHON_GC_THRESHOLDS:
        gc.set_threshold(*GC_THRESHOLDS)
    use_compile_cache()


_SCOPED_ENV = ("XLA_FLAGS", "EQX_ON_ERROR", "OMP_WAIT_POLICY")
_SCOPED_JAX = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
               "jax_persistent_cache_min_entry_size_bytes", "jax_persistent_cache_enable_xla_caches")


def _equinox_error_modes() -> list:
    import sys

    return [m for m in (sys.modules.get("equinox._config"), sys.modules.get("equinox._errors")) if m is not None]


@contextlib.contextmanager
def configured() -> Iterator[None]:
    """:func:`configure` for the duration of the block only: on exit the environment variables it sets (``XLA_FLAGS``,
    ``EQX_ON_ERROR``, and ``OMP_WAIT_POLICY`` set when a C kernel loads), JAX's compilation-cache settings, the garbage
    collector's thresholds and equinox's error mode are as they were before (``equinox.error_if`` raises again under the
    caller's ``jit``). :func:`attnlab.run` computes inside it; the command line and its workers call :func:`configure`,
    which configures their own process for good."""
    import jax

    env = {k: os.environ.get(k) for k in _SCOPED_ENV}
    settings = {k: getattr(jax.config, k) for k in _SCOPED_JAX}
    thresholds = gc.get_threshold()
    eqx_before = {id(m): m.EQX_ON_ERROR for m in _equinox_error_modes()}
    configure()
    mode = os.environ.get("EQX_ON_ERROR", "nan")
    for m in _equinox_error_modes():  # equinox already imported: its mode is read when a check is traced
        m.EQX_ON_ERROR = mode
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        changed = any(getattr(jax.config, k) != v for k, v in settings.items())
        for k, v in settings.items():
            jax.config.update(k, v)
        if changed:
            with contextlib.suppress(Exception):  # JAX's cache object reads the directory when first used
                from jax._src import compilation_cache

                compilation_cache.reset_cache()
        user_mode = env["EQX_ON_ERROR"] or "raise"
        for m in _equinox_error_modes():
            m.EQX_ON_ERROR = eqx_before.get(id(m), user_mode)


@contextlib.contextmanager
def xarray_without_dask() -> Iterator[None]:
    """xarray, for the duration of the block, takes no array for a Dask array, as where Dask is not installed.

    Why: xarray asks for Dask's array type whenever it makes a variable (``as_compatible_data``), and the first time
    it does so in a process it imports ``dask.array`` to get it, a fixed cost of every preset run, while the arrays
    of a run are NumPy's and JAX's. Inside the block xarray's cached answer for ``"dask"`` is the one it gives
    itself when Dask cannot be imported (no module, no array type); on exit its cache is as before. Likewise, where
    Dask itself is not imported, xarray's test of a Dask collection (which imports ``dask.base``) answers no inside
    the block: no Dask collection exists in a process that never imported Dask. Where Dask's arrays are already
    imported (a Dask worker, a notebook that uses Dask) or xarray keeps no such cache, nothing changes. Runs and the
    writing of their datasets compute inside it (:func:`attnlab.api.execute`, :func:`attnlab.app.store.run_preset`),
    and so does reading a run back into NumPy arrays (:func:`attnlab.app.store.read_data`)."""
    import sys

    try:
        from packaging.version import Version
        from xarray.namedarray import pycompat

        cache = pycompat._cached_duck_array_modules
        absent = object.__new__(pycompat.DuckArrayModule)
    except (ImportError, AttributeError):
        cache = None
    if cache is None or "dask" in cache or "dask.array" in sys.modules:
        yield
        return
    absent.module, absent.version, absent.type, absent.available = None, Version("0.0.0"), (), False
    cache["dask"] = absent
    from xarray.namedarray import utils

    tested = getattr(utils, "is_dask_collection", None) if "dask" not in sys.modules else None
    if tested is not None:
        utils.is_dask_collection = _no_dask_collection
    try:
        yield
    finally:
        if cache.get("dask") is absent:
            del cache["dask"]
        if tested is not None and utils.is_dask_collection is _no_dask_collection:
            utils.is_dask_collection = tested


def _no_dask_collection(x) -> bool:
    return False


@contextlib.contextmanager
def x64() -> Iterator[None]:
    """A scope in which JAX computes in float64 (``jax.enable_x64``) and takes float32 matrix products in full float32
    precision (``jax.default_matmul_precision("highest")``: a GPU's default for them is TF32, a 10-bit mantissa);
    the settings outside are restored on exit."""
    import jax

    with jax.enable_x64(True), jax.default_matmul_precision("highest"):
        yield


def float64(fn: F) -> F:
    """Decorate ``fn`` to run inside :func:`x64`: it computes in float64 whatever the caller's JAX setting."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with x64():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def require_x64(what: str) -> None:
    """Raise ``RuntimeError`` unless JAX computes in float64 here (call inside :func:`x64`)."""
    import jax

    if not jax.config.jax_enable_x64:
        raise RuntimeError(f"{what} needs float64: call it inside `with attnlab.runtime.x64():`")


def mapping_count() -> int | None:
    """The number of memory mappings of this process (lines of ``/proc/self/maps``), or None if unknown."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def max_mappings() -> int:
    """The kernel's limit on mappings per process, ``vm.max_map_count`` (65,530 if it cannot be read)."""
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return _DEFAULT_MAX_MAPPINGS


def release_compiled_programs(fraction: float = 0.5, force: bool = False) -> bool:
    """Clear JAX's caches of compiled programs if this process holds more than ``fraction`` of the allowed memory
    mappings (or always, with ``force``). Returns whether it cleared them."""
    n = mapping_count()
    if not force and (n is None or n <= fraction * max_mappings()):
        return False
    import jax

    jax.clear_caches()
    gc.collect()
    return True
