"""Compiled programs loaded ahead: the second and later runs of a preset with the same config deserialise, on a spare
core and while the preset traces, the programs that its earlier run found in the compilation cache.

A program found in JAX's persistent compilation cache (:func:`attnlab.runtime.use_compile_cache`) is still
deserialised when a process first calls it: XLA parses the executable's module and links its kernels, for a large
program a good part of a second, on the run's own thread, one program after another between traces. :func:`ahead`
records the cache keys a run of a preset with a config asks JAX for, in order, with the compile options and devices of
each request (a manifest beside the cache's slots, ``preload/<digest>.json``, written after a run whose every step
returned); on the next run of that preset and config it has a background thread ask JAX's own cache lookup for those
keys in that order, and hands the run each executable when the run asks for that key.

What the run receives is what JAX's lookup would have returned to it: the same function, called with the same key,
the same compile options (compared as serialised bytes at the request) and the same devices (their ids) on the same
backend; a request that differs in any of these, comes from another thread, or whose load failed goes to JAX's lookup
as if nothing was loaded ahead. A request that the thread has not yet begun is served on the run's thread (the
thread then skips it); one it is loading waits for it. The results are therefore those of a run without it, bit for
bit.

It is on where the compilation cache is on (the command line, its workers, :func:`attnlab.run`), the process may run
on two cores or more (:func:`attnlab.runtime.usable_cores`: a worker pinned to one core has no core to spare),
``ATTNLAB_PRELOAD`` is not ``off``, and JAX's lookup ``jax._src.compilation_cache.get_executable_and_time`` has the
signature this module was written for (else nothing is loaded ahead). While a run is inside :func:`ahead` that lookup
is replaced by one that serves the loaded executables; on exit the thread is stopped and joined and JAX's function put
back, so JAX is as it was.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import inspect
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from attnlab import runtime

#: The parameters of JAX's cache lookup this module replaces while a run is inside :func:`ahead`.
LOOKUP_SIGNATURE = ("cache_key", "compile_options", "backend", "executable_devices")

#: Version of the manifest's layout; a manifest of another version is ignored (and rewritten).
MANIFEST_FORMAT = 2

#: How many manifests (presets and configs) the ``preload`` folder keeps, the last written.
MAX_MANIFESTS = 256

_ACTIVE = threading.Lock()  # one run at a time replaces JAX's lookup in a process

_PENDING, _LOADING, _LOADED, _TAKEN = range(4)


def switched_off() -> bool:
    """Whether ``ATTNLAB_PRELOAD`` is ``off`` (also ``0``, ``false``, ``no``)."""
    return os.environ.get("ATTNLAB_PRELOAD", "").strip().lower() in {"off", "0", "false", "no"}


def _jax_cache_module():
    """JAX's compilation-cache module if its lookup has :data:`LOOKUP_SIGNATURE`, else None."""
    try:
        from jax._src import compilation_cache
    except ImportError:
        return None
    lookup = getattr(compilation_cache, "get_executable_and_time", None)
    try:
        names = tuple(inspect.signature(lookup).parameters)
    except (TypeError, ValueError):
        return None
    return compilation_cache if names == LOOKUP_SIGNATURE else None


def manifest_path(preset: str, config_json: str) -> Path | None:
    """Where the programs of ``preset`` run with the config serialised as ``config_json`` are recorded:
    ``preload/<digest>.json`` beside the compilation cache's slots, or None while the cache is off."""
    slot = runtime.compile_cache_slot()
    if slot is None:
        return None
    digest = hashlib.sha256(f"{preset}\0{config_json}".encode()).hexdigest()[:32]
    return slot.parent / "preload" / f"{digest}.json"


def read_manifest(path: Path) -> list[tuple[str, bytes, tuple[int, ...]]]:
    """The requests recorded in the manifest at ``path``: (cache key, serialised compile options, device ids), in
    the order the run made them; empty where the file is missing, unreadable or of another layout."""
    try:
        data = json.loads(path.read_text())
        if data.get("format") != MANIFEST_FORMAT:
            return []
        options = [base64.b64decode(o, validate=True) for o in data["options"]]
        return [(str(p["key"]), options[int(p["options"])], tuple(int(i) for i in p["devices"]))
                for p in data["programs"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return []


def write_manifest(path: Path, requests: list[tuple[str, bytes, tuple[int, ...]]]) -> None:
    """Write ``requests`` (as :func:`read_manifest` returns them) to ``path``, each distinct compile options once: to
    a temporary name, then renamed, so a reader never sees half of one. The folder keeps the :data:`MAX_MANIFESTS`
    manifests last written. Failures to write are ignored (the next run loads nothing ahead)."""
    options = list(dict.fromkeys(o for _, o, _ in requests))
    index = {o: i for i, o in enumerate(options)}
    data = {"format": MANIFEST_FORMAT, "options": [base64.b64encode(o).decode() for o in options],
            "programs": [{"key": k, "options": index[o], "devices": list(d)} for k, o, d in requests]}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return
    _prune(path.parent)


def _prune(folder: Path) -> None:
    """Remove all but the :data:`MAX_MANIFESTS` manifests of ``folder`` last written."""
    try:
        manifests = [(p.stat().st_mtime, p) for p in folder.glob("*.json")]
    except OSError:
        return
    if len(manifests) > MAX_MANIFESTS:
        for _, p in sorted(manifests)[:len(manifests) - MAX_MANIFESTS]:
            with contextlib.suppress(OSError):
                p.unlink()


def _device_ids(devices) -> tuple[int, ...] | None:
    try:
        return tuple(int(d.id) for d in devices)
    except (TypeError, AttributeError):
        return None


class _Loader:
    """The background thread's state: for each recorded key, its request and where its load stands."""

    def __init__(self, requests, lookup, backend):
        self.requests = {k: (o, d) for k, o, d in requests}
        self.order = list(self.requests)
        self.lookup = lookup
        self.backend = backend
        self.state = dict.fromkeys(self.order, _PENDING)
        self.loaded: dict[str, tuple] = {}
        self.ready = {k: threading.Event() for k in self.order}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.served = 0
        self.thread = threading.Thread(target=self._work, name="attnlab-preload", daemon=True)

    def _arguments(self, key):
        from jax._src.lib import xla_client

        options_bytes, ids = self.requests[key]
        by_id = {d.id: d for d in self.backend.local_devices()}
        devices = xla_client.DeviceList(tuple(by_id[i] for i in ids))
        return xla_client.CompileOptions.ParseFromString(options_bytes), devices

    def _work(self) -> None:
        for key in self.order:
            if self.stop.is_set():
                break
            with self.lock:
                if self.state[key] != _PENDING:
                    continue
                self.state[key] = _LOADING
            result = None
            try:
                options, devices = self._arguments(key)
                result = self.lookup(key, options, self.backend, devices)
            except Exception:  # noqa: BLE001 - the run's own request then goes to JAX's lookup
                result = None
            with self.lock:
                if result is not None and result[0] is not None:
                    self.loaded[key] = result
                self.state[key] = _LOADED
            self.ready[key].set()

    def take(self, key, options_bytes, ids, backend):
        """The executable loaded for this request, or None where the request is not the recorded one, the thread has
        not begun it (it then skips it) or its load failed."""
        recorded = self.requests.get(key)
        if recorded is None or backend is not self.backend or recorded != (options_bytes, ids):
            return None
        with self.lock:
            state = self.state[key]
            if state == _PENDING:
                self.state[key] = _TAKEN
                return None
            if state == _TAKEN:
                return None
        self.ready[key].wait()
        with self.lock:
            self.state[key] = _TAKEN
            result = self.loaded.pop(key, None)
        if result is not None:
            self.served += 1
        return result

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
        self.loaded.clear()


@contextlib.contextmanager
def ahead(preset: str, config_json: str) -> Iterator[_Loader | None]:
    """Inside the block, load ahead the programs recorded for ``preset`` with the config serialised as
    ``config_json`` (see the module's description), and record the ones the block asks for; when the block returns,
    write them as the manifest if they differ from it. Yields the loader (its ``served`` counts the executables the run
    received from it; None where nothing is loaded ahead) for tests and benchmarks."""
    cc = None if switched_off() or runtime.usable_cores() < 2 else _jax_cache_module()
    path = manifest_path(preset, config_json) if cc is not None else None
    if path is None or not _ACTIVE.acquire(blocking=False):
        yield None
        return
    try:
        yield from _replaced_lookup(cc, path)
    finally:
        _ACTIVE.release()


def _replaced_lookup(cc, path: Path) -> Iterator[_Loader | None]:
    original = cc.get_executable_and_time
    owner = threading.get_ident()
    recorded = read_manifest(path)
    seen: list[tuple[str, bytes, tuple[int, ...]]] = []
    loader = None
    if recorded:
        from jax._src.xla_bridge import get_backend  # jax.extend.backend's own, without importing jax.extend

        loader = _Loader(recorded, original, get_backend())
        loader.thread.start()

    def get_executable_and_time(cache_key, compile_options, backend, executable_devices):
        if threading.get_ident() != owner:
            return original(cache_key, compile_options, backend, executable_devices)
        try:
            request = (cache_key, compile_options.SerializeAsString(), _device_ids(executable_devices))
        except Exception:  # noqa: BLE001 - options that do not serialise are not recorded
            return original(cache_key, compile_options, backend, executable_devices)
        if request[2] is not None:
            seen.append(request)
        result = loader.take(*request, backend) if loader is not None else None
        return result if result is not None else original(cache_key, compile_options, backend, executable_devices)

    cc.get_executable_and_time = get_executable_and_time
    try:
        yield loader
    finally:
        cc.get_executable_and_time = original
        if loader is not None:
            loader.close()
    if seen and seen != recorded:  # reached only when the block returned
        write_manifest(path, seen)
