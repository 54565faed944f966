"""Traced programs kept on disk: :func:`jit` is ``jax.jit`` whose traced and lowered program a later process loads
instead of tracing the function again.

``jax.jit`` traces a function (Python, once per argument shapes and static values) and lowers the trace to an XLA
program before it compiles it; JAX's persistent compilation cache (:func:`attnlab.runtime.use_compile_cache`) saves
only the last step, so every new process (each command, test worker, Dask worker, notebook) traces and lowers every
program again, often for longer than the program then runs. :func:`jit` saves the lowered program itself
(``jax.export``, serialised) the first time a process traces it, and a later process with the same attnlab calls the
saved program: a deserialisation, a small wrapper's lowering and a compilation-cache load instead of the trace.

A saved program is used only where it is the program ``jax.jit`` would trace. Its key holds

* the function (module and qualified name) and the values of its static arguments, compared by their structure (a
  static argument that is not plain data, a function for instance, disables saving for that call);
* each array argument's shape, dtype and weak type, and the arguments' tree structure;
* JAX's trace context (float64 on or off, default matmul precision, dtype promotion, ...), the default backend and
  ``EQX_ON_ERROR``;
* a fingerprint of the code (:func:`fingerprint`): every source file of attnlab, and of the package defining the
  function when that is another, and the versions of JAX and the libraries traced with it.

A function whose trace depends on anything else (a global switch, an environment variable outside the key, whether
a C kernel is available in this process) must be declared with ``jax.jit``: a saved program would replay the choice
made in the process that traced it.

Saving is on only where attnlab's compilation cache is on (the command line, its workers and :func:`attnlab.run`
inside :func:`attnlab.runtime.configured`), in ``programs/<fingerprint>`` beside the cache's slots, and
``ATTNLAB_PROGRAMS`` is not ``off``; elsewhere (and inside another function's trace, or for a program ``jax.export``
cannot save) :func:`jit` is ``jax.jit``. Programs
are written to a temporary name and renamed, so a reader never sees half of one; one that cannot be read is traced
again; where ``jax.export`` cannot save a program (a host callback), an empty ``.unsaved`` file says so to later
processes, which then trace it once, with ``jax.jit``, instead of twice. The folders of other fingerprints are
removed but for the :data:`KEEP_FINGERPRINTS` last used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import inspect
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["jit", "fingerprint", "program_dir", "KEEP_FINGERPRINTS"]

KEEP_FINGERPRINTS = 4
"""Program folders (one per code fingerprint) kept besides the current one: the last used."""

_TRACED_LIBRARIES = ("jax", "jaxlib", "numpy", "scipy", "equinox", "diffrax", "optimistix", "lineax")
_SOURCE_SUFFIXES = (".py", ".c", ".h")
_UNSAVED = object()  # memo value: this call's program is traced by jax.jit (jax.export cannot save it)
_MEMO: dict = {}  # (function, static values, tree, avals, trace context) -> the loaded program, or _UNSAVED
_PRUNED: set[Path] = set()


class _NotPlainData(Exception):
    pass


@functools.cache
def _package_digest(package: str) -> str | None:
    """SHA-256 of the source files of the installed package (or single-file module) ``package``: paths and
    contents; None where it has no source file (a notebook's ``__main__``)."""
    import importlib

    try:
        module = importlib.import_module(package)
    except Exception:  # a module that cannot be imported again: no source to read
        return None
    h = hashlib.sha256()
    roots = [Path(p) for p in getattr(module, "__path__", [])]
    files = [(root, path) for root in roots for path in sorted(root.rglob("*"))
             if path.suffix in _SOURCE_SUFFIXES and "__pycache__" not in path.parts]
    if not roots and getattr(module, "__file__", None):
        files = [(Path(module.__file__).parent, Path(module.__file__))]
    if not files:
        return None
    for root, path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.cache
def fingerprint(package: str = "attnlab") -> str | None:
    """The code a saved program depends on: attnlab's source files, those of ``package`` (the package defining the
    function) and the versions of the libraries traced with it, as a hex digest; None where ``package`` has no source
    file to read (a function defined in a notebook: its programs are not saved)."""
    from importlib import metadata

    h = hashlib.sha256()
    for name in dict.fromkeys(("attnlab", package)):
        digest = _package_digest(name)
        if digest is None:
            return None
        h.update(f"{name}:{digest}\n".encode())
    for lib in _TRACED_LIBRARIES:
        try:
            h.update(f"{lib}=={metadata.version(lib)}\n".encode())
        except metadata.PackageNotFoundError:
            pass
    return h.hexdigest()


def program_dir(package: str = "attnlab") -> Path | None:
    """The folder of saved programs for ``package``'s fingerprint, or None where saving is off (attnlab's compilation
    cache is not the one JAX uses now, or ``package`` has no source file)."""
    from attnlab import runtime

    slot = runtime.compile_cache_slot()
    code = fingerprint(package) if slot is not None else None
    if code is None:
        return None
    directory = slot.parent / "programs" / code[:20]
    if directory not in _PRUNED:
        _PRUNED.add(directory)
        _prune(directory)
    return directory


_SAVED_SUFFIXES = (".jaxexport", ".unsaved", ".tmp")


def _ours(folder: Path) -> bool:
    """Whether ``folder`` is a program folder this module wrote: named by a fingerprint (20 hex digits) and holding
    nothing but saved programs, marks and temporary files. Anything else under ``programs/`` is never removed."""
    name = folder.name
    if len(name) != 20 or any(c not in "0123456789abcdef" for c in name):
        return False
    try:
        return all(entry.is_file() and entry.name.endswith(_SAVED_SUFFIXES) for entry in os.scandir(folder))
    except OSError:
        return False


def _prune(current: Path) -> None:
    """Create ``current``, mark it used now, and remove the program folders of other fingerprints but the
    :data:`KEEP_FINGERPRINTS` last used (only folders that are :func:`_ours`)."""
    try:
        current.mkdir(parents=True, exist_ok=True)
        os.utime(current)
        others = sorted((p for p in current.parent.iterdir() if p.is_dir() and p != current and _ours(p)),
                        key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in others[KEEP_FINGERPRINTS:]:
        shutil.rmtree(old, ignore_errors=True)


def _plain(value):
    """``value`` as nested tuples of plain data (type names and reprs), or :class:`_NotPlainData`."""
    import dataclasses
    import enum

    import numpy as np

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, enum.Enum, np.generic)):
        return (type(value).__qualname__, repr(value))
    if isinstance(value, (tuple, list, frozenset)):
        items = sorted(map(_plain, value)) if isinstance(value, frozenset) else [_plain(v) for v in value]
        return (type(value).__qualname__, tuple(items))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((_plain(k), _plain(v)) for k, v in value.items())))
    if hasattr(value, "model_dump") and getattr(value, "model_config", {}).get("frozen"):  # a frozen pydantic model
        cls = type(value)
        return (f"{cls.__module__}.{cls.__qualname__}", _plain(value.model_dump()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        return (f"{cls.__module__}.{cls.__qualname__}",
                tuple((f.name, _plain(getattr(value, f.name))) for f in dataclasses.fields(value)))
    raise _NotPlainData(type(value).__qualname__)


def _avals(leaves) -> tuple | None:
    """(dtype, shape, weak type) of each argument leaf, the type of a Python scalar; None if a leaf is traced or not
    an array."""
    tracer = _tracer_type()
    out = []
    for x in leaves:
        if isinstance(x, (bool, int, float, complex)):
            out.append(type(x))
        elif isinstance(x, tracer):
            return None
        else:
            try:
                out.append((x.dtype, x.shape, getattr(x, "weak_type", False)))
            except AttributeError:
                return None
    return tuple(out)


@functools.cache
def _tracer_type() -> type:
    from jax.core import Tracer

    return Tracer


def _switched_off() -> bool:
    return os.environ.get("ATTNLAB_PROGRAMS", "").strip().lower() in ("off", "0", "none")


def _jit_disabled() -> bool:
    import jax

    return bool(jax.config.jax_disable_jit)


@functools.cache
def _backend() -> str:
    import jax

    return jax.default_backend()


def _trace_context():
    import jax

    try:
        from jax._src import config

        context = config.trace_context()
    except (ImportError, AttributeError):  # pragma: no cover - JAX without it: the float64 switch alone
        context = (jax.config.jax_enable_x64, jax.config.jax_default_matmul_precision)
    return context, _backend(), os.environ.get("EQX_ON_ERROR")


def _describe(context) -> str:
    """The trace context as text that does not depend on the process (objects without a value repr by type)."""

    def one(x):
        text = repr(x)
        return type(x).__qualname__ if " at 0x" in text else text

    ctx, backend, eqx = context
    return repr((tuple(one(x) for x in ctx) if isinstance(ctx, tuple) else one(ctx), backend, eqx))


_LAPACK_SKIP = threading.local()  # .on: this thread lowers a saved program that calls no LAPACK routine
_LAPACK_LOCK = threading.Lock()
_LAPACK_USERS = [0, None]  # threads inside _without_lapack_setup, JAX's function they replaced


@functools.cache
def _export_module():
    """JAX's module whose lowering of a saved program's call sets LAPACK up, if it has the form this module was
    written for (``_ensure_backends_initialized(platforms)`` calling ``linalg.initialize_lapack()`` only), else None.
    Looked at once, before :func:`_without_lapack_setup` first replaces that function."""
    from jax._src.export import _export

    fn = getattr(_export, "_ensure_backends_initialized", None)
    code = getattr(fn, "__code__", None)
    return _export if code is not None and set(code.co_names) == {"linalg", "initialize_lapack"} else None


@contextlib.contextmanager
def _without_lapack_setup():
    """While this thread lowers the call of a saved program that calls no LAPACK routine: JAX's lowering of an
    exported program's call sets up its CPU LAPACK routines (``jax._src.lax.linalg.initialize_lapack``, which imports
    ``scipy.linalg`` for their addresses: a fifth of a second, once per process) whatever the program computes; for a
    program without a LAPACK call there is nothing to set up. Other threads, and programs that call LAPACK, go
    through JAX's function unchanged; JAX's function is put back when the last thread leaves."""
    module = _export_module()
    if module is None:
        yield
        return
    with _LAPACK_LOCK:
        if _LAPACK_USERS[0] == 0:
            original = module._ensure_backends_initialized
            _LAPACK_USERS[1] = original

            def ensure(platforms):
                if not getattr(_LAPACK_SKIP, "on", False):
                    original(platforms)

            module._ensure_backends_initialized = ensure
        _LAPACK_USERS[0] += 1
    _LAPACK_SKIP.on = True
    try:
        yield
    finally:
        _LAPACK_SKIP.on = False
        with _LAPACK_LOCK:
            _LAPACK_USERS[0] -= 1
            if _LAPACK_USERS[0] == 0:
                module._ensure_backends_initialized = _LAPACK_USERS[1]
                _LAPACK_USERS[1] = None


class _Program:
    """A saved program called on the flat argument leaves; its result rebuilt with the output's tree structure."""

    def __init__(self, exported, out_example, compiler_options=None):
        import jax

        def call(*flat):
            return exported.call(*flat)

        call.__name__ = call.__qualname__ = f"saved_{exported.fun_name}"  # named in JAX's logs and profiles
        self.call = jax.jit(call, compiler_options=compiler_options)
        self.out_tree = jax.tree_util.tree_structure(out_example)
        # the LAPACK routines a program calls are custom calls named lapack_*, strings of its serialised module
        self.calls_lapack = b"lapack" in bytes(exported.mlir_module_serialized)

    def __call__(self, leaves):
        import jax

        with contextlib.nullcontext() if self.calls_lapack else _without_lapack_setup():
            out = self.call(*leaves)
        return jax.tree_util.tree_unflatten(self.out_tree, out)


def _load(path: Path, compiler_options=None) -> _Program | None:
    """The program saved at ``path``, or None (none there, or one that cannot be read: traced again and replaced)."""
    import pickle

    from jax import export

    try:
        out_example, serialized = pickle.loads(path.read_bytes())
        return _Program(export.deserialize(bytearray(serialized)), out_example, compiler_options)
    except Exception:
        return None


def _save(path: Path, serialized: bytes, out_example) -> None:
    """Write the serialised exported program and an example of its output's tree (its leaves numbered) to ``path``, through a
    temporary name: a reader finds all of the file or none. (``jax.export`` serialises trees of tuples, lists and
    dicts only; the output's named tuples and dataclasses are pickled by reference to their classes.)"""
    import pickle

    data = pickle.dumps((out_example, serialized), protocol=pickle.HIGHEST_PROTOCOL)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _program(fn: Callable, static: tuple, names: tuple[str, ...], leaves: list, tree,
             compiler_options=None) -> _Program | None:
    """The saved program of ``fn`` for this call (loaded or exported, then memoised): the arguments ``names`` (their
    flat ``leaves`` and ``tree``) positionally, the ``static`` ones (name, value) bound; or None: trace it with
    ``jax.jit``."""
    import jax

    avals = _avals(leaves)
    if avals is None:
        return None
    context = _trace_context()
    options = tuple(sorted((compiler_options or {}).items()))
    memo_key = (fn, static, names, tree, avals, context, options)  # static values compared as jax.jit compares them
    try:
        found = _MEMO.get(memo_key)
    except TypeError:  # an unhashable static value: jax.jit says so
        return None
    if found is not None:
        return None if found is _UNSAVED else found
    try:
        static_key = _plain(static)
    except _NotPlainData:
        _MEMO[memo_key] = _UNSAVED
        return None
    package = fn.__module__.split(".")[0]
    if fingerprint(package) is None:  # no source file to key on: never saved, and not asked again at each call
        _MEMO[memo_key] = _UNSAVED
        return None
    directory = program_dir(package)
    if directory is None:
        return None
    described = tuple(a.__name__ if isinstance(a, type) else (str(a[0]), tuple(a[1]), bool(a[2])) for a in avals)
    key = hashlib.sha256(repr((f"{fn.__module__}.{fn.__qualname__}", static_key, names, str(tree), described,
                               _describe(context))).encode()).hexdigest()
    path = directory / f"{key}.jaxexport"
    unsaved = path.with_suffix(".unsaved")  # jax.export could not save this program in an earlier process
    if unsaved.exists():
        _MEMO[memo_key] = _UNSAVED
        return None
    program = _load(path, compiler_options)
    if program is None:
        from jax import export

        bound = dict(static)
        out_trees = []

        def call(*flat):
            out = fn(**bound, **dict(zip(names, jax.tree_util.tree_unflatten(tree, flat))))
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            out_trees.append(out_tree)
            return out_leaves

        call.__name__ = call.__qualname__ = fn.__name__
        try:
            serialized = export.export(jax.jit(call))(*leaves).serialize()
            out_example = jax.tree_util.tree_unflatten(out_trees[-1], list(range(out_trees[-1].num_leaves)))
            # called as a later process loads it: serialisation drops the weak types of the arguments and results
            # (a Python scalar's), so the exported program itself would hand the next program other argument types,
            # hence another key, than a later process's run (and, mixed with float32, another promotion)
            program = _Program(export.deserialize(bytearray(serialized)), out_example, compiler_options)
            _save(path, serialized, out_example)
        except Exception:  # jax.export cannot save this program (a host callback, a custom call): trace it
            _MEMO[memo_key] = _UNSAVED
            with contextlib.suppress(OSError):
                unsaved.touch()
            return None
    _MEMO[memo_key] = program
    return program


def jit(fn: Callable | None = None, *, static_argnames: str | tuple[str, ...] = (),
        static_argnums: int | tuple[int, ...] = (), compiler_options: dict[str, Any] | None = None):
    """``jax.jit(fn, static_argnames=..., compiler_options=...)`` whose traced program is saved for later processes
    (see the module). Use as ``@jit`` or ``@partial(jit, static_argnames=("act",))`` on a function of named
    parameters whose trace depends only on its arguments (not on a global switch or an environment variable that the
    key does not hold). The plain ``jax.jit`` function is the ``plain`` attribute. ``static_argnums`` name the same
    parameters by position; ``compiler_options`` (e.g. :data:`attnlab.runtime.LONG_RUNNING`) apply to the program
    however it is obtained."""
    if fn is None:
        return functools.partial(jit, static_argnames=static_argnames, static_argnums=static_argnums,
                                 compiler_options=compiler_options)
    import jax

    signature = inspect.signature(fn)
    params = tuple(signature.parameters)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    numbers = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = tuple(dict.fromkeys(names + tuple(params[i] for i in numbers)))
    plain = jax.jit(fn, static_argnames=names, compiler_options=compiler_options)
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in signature.parameters.values()):
        raise TypeError(f"attnlab.programs.jit: {fn.__qualname__} takes *args, **kwargs or positional-only parameters")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from attnlab import runtime

        if runtime.compile_cache_slot() is None or _jit_disabled() or _switched_off():
            return plain(*args, **kwargs)
        if not kwargs and len(args) <= len(params):
            arguments = dict(zip(params, args))
        else:
            arguments = signature.bind(*args, **kwargs).arguments  # a wrong call raises here as in jax.jit
        static = tuple((k, v) for k, v in arguments.items() if k in names)
        dynamic = tuple(k for k in arguments if k not in names)
        leaves, tree = jax.tree_util.tree_flatten(tuple(arguments[k] for k in dynamic))
        program = _program(fn, static, dynamic, leaves, tree, compiler_options)
        return plain(*args, **kwargs) if program is None else program(leaves)

    wrapper.plain = plain  # type: ignore[attr-defined]
    return wrapper


def clear_memo() -> None:
    """Forget the programs loaded in this process (they are loaded again from disk when next called)."""
    _MEMO.clear()
