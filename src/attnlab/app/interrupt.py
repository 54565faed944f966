"""Ctrl-C that cannot be lost.

Python turns SIGINT into a ``KeyboardInterrupt`` at the next bytecode of the main thread. If that bytecode belongs
to a ``__del__`` method or a weakref callback (JAX arrays and buffers run many), the exception is printed as
"Exception ignored" and dropped, and the run goes on to finish as if nothing happened. :func:`catching_sigint`
installs a handler that also records the signal, and :func:`check` (called by the store just before a run
directory is renamed into place) raises ``KeyboardInterrupt`` if one was recorded, so an interrupted run is never
committed, whichever code the signal landed in.
"""

from __future__ import annotations

import contextlib
import signal
import threading

_requested = False


def _handler(signum, frame):
    global _requested
    _requested = True
    raise KeyboardInterrupt


def check() -> None:
    """Raise ``KeyboardInterrupt`` if SIGINT arrived (even if its exception was swallowed somewhere)."""
    if _requested:
        raise KeyboardInterrupt


@contextlib.contextmanager
def catching_sigint():
    """Record SIGINT for :func:`check` while the block runs. Only where Python's own Ctrl-C handler is installed,
    in the main thread; elsewhere a no-op."""
    global _requested
    if threading.current_thread() is not threading.main_thread() or (
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        # SIGINT ignored (started with nohup, or as a background job of a script) or handled by the embedding
        # program: leave that choice alone
        yield
        return
    _requested = False
    previous = signal.signal(signal.SIGINT, _handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _requested = False
