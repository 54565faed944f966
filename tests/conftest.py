import atexit
import collections
import gc
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")

# pytest-xdist's worker gwN computes on core N of those the session may use (modulo their number), pinned before
# JAX starts, as a sweep pins its workers (attnlab.app.scheduling.pin_worker): XLA then gives each test worker a
# thread pool of one thread, instead of two workers' pools each spreading every program over every core
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw") and _xdist_worker[2:].isdigit() and hasattr(os, "sched_setaffinity"):
    _cores = sorted(os.sched_getaffinity(0))
    if len(_cores) > 1:
        from attnlab.app.scheduling import pin_threads

        pin_threads(_cores[int(_xdist_worker[2:]) % len(_cores)])
# the catalogue cache of attnlab list/show (attnlab.app.catalogue) in a directory of the test session's, inherited by
# the test workers and the command lines the tests start, removed by the process that made it when it exits: the
# user's own cache is never written by the tests
if "ATTNLAB_CACHE_DIR" not in os.environ:
    import shutil
    import tempfile

    os.environ["ATTNLAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="attnlab-test-catalogue-")
    atexit.register(shutil.rmtree, os.environ["ATTNLAB_CACHE_DIR"], ignore_errors=True)

import jax  # noqa: E402
import pytest  # noqa: E402

from attnlab import runtime  # noqa: E402

# The test process is ours: float64 everywhere (the library scopes it per call; tests compare at round-off level),
# the CLI's XLA flags and compile cache.
runtime.configure()
jax.config.update("jax_enable_x64", True)
_XLA_FLAGS = os.environ.get("XLA_FLAGS")


JAX_PATH = ("slr/", "bruno/test_attention.py", "bruno/test_integrate.py", "bruno/test_reduced.py",
            "bruno/test_observables.py", "bruno/test_adaptive.py", "bruno/test_initial.py", "marion/test_risk.py",
            "marion/test_dynamics.py", "marion/test_transformer.py", "dohmatob/test_meanfield.py",
            "dohmatob/test_model.py", "dohmatob/test_flows.py", "dohmatob/test_rgd.py",
            "dohmatob/test_implementation.py", "duranthon/test_data.py", "duranthon/test_population.py",
            "duranthon/test_erm.py", "duranthon/replica/test_solve.py", "duranthon/replica/test_proximal.py",
            "duranthon/replica/test_samples.py", "sakai/test_sampler.py", "sakai/test_limit.py",
            "sakai/test_kernel.py", "sakai/test_distances.py")
"""Test files (under tests/) whose tests exercise each paper's JAX code: marked ``jax_path``, the subset that
bench/gpu.py runs on a GPU (``pytest -m jax_path``)."""


def pytest_collection_finish(session):
    """The objects alive once the tests are collected (modules, functions, the collected tests: some hundreds of
    thousands) live for the session: frozen, the garbage collector's full collections no longer traverse them
    (its thresholds are attnlab's, :data:`attnlab.runtime.GC_THRESHOLDS`, set by ``runtime.configure()`` above)."""
    gc.collect()
    gc.freeze()


SCHEDULE_FIRST = ("test_conformance.py", "marion/test_multihead.py", "marion/test_transformer.py",
                  "duranthon/test_presets.py", "app/test_sweep.py", "marion/test_presets.py", "test_plugins.py",
                  "app/test_cli.py", "sakai/test_native.py", "sakai/test_sampler.py")
"""The test files that take longest (``tools/run_tests.py --durations``), in about that order: under pytest-xdist's
``--dist loadfile`` they are handed out first, the rest by their number of tests (xdist's own order), so that the
workers end on short files. By number of tests alone, the conformance test (the longest file, a test per preset)
would be among the last files handed out, and one worker would run it alone at the end. The Duranthon presets' tests
come after the transformer's: handed out third, they reached the shared quick run of duranthon-sample-complexity
(:mod:`quick_runs`) while the conformance test on the other worker was computing it, and waited for it, idle. A
stale list costs balance, never a result."""


def _rel(item, here: Path) -> str | None:
    try:
        return Path(str(item.fspath)).relative_to(here).as_posix()
    except ValueError:
        return None


def pytest_configure(config):
    # xdist's reordering by number of tests would undo the order set below (pytest_collection_modifyitems)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        rel = _rel(item, here)
        if rel is not None and any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in JAX_PATH):
            item.add_marker(pytest.mark.jax_path)
    files = [_rel(item, here) for item in items]
    count = collections.Counter(files)
    first = {f: i for i, f in enumerate(SCHEDULE_FIRST)}
    order = sorted(range(len(items)), key=lambda i: (first.get(files[i], len(first)), -count[files[i]], i))
    items[:] = [items[i] for i in order]


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """A test worker's end: its results are sent by now. Its last full garbage collections (pytest's check for
    unraisable exceptions runs several) would each traverse every object the tests left, so it collects once and
    freezes what survives; then it leaves at once (:func:`_leave`)."""
    if _xdist_worker:
        gc.collect()
        gc.freeze()


def pytest_unconfigure(config):
    if _xdist_worker:
        atexit.register(_leave)  # registered last, it runs before JAX's own exit handler


def _leave():
    """The worker process ends without tearing down, one by one, the thousands of programs XLA compiled in it (JAX's
    exit handler) and the rest of its heap: the kernel frees them at once. Where a test left a child process of
    ``multiprocessing`` running, the normal exit, which ends it, runs instead."""
    import multiprocessing

    if multiprocessing.active_children():
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


_EVERY_S = {"release_compiled_programs": 5.0, "share_compile_cache": 1.0}  # attnlab.runtime's, looked up per call
_last_at = dict.fromkeys(_EVERY_S, float("-inf"))


@pytest.fixture(autouse=True)
def _between_tests():
    """A test worker compiles thousands of programs, each holding memory mappings: past the kernel's limit, XLA's
    JIT fails or crashes (see :mod:`attnlab.runtime`). Drop compiled programs between tests once past half of it.
    Counting the mappings means reading ``/proc/self/maps``, whose text the kernel writes out mapping by mapping
    (tens of milliseconds at tens of thousands), so a worker counts them at most once every few seconds: the tests
    of a few seconds add far fewer mappings than the half of the limit the check leaves (a preset's quick run adds a
    few thousand).

    Between two tests the worker compiles nothing, so it offers the programs it compiled to the other test workers
    and takes theirs (:func:`attnlab.runtime.share_compile_cache`; at most once a second, each call lists this
    worker's slot and the slots that changed): what one worker compiled, the other loads instead of compiling it again."""
    for step, every in _EVERY_S.items():  # each at most once in its interval
        if time.monotonic() - _last_at[step] >= every:
            getattr(runtime, step)()
            _last_at[step] = time.monotonic()
    yield
    # JAX hashes XLA_FLAGS into every compilation-cache key: a test (or the code it calls) that leaves it changed
    # makes its worker miss every cached program from then on
    if os.environ.get("XLA_FLAGS") != _XLA_FLAGS:
        flags = os.environ.get("XLA_FLAGS")
        if _XLA_FLAGS is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = _XLA_FLAGS
        pytest.fail(f"the test left XLA_FLAGS changed: {flags!r} (was {_XLA_FLAGS!r})")


@pytest.fixture
def key():
    """A fixed key: statistical thresholds below are stated for this key (diffrax/equinox convention)."""
    return jax.random.key(20251122)


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory):
    """``quick_run(name) -> attnlab.Run``: the preset's quick run at seed 0, computed once per session and shared by
    the test workers (:mod:`quick_runs`)."""
    from quick_runs import quick_run as run
    from quick_runs import shared_root

    root = shared_root(tmp_path_factory)
    return lambda name: run(name, root)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    """A randomly initialised BERT encoder (2 layers, width 32, 2 heads; the template words as vocabulary) in the
    Hugging Face layout, written once per session in the directory the test workers share: the model that
    marion-bert-probing runs on in the tests (bert-base-uncased's weights are not available to them)."""
    import fcntl

    from attnlab.marion.probing import template_words
    from attnlab.marion.probing_bert import write_random_model
    from quick_runs import shared_root

    root = shared_root(tmp_path_factory)
    path = root / "tiny-bert"
    with open(root / "tiny-bert.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (path / "config.json").is_file():  # written last
                write_random_model(path, template_words())
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return path


@pytest.fixture(scope="session")
def probing_quick_run(tmp_path_factory, tiny_bert_dir):
    """marion-bert-probing's quick run at seed 0 on :func:`tiny_bert_dir` (``model_dir`` set), computed once per
    session and shared by the test workers as ``quick_run`` shares the other presets' runs."""
    from quick_runs import quick_run, shared_root

    return quick_run("marion-bert-probing", shared_root(tmp_path_factory), {"model_dir": str(tiny_bert_dir)})
