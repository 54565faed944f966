r"""Building and loading attnlab's C kernels (AVX2 + FMA, OpenMP), shared by every module that has one.

A kernel's C source ships inside the package and is compiled on first use with the system C compiler (``$CC``, else
``cc``/``gcc``), ``-O3 -march=native -fopenmp``, into ``$ATTNLAB_NATIVE_CACHE`` (default ``~/.cache/attnlab/native``),
keyed by a hash of the source, the shared header ``_simd.h``, the flags, the compiler and the CPU features that
``-march=native`` targets on this machine (:func:`target_features`: the compiler's own expansion of the flag), so a
cache shared between machines (a cluster's home directory) never loads a kernel built for another CPU; a temporary
file is renamed into place, so concurrent first uses are safe, and a lock beside it makes them compile a kernel
once.

Every job with a C kernel also has a JAX path. Which one runs is a config field ``implementation`` of the preset
(``auto``, ``native`` or ``jax``), resolved by :func:`choose` before the run and recorded in the run's
``config.json`` and ``summary.json``: the same seed and the same recorded implementation give the same numbers.

``ATTNLAB_NATIVE=0`` disables every kernel; without a compiler, or on
a CPU without AVX2 and FMA (the source then fails to compile), :func:`load` returns None and a one-line reason, and
callers use their JAX code.

Users: :mod:`attnlab.bruno.native` (symmetric attention sums) and :mod:`attnlab.dohmatob.rgd_native` (Riemannian
gradient descent of softmax attention on an empirical risk).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from attnlab.errors import AttnlabError

__all__ = ["load", "disabled", "Kernel", "FLAGS", "IMPLEMENTATIONS", "choose", "target_features"]

IMPLEMENTATIONS = ("auto", "native", "jax")
"""Values of a preset's ``implementation`` field: ``auto`` (the C kernel where it applies, else JAX), or forced."""

FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-funroll-loops", "-fschedule-insns",
         "-fsched-pressure")


_HEADER = Path(__file__).with_name("_simd.h")


def _compiler() -> str | None:
    for cc in (os.environ.get("CC"), "cc", "gcc"):
        if cc and shutil.which(cc):
            return shutil.which(cc)
    return None


def choose(requested: str, applies: bool, needs: str, unavailable: str | None = None) -> str:
    """The implementation a job runs, ``"native"`` or ``"jax"``: ``requested`` (one of :data:`IMPLEMENTATIONS`) with
    ``auto`` resolved by ``applies`` (whether the C kernel is available and covers the job). ``native`` where it does
    not apply raises a one-line :class:`~attnlab.errors.AttnlabError` naming what it ``needs`` and why the kernel is
    ``unavailable`` (None: it is available)."""
    if requested not in IMPLEMENTATIONS:
        raise AttnlabError(f"unknown implementation {requested!r} (expected one of {', '.join(IMPLEMENTATIONS)})")
    if requested == "jax":
        return "jax"
    if applies:
        return "native"
    if requested == "native":
        raise AttnlabError(f"implementation 'native' needs {needs} and the C kernel on the CPU backend"
                           + (f" (kernel unavailable: {unavailable})" if unavailable else ""))
    return "jax"


@functools.cache
def target_features(cc: str) -> str:
    """What ``-march=native`` means for compiler ``cc`` on this CPU: the target CPU and its ISA extensions as the
    compiler expands them (``cc -march=native -### -E``), or the CPU flags of ``/proc/cpuinfo`` if it cannot say."""
    try:
        res = subprocess.run([cc, "-march=native", "-###", "-E", "-x", "c", os.devnull], capture_output=True,
                             text=True, timeout=60)
        lines = [ln for ln in res.stderr.splitlines() if "march" in ln or "target-cpu" in ln or "target-feature" in ln]
        if res.returncode == 0 and lines:
            return "\n".join(lines)
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln for ln in f if ln.startswith(("flags", "Features"))), "")
    except OSError:
        return ""


def _cache_dir() -> Path:
    return Path(os.environ.get("ATTNLAB_NATIVE_CACHE", Path.home() / ".cache" / "attnlab" / "native"))


def disabled() -> bool:
    """Whether ``ATTNLAB_NATIVE`` (``0``, ``off``, ``false``, ``no``) disables every C kernel (read at each call)."""
    return os.environ.get("ATTNLAB_NATIVE", "1").lower() in ("0", "off", "false", "no")


def load(src: Path, include: tuple[tuple[Path, Path], ...] = ()) -> tuple[ctypes.CDLL | None, str | None]:
    """``(library, None)`` for the compiled C file ``src``, or ``(None, reason)`` when it cannot be had (also while
    :func:`disabled`). ``include``: headers ``(folder, path under it)`` the source includes besides ``_simd.h`` (each
    folder passed with ``-I``, their contents part of the cache key)."""
    if disabled():
        return None, "disabled by ATTNLAB_NATIVE=0"
    return _load(src, tuple(include))


def _load_passive(target: Path) -> ctypes.CDLL:
    """Load the library with ``OMP_WAIT_POLICY=PASSIVE`` unless the user set a policy: libgomp reads it when it first
    loads, and idle OpenMP workers then sleep instead of spinning against XLA's threads. The environment is restored
    at once."""
    before = os.environ.get("OMP_WAIT_POLICY")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return ctypes.CDLL(str(target))
    finally:
        if before is None:
            os.environ.pop("OMP_WAIT_POLICY", None)


@contextlib.contextmanager
def _build_lock(target: Path):
    """An exclusive lock on ``target``'s build (a ``.lock`` file beside it, where the file system allows one): the
    processes that need a kernel none has built yet (test or sweep workers starting together) compile it once, the
    others wait and load it. Without file locks each process compiles its own copy (the rename keeps that safe)."""
    try:
        fd = os.open(target.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _build(cc: str, src: Path, include: tuple[tuple[Path, Path], ...], target: Path) -> str | None:
    """Compile ``src`` into ``target`` (through a temporary file renamed into place); None, or why it failed."""
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        dirs = [f"-I{root}" for root in dict.fromkeys(root for root, _ in include)]
        res = subprocess.run([cc, *FLAGS, *dirs, str(src), "-o", tmp, "-lm"], capture_output=True, text=True,
                             timeout=300)
        if res.returncode != 0:
            last = (res.stderr.strip().splitlines() or ["?"])[-1]
            return f"compiling {src.name} failed: {last}"
        os.replace(tmp, target)
        return None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@functools.cache
def _load(src: Path, include: tuple[tuple[Path, Path], ...] = ()) -> tuple[ctypes.CDLL | None, str | None]:
    cc = _compiler()
    if cc is None:
        return None, "no C compiler found ($CC, cc, gcc)"
    try:
        version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout
        headers = b"".join(root.joinpath(rel).read_bytes() for root, rel in include)
        key = hashlib.sha256(src.read_bytes() + _HEADER.read_bytes() + headers + " ".join(FLAGS).encode()
                             + version.encode() + os.uname().machine.encode()
                             + target_features(cc).encode()).hexdigest()[:16]
        target = _cache_dir() / f"attnlab_{src.stem.lstrip('_')}_{key}.so"
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            with _build_lock(target):
                if not target.exists():  # another process may have built it while this one waited
                    failed = _build(cc, src, include, target)
                    if failed is not None:
                        return None, failed
        return _load_passive(target), None
    except (OSError, subprocess.SubprocessError) as err:
        return None, f"native kernel {src.name} unavailable: {err}"


class Kernel:
    """One C kernel: ``Kernel(src, setup, include=None)`` compiles and loads ``src`` on first use (with the headers
    ``include()`` lists, :meth:`headers`) and calls ``setup(lib)`` once (to declare the ctypes signatures).
    :meth:`lib` gives the library or None, :meth:`available` whether it loaded, :meth:`unavailable_reason` why
    not."""

    def __init__(self, src: Path, setup, include=None):
        self.src, self._setup, self._done, self._include = src, setup, False, include

    def headers(self) -> tuple[tuple[Path, Path], ...]:
        """The extra headers ``(include folder, path under it)`` the source is compiled with (``include()``, called
        at the first build: e.g. XLA's FFI header, found through JAX)."""
        return tuple(self._include()) if self._include is not None else ()

    def lib(self) -> ctypes.CDLL | None:
        lib, _ = load(self.src, self.headers())
        if lib is not None and not self._done:
            self._setup(lib)
            self._done = True
        return lib

    def available(self) -> bool:
        return self.lib() is not None

    def unavailable_reason(self) -> str | None:
        return load(self.src, self.headers())[1]

    def require(self) -> ctypes.CDLL:
        """The library, or RuntimeError with the reason."""
        lib = self.lib()
        if lib is None:
            raise RuntimeError(self.unavailable_reason())
        return lib
