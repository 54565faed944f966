"""Compiled programs kept on disk: the executables XLA compiled for :mod:`attnlab.programs`' saved programs, which a
later process deserialises and runs instead of lowering the saved program and looking it up in JAX's compilation
cache.

JAX's persistent compilation cache keys an executable by its lowered program, so a process must trace and lower a
program before it can find it there. A saved program's compiled form is keyed instead by the saved program's content
and what it was compiled for, both known without lowering: :func:`load` deserialises it
(``jax.experimental.serialize_executable``) and :func:`compile_and_save` writes it the first time XLA compiles it.

Compiled programs are kept in ``programs/compiled`` (:func:`compiled_dir`), for every fingerprint: a compiled
program's name holds the digest of the saved program's content without its source locations (:func:`content_key`),
so a program whose code did not change is not compiled again when other code did, and what it was compiled for (the
processor, the devices, ``XLA_FLAGS``, the compiler options: :func:`_suffix`). It is written only where
XLA compiled it in this process: an executable JAX loaded from its compilation cache serialises without its machine
code. Where saving is on, a listener on JAX's monitoring events counts the compilation-cache lookups and hits that
tell the two apart. A compiled program that calls LAPACK (a QR, a solve) is run only once JAX has loaded LAPACK's
routines.

``ATTNLAB_PROGRAMS=traced`` keeps the saved (traced) programs and turns their compiled forms off (:func:`enabled`);
``ATTNLAB_PROGRAMS=off`` turns both off. A compiled program is written to a temporary name and renamed, so a reader
never sees half of one; one that cannot be read or loaded is removed (and compiled again at its program's first
call).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
import uuid
import zlib
from pathlib import Path

__all__ = ["load", "compile_and_save", "content_key", "compiled_dir", "enabled", "read", "write", "LOAD_EVENT"]

LOAD_EVENT = "/attnlab/executables/load_duration"
"""The JAX monitoring event (a duration) recorded for each compiled program loaded from disk, as JAX records
``/jax/core/compile/backend_compile_duration`` for each compilation or compilation-cache load."""


def compiled_dir(programs: Path) -> Path:
    """The folder of compiled programs under the saved programs' root ``programs``: shared by every fingerprint
    (a compiled program is keyed by its content), emptied with the compilation cache when that outgrows its bound
    (:func:`attnlab.runtime.use_compile_cache`)."""
    return programs / "compiled"


def enabled() -> bool:
    """Whether saved programs' compiled forms are loaded and written: unless ``ATTNLAB_PROGRAMS`` is ``traced``
    (saved programs are then lowered and compiled, or loaded from JAX's cache, in every process)."""
    return os.environ.get("ATTNLAB_PROGRAMS", "").strip().lower() != "traced"


def _path(programs: Path, content: str, compiler_options) -> Path:
    return compiled_dir(programs) / f"{content[:40]}.{_suffix(compiler_options)}.xlaexec"


def load(programs: Path, content: str, compiler_options=None):
    """The compiled program (a ``jax.stages.Compiled``) of the saved program of key ``content`` for this machine,
    these XLA flags and ``compiler_options``, under the saved programs' root ``programs``; None where there is none
    (one that cannot be read or loaded is removed)."""
    import time

    import jax
    from jax.experimental import serialize_executable

    path = _path(programs, content, compiler_options)
    if not enabled() or not path.exists():
        return None
    start = time.perf_counter()
    try:
        in_tree, out_tree, lapack, data = read(path)
        if lapack:
            _initialize_lapack()
        compiled = serialize_executable.deserialize_and_load(zlib.decompress(data), in_tree, out_tree)
    except Exception:
        path.unlink(missing_ok=True)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used now
    jax.monitoring.record_event_duration_secs(LOAD_EVENT, time.perf_counter() - start)
    return compiled


def compile_and_save(lowered, programs: Path, content: str, compiler_options=None):
    """Compile ``lowered`` (the saved program of key ``content``, lowered) and, where XLA compiled it here (not
    loaded from JAX's compilation cache) and it can be serialised, write it under ``programs``; return it."""
    from jax.experimental import serialize_executable

    if not enabled():
        return lowered.compile()
    before = _cache_events()
    compiled = lowered.compile()
    requests, hits = (a - b for a, b in zip(_cache_events(), before))
    if requests < 1 or hits:
        # an executable loaded from JAX's cache serialises without its machine code (a later process would
        # fail to run it): written only when compiled here
        return compiled
    try:
        serialized, in_tree, out_tree = serialize_executable.serialize(compiled)
    except Exception:  # a program the PJRT client cannot serialise: used in this process only
        return compiled
    lapack = b"lapack_" in serialized  # a LAPACK custom call: initialised before a later process loads it
    path = _path(programs, content, compiler_options)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
    write(path, (in_tree, out_tree, lapack, zlib.compress(serialized, 1)))
    return compiled


@functools.cache
def _machine() -> str:
    """What a compiled program depends on besides its XLA program and flags: the processor (model and instruction
    set, read from ``/proc/cpuinfo`` where there is one), the devices and their runtime."""
    import platform

    import jax

    cpu = platform.processor()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        cpu = repr([next((ln for ln in lines if ln.startswith(field)), "") for field in ("model name", "flags")])
    except OSError:
        pass
    device = jax.devices()[0]
    return repr((platform.machine(), cpu, device.platform, device.device_kind, device.client.platform_version,
                 jax.device_count(), jax.process_count()))


_COMPILE_CONFIG = ("jax_exec_time_optimization_effort", "jax_memory_fitting_effort", "jax_optimization_level",
                   "jax_memory_fitting_level", "jax_compiler_enable_remat_pass")


def _suffix(compiler_options) -> str:
    """The part of a compiled program's file name that says what it was compiled for: :func:`_machine`,
    ``XLA_FLAGS``, the program's ``compiler_options`` and JAX's compilation settings (as JAX's compilation cache
    keys them)."""
    import jax

    settings = tuple(repr(getattr(jax.config, name, None)) for name in _COMPILE_CONFIG)
    text = repr((_machine(), os.environ.get("XLA_FLAGS", ""), tuple(sorted((compiler_options or {}).items())),
                 settings))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


_REQUESTS, _HITS = "/jax/compilation_cache/compile_requests_use_cache", "/jax/compilation_cache/cache_hits"
_EVENTS: dict[tuple[int, str], int] = {}  # (thread, event) -> count, while saving is on


def _count(event: str, **kwargs) -> None:
    if event == _REQUESTS or event == _HITS:
        key = (threading.get_ident(), event)
        _EVENTS[key] = _EVENTS.get(key, 0) + 1


@functools.cache
def _listen() -> None:
    import jax

    jax.monitoring.register_event_listener(_count)


def _cache_events() -> tuple[int, int]:
    """This thread's compilation-cache lookups and hits so far (JAX's monitoring events)."""
    _listen()
    thread = threading.get_ident()
    return _EVENTS.get((thread, _REQUESTS), 0), _EVENTS.get((thread, _HITS), 0)


@functools.cache
def _initialize_lapack() -> None:
    """Load the LAPACK routines JAX's CPU kernels call (JAX does it when it lowers a linear-algebra operation or a
    saved program; a compiled program loaded without lowering would call null routines)."""
    from jax._src.lax import linalg

    linalg.initialize_lapack()


def read(path: Path):
    """The value pickled in ``path``."""
    import pickle

    return pickle.loads(path.read_bytes())


def write(path: Path, value) -> None:
    """Pickle ``value`` to ``path`` through a temporary name: a reader finds all of the file or none."""
    import pickle

    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def content_key(exported) -> str:
    """What a compiled program depends on in the exported program, as a hex digest: its module with the source
    locations stripped (a program whose code moved in its file, or whose fingerprint changed with other code, compiles
    to the same executable) and its calling convention (argument and result types and shardings, devices,
    platforms, effects). Where the locations cannot be stripped, the module as it is."""
    module = exported.mlir_module_serialized
    with contextlib.suppress(Exception):
        module = _without_locations(module)
    h = hashlib.sha256(bytes(module))
    convention = repr((exported.calling_convention_version, exported.module_kept_var_idx, exported.in_avals,
                       exported.out_avals, exported.in_shardings_hlo, exported.out_shardings_hlo,
                       exported.nr_devices, exported.platforms, exported.ordered_effects,
                       exported.unordered_effects, exported.uses_global_constants,
                       exported.disabled_safety_checks))
    if " at 0x" in convention:  # an object without a value repr (an effect): keyed by this exported program alone
        convention += uuid.uuid4().hex
    h.update(convention.encode())
    return h.hexdigest()


def _without_locations(module: bytes) -> bytes:
    """The serialised StableHLO ``module`` without its debug locations (MLIR's ``strip-debuginfo`` pass)."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import passmanager

    with mlir.make_ir_context():
        parsed = _jax.mlir.deserialize_portable_artifact(module)
        passmanager.PassManager.parse("builtin.module(strip-debuginfo)").run(parsed.operation)
        return mlir.module_to_bytecode(parsed)
