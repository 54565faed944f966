"""A local cluster's workers forked from a server that imported attnlab once (attnlab.app.forkserver)."""

import multiprocessing
import os
import subprocess
import sys

import pytest

from attnlab.app import forkserver
from attnlab.app import sweep as engine

pytestmark = pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(),
                                reason="no fork server on this platform")


def _origin(name):
    """In a worker: its parent process (the fork server, or the driver that spawned it) and variable ``name``."""
    return os.getppid(), os.environ.get(name)


def _worker_origin(name):
    client = engine.make_client(workers=1)
    try:
        return client.submit(_origin, name, pure=False).result()
    finally:
        engine.close_client(client, own_cluster=True)


def test_workers_fork_from_the_server_and_get_the_call_time_variables_set_since(monkeypatch):
    """The workers of a local cluster are children of the fork server, not of this process; an attnlab variable set
    after the server started reaches them through the nanny. Control: another variable set since (read when the
    interpreter starts or a module is imported, for all the server knows) makes the next cluster spawn its workers."""
    # the environment recorded afresh here: a variable another test of this worker left changed would otherwise
    # (rightly) turn every cluster to spawn and fail this test for another's fault
    monkeypatch.setattr(forkserver, "_server_env", [])
    _worker_origin("HOME")  # the server runs from here on
    monkeypatch.setenv("ATTNLAB_FORKSERVER_TEST", "call time")
    parent, value = _worker_origin("ATTNLAB_FORKSERVER_TEST")
    assert parent != os.getpid() and value == "call time"
    monkeypatch.setenv("FORKSERVER_TEST_OTHER", "import time")
    parent, value = _worker_origin("FORKSERVER_TEST_OTHER")
    assert parent == os.getpid() and value == "import time"


def test_the_start_method_follows_the_environment_the_server_started_with(monkeypatch):
    """With the server's environment this process's own: forked, nothing added. An attnlab variable set since: forked,
    the variable given to the workers. Removed since (a nanny cannot unset it in a forked worker), or another
    variable set since: spawned."""
    monkeypatch.setenv("ATTNLAB_FORKSERVER_TEST", "at start")
    monkeypatch.setattr(forkserver, "_server_env", [dict(os.environ)])
    env = {}
    assert forkserver._method(env) == "forkserver" and env == {}
    monkeypatch.setenv("ATTNLAB_FORKSERVER_TEST", "since")
    assert forkserver._method(env) == "forkserver" and env == {"ATTNLAB_FORKSERVER_TEST": "since"}
    monkeypatch.delenv("ATTNLAB_FORKSERVER_TEST")
    assert forkserver._method({}) == "spawn"
    monkeypatch.setenv("ATTNLAB_FORKSERVER_TEST", "at start")
    monkeypatch.setenv("OMP_NUM_THREADS", "7" if os.environ.get("OMP_NUM_THREADS") != "7" else "5")
    assert forkserver._method({}) == "spawn"


def test_the_preloaded_modules_start_nothing_that_a_fork_would_break():
    """Importing every preloaded module starts no thread and no JAX backend, and a process forked after it computes
    with the XLA flags set in it after the fork (XLA reads them when the backend starts). Controls: a computation
    before the fork starts a backend; without the flag, the child dumps nothing."""
    code = """
import importlib, os, sys, threading
from jax._src import xla_bridge
from attnlab.app.forkserver import preload_modules
for m in preload_modules():
    importlib.import_module(m)
assert threading.active_count() == 1, threading.enumerate()
assert not xla_bridge._backends
dump = sys.argv[1]
for flags in ("--xla_dump_to=" + dump, ""):
    pid = os.fork()
    if pid == 0:
        os.environ["XLA_FLAGS"] = flags
        import jax.numpy as jnp
        float(jnp.sin(jnp.arange(3.0)).sum())
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    print(len(os.listdir(dump)) if os.path.isdir(dump) else 0)
import jax.numpy as jnp
jnp.zeros(1).block_until_ready()
print(bool(xla_bridge._backends))
"""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump")
        res = subprocess.run([sys.executable, "-c", code, dump], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
        with_flag, without_flag, backend = res.stdout.split()
    assert int(with_flag) > 0 and int(without_flag) == int(with_flag) and backend == "True"


def test_the_preload_names_attnlabs_own_paper_modules_and_no_plugins():
    """Every paper of attnlab's by default, those asked for otherwise; a plugin's module (the test plugin's) never:
    an import error other than ImportError would stop the server. Each name is the module the registry loads."""
    from importlib import metadata

    from attnlab.registry import PAPERS

    entries = {e.name: e.module for e in metadata.entry_points(group="attnlab.presets")}
    assert "icl" in entries and entries["icl"] not in forkserver.preload_modules(["icl", "sakai"])
    assert forkserver.preload_modules() == [*forkserver.BASE_PRELOAD, *(entries[p] for p in PAPERS)]
    assert forkserver.preload_modules(["icl", "sakai"]) == [*forkserver.BASE_PRELOAD, entries["sakai"]]
