"""Run the test suite as ``make test`` does, re-running it once if a test worker process crashed.

    python tools/run_tests.py [extra pytest arguments]

Why: clean-clone runs of the suite on the 2-core development machines lost a pytest-xdist worker to a segmentation
fault or abort inside XLA's CPU compiler (``backend_compile_and_load``) or its executable serialisation
(``executable.serialize()``), at random places late in the suite, or failed a test with "LLVM compilation error:
Cannot allocate memory". The cause: a worker's memory mappings (XLA's JIT gives every kernel of every compiled
program its own) grew past the kernel's limit ``vm.max_map_count``. ``tests/conftest.py`` now drops compiled
programs between tests once a worker holds half of the limit (:mod:`attnlab.runtime`), which removes the cause;
this script stays as a safety net. After such a crash, pytest-xdist's ``--dist loadfile`` scheduler replaced the
worker and then waited forever (both workers idle), so a crash turned into a CI timeout. This script

* runs pytest with ``--max-worker-restart=0``, so a crashed worker ends the run at once instead of hanging it;
* if, and only if, the run failed because a worker crashed (xdist's "crashed" report; ordinary test failures and
  errors are never retried), prints one line saying so and runs the whole suite once more. Programs compiled before
  the crash are in the compilation cache by then, so the second run is shorter. A second crash fails the run.

The exit status is pytest's (of the last run).
"""

from __future__ import annotations

import subprocess
import sys

CRASH_MARKERS = ("crashed while running", "node down: Not properly terminated")  # xdist's reports (shown with -q)
ATTEMPTS = 2


def run_once(args: list[str]) -> tuple[int, bool]:
    """One pytest run, its output streamed through; returns (exit status, whether a worker crashed)."""
    cmd = [sys.executable, "-m", "pytest", "--max-worker-restart=0", *args]
    print("+ " + " ".join(cmd[1:]), flush=True)
    crashed = False
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            crashed = crashed or any(m in line for m in CRASH_MARKERS)
    return proc.returncode, crashed


def main(argv: list[str]) -> int:
    rc = 1
    for attempt in range(1, ATTEMPTS + 1):
        rc, crashed = run_once(argv)
        if rc == 0 or not crashed:
            return rc
        if attempt < ATTEMPTS:
            print(f"run_tests: a test worker crashed (a native crash, see tools/run_tests.py); running the "
                  f"suite again ({attempt + 1} of {ATTEMPTS})", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
