"""attnlab: exact simulation and theory of attention layers.

Importing attnlab switches JAX to float64 (``jax_enable_x64``): closed-form risks, dynamics and distances to
invariant manifolds are compared at round-off level, which float32 cannot resolve.

It also turns on JAX's persistent compilation cache (in ``$ATTNLAB_JAX_CACHE``, default
``~/.cache/attnlab/jax-atomic``, a new name so that entries older versions may have written half are never read;
set the variable to ``off`` to disable it): the presets' run time is dominated by XLA compilation on small
machines, and a second run of the same program, in any process, loads it from disk.
Cached executables are the same programs, so results are unchanged. Every program is cached, however quick its
compilation (``$ATTNLAB_JAX_CACHE_MIN_S`` sets a threshold in seconds): new processes (Dask workers, CLI runs,
test workers) then skip the hundreds of small compilations a preset needs. Writes are made atomic
(:func:`_atomic_cache_writes`): JAX writes entries in place, and a process reading an entry another was still
writing crashed XLA's deserialiser (segfault in ``get_executable_and_time``, seen in CI and in two clean-clone
test runs with two xdist workers). Programs with host callbacks are never cached by
JAX, so :func:`attnlab.slr.flows.integrate` traces equinox's runtime checks as NaN (failures come back through
diffrax's result code as NaN rows).

And it asks XLA's CPU backend for LLVM optimisation level 1 (``--xla_backend_optimization_level=1`` appended to
``XLA_FLAGS`` unless that flag is already set, before JAX starts its backend): compile times fall by 1.3-8x on the
presets' programs (e.g. a vmapped ``jax.random.normal`` 2.6 s -> 0.3 s) while the measured run times of the
particle kernel, the Marion PGD/SGD presets and the Dohmatob RGD step were unchanged (commit message has the
numbers). Set ``XLA_FLAGS=--xla_backend_optimization_level=3`` to get XLA's default back.
"""

import os as _os
import pathlib as _pathlib
import uuid as _uuid


def add_xla_flags(*flags: str) -> None:
    """Append each ``--name=value`` flag to ``XLA_FLAGS`` unless a flag of that name is already there (the user's
    choice wins). Effective only before JAX initialises its CPU backend (i.e. before the first computation)."""
    current = _os.environ.get("XLA_FLAGS", "")
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name not in current:
            current = f"{current} {flag}".strip()
    _os.environ["XLA_FLAGS"] = current


add_xla_flags("--xla_backend_optimization_level=1")

import jax as _jax  # noqa: E402

_jax.config.update("jax_enable_x64", True)

_CACHE_MIN_S = 0.0


def _atomic_cache_writes() -> bool:
    """Make JAX's persistent-cache writes atomic: write a temporary file, then ``os.replace`` it into place.

    JAX (0.4.30 to 0.12, without a cache size limit) writes an entry in place, unlocked, so a second process (an
    xdist worker, a Dask worker) can read it half written; that crashed XLA's deserialiser (segfault in
    ``get_executable_and_time``) in CI and in two clean-clone test runs. JAX's own fix, a size limit, takes a
    file lock and re-reads the whole directory (every entry's access-time file) on every write: O(entries) per
    write. A rename is atomic on POSIX, so readers see either no entry or a whole one. Returns False (and leaves
    JAX as it is) if this JAX's cache class does not look as expected."""
    try:
        from jax._src import lru_cache
    except ImportError:
        return False
    cls, suffix = getattr(lru_cache, "LRUCache", None), getattr(lru_cache, "_CACHE_SUFFIX", None)
    if cls is None or not isinstance(suffix, str):
        return False
    if getattr(cls.put, "_attnlab_atomic", False):  # already installed
        return True
    original = cls.put

    def put(self, key: str, value: bytes) -> None:
        path = getattr(self, "path", None)
        if getattr(self, "eviction_enabled", True) or not key or not isinstance(path, _pathlib.Path):
            return original(self, key, value)
        final = path / f"{key}{suffix}"
        if final.exists():
            return None
        tmp = path / f".{key}.{_os.getpid()}.{_uuid.uuid4().hex[:8]}.tmp"
        try:
            tmp.write_bytes(value)
            _os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        return None

    put._attnlab_atomic = True
    cls.put = put
    return True


_default_cache = _os.path.join(_os.path.expanduser("~"), ".cache", "attnlab", "jax-atomic")
_cache = _os.environ.get("ATTNLAB_JAX_CACHE", _default_cache)
if _cache.lower() not in ("", "off", "0", "none"):
    try:
        _os.makedirs(_cache, exist_ok=True)
        if _atomic_cache_writes():
            _jax.config.update("jax_compilation_cache_dir", _cache)
            _jax.config.update("jax_persistent_cache_min_compile_time_secs",
                               float(_os.environ.get("ATTNLAB_JAX_CACHE_MIN_S", _CACHE_MIN_S)))
    except OSError:  # read-only home: run without the cache
        pass

__version__ = "0.1.0"

__all__ = ["__version__", "add_xla_flags"]
