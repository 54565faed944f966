"""Keep a long-lived process below the kernel's limit on memory mappings, which XLA's CPU programs use up.

XLA's CPU backend (jaxlib 0.10) loads every compiled program's kernels with LLVM's ORC JIT, which gives each kernel
its own memory mappings. Measured here: one replica solve adds about 4,100 mappings to the process (before its inner
solver ran on a few fixed-size blocks, when it compiled a handful of programs per solve); a pytest worker that runs
test files one after another grew from 20,000 to 31,000 mappings in two minutes. JAX keeps every compiled program
alive in its in-memory caches, so the count only grows, and Linux refuses new mappings past ``vm.max_map_count``
(65,530 by default). What happened then, in clean-clone test runs on this machine: ``LLVM compilation error: Cannot
allocate memory`` / "Failed to materialize symbols" (a failed test), or a segmentation fault or abort inside
``backend_compile_and_load`` or ``executable.serialize()`` (a crashed test worker), at random places late in the
suite.

:func:`release_compiled_programs` drops JAX's compiled programs (``jax.clear_caches()``; arrays are untouched, the
programs are compiled again, or loaded from the persistent cache, when next called) once the process holds more than
``fraction`` of the limit. The test suite calls it before every test, :func:`attnlab.store.run_preset` before every
preset run (``attnlab reproduce`` runs every preset in a few Dask worker processes; a notebook may run many). Linux
only; elsewhere it does nothing.
"""

from __future__ import annotations

import gc

import jax

__all__ = ["mapping_count", "max_mappings", "release_compiled_programs"]

_DEFAULT_MAX = 65530


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
        return _DEFAULT_MAX


def release_compiled_programs(fraction: float = 0.5, force: bool = False) -> bool:
    """Clear JAX's caches of compiled programs if this process holds more than ``fraction`` of the allowed memory
    mappings (or always, with ``force``). Returns whether it cleared them."""
    n = mapping_count()
    if not force and (n is None or n <= fraction * max_mappings()):
        return False
    jax.clear_caches()
    gc.collect()
    return True
