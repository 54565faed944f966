"""A local cluster's worker processes forked from a server that imported Dask, JAX, attnlab and its papers once.

Dask starts each worker process of a local cluster with ``multiprocessing``'s ``spawn`` method by default: a new
interpreter that imports Dask, NumPy, xarray, JAX, attnlab and the module of the task's paper before its first
task, about a second of CPU per worker and per cluster. With the ``forkserver`` method, one server process, started
with the first cluster, imports them once (:func:`preload_modules`) and every worker is forked from it with them
already imported. The fork is safe: importing these modules starts no thread and no JAX backend (importing attnlab
changes nothing in the process), and XLA reads ``XLA_FLAGS`` when the backend starts, after the worker has its
environment.

A fork server keeps the environment of its start (Dask's pre-spawn variables included); what a worker reads when the
interpreter starts or a module is imported (JAX's ``JAX_*`` settings, the BLAS thread counts, the hash seed, glibc's
malloc settings) comes from it. So :func:`worker_start_method` uses the server only while this process's
environment is the one recorded once the server had started, but for variables read only when attnlab or the tests
call for them (:data:`CALL_TIME`), which the workers are given through Dask's nanny, and Dask's ``spawn``
otherwise, or where the platform has no fork server. Only the command line starts local clusters
(:func:`attnlab.app.sweep.make_client`); the server ends with its process.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Iterable, Iterator

__all__ = ["BASE_PRELOAD", "preload_modules", "worker_start_method"]

BASE_PRELOAD: tuple[str, ...] = ("distributed", "numpy", "pandas", "xarray", "zarr", "matplotlib", "jax",
                                 "attnlab.app.sweep", "attnlab.app.store", "attnlab.plot")
"""The modules a worker imports for any task (besides the presets' modules): Dask's worker, the store's arrays and
figures, JAX, and attnlab's task runner."""

CALL_TIME: tuple[str, ...] = ("ATTNLAB_", "PYTEST_CURRENT_TEST")
"""Environment variables (names or name prefixes) read only when a function asks for them, never when a module is
imported: attnlab's own settings (its caches, read by :func:`attnlab.runtime.configure` and the store) and pytest's
name of the running test."""

_server_env: list[dict[str, str]] = []  # this process's environment once its fork server had started


def preload_modules(papers: Iterable[str] | None = None) -> list[str]:
    """:data:`BASE_PRELOAD` and the presets' module of each of attnlab's own papers among ``papers`` (default: all
    five), which the registry imports in a worker running one of its presets. A plugin's module is imported by the
    workers themselves, as before: the server skips a preloaded module only if it raises ImportError, and any other
    error would stop it, and with it every worker of the cluster, where the registry reports the broken plugin in
    one line and goes on."""
    from attnlab.registry import PAPERS

    own = PAPERS if papers is None else [p for p in PAPERS if p in set(papers)]
    return [*BASE_PRELOAD, *(f"attnlab.{p}.presets" for p in own)]


def _changed_since_start() -> dict[str, str] | None:
    """The variables of :data:`CALL_TIME` set differently in this process's environment than when the fork server
    started; None if any other variable differs or one of them was removed."""
    now, then = dict(os.environ), _server_env[0]
    changed = {k for k in set(now) | set(then) if now.get(k) != then.get(k)}
    if any(k not in now or not k.startswith(CALL_TIME) for k in changed):
        return None
    return {k: now[k] for k in changed}


def _method(env: dict[str, str], papers: Iterable[str] | None = None) -> str:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return "spawn"
    if not _server_env:
        import dask
        from distributed.utils import get_mp_context

        with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
            context = get_mp_context()  # Dask gives the server its own preload list, once: ours replaces it
        context.set_forkserver_preload(preload_modules(papers))  # a no-op for a server already running
        return "forkserver"
    changed = _changed_since_start()
    if changed is None:
        return "spawn"
    env.update(changed)
    return "forkserver"


@contextlib.contextmanager
def worker_start_method(env: dict[str, str], papers: Iterable[str] | None = None) -> Iterator[str]:
    """Dask configuration under which a local cluster started inside forks its worker processes from the fork server
    (``"forkserver"``, yielded) or spawns them (``"spawn"``, Dask's default: no fork server on this platform, or this
    process's environment changed since the server started, beyond :data:`CALL_TIME`). ``env``: the environment
    the cluster's nannies give their workers, to which the changed :data:`CALL_TIME` variables are added.
    ``papers``: the papers whose presets the cluster will run (their modules preloaded; default: every paper). The
    server starts with the first cluster, inside Dask's nanny, after Dask set its pre-spawn variables (its preload
    is that cluster's); the environment is recorded on leaving."""
    import dask

    method = _method(env, papers)
    with dask.config.set({"distributed.worker.multiprocessing-method": method}):
        yield method
    if method == "forkserver" and not _server_env:
        _server_env.append(dict(os.environ))
