"""Building the C kernels (:mod:`attnlab.native`): processes that need a kernel none has built yet compile it once."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

LOAD = ("import sys; from pathlib import Path; from attnlab import native; "
        "lib, why = native.load(Path(sys.argv[1])); print(lib is not None, why, lib.twice(21) if lib else None)")


@pytest.mark.skipif(sys.platform == "win32" or shutil.which("cc") is None, reason="needs a C compiler (cc)")
def test_concurrent_first_uses_compile_a_kernel_once(tmp_path):
    src = tmp_path / "twice.c"
    src.write_text("int twice(int x) { return 2 * x; }\n")
    log = tmp_path / "builds.log"
    cc = tmp_path / "slow-cc"  # logs each build and holds it for a second, so that the processes overlap
    cc.write_text(f"#!/bin/sh\ncase \" $* \" in *\" -shared \"*) echo build >> '{log}'; sleep 1;; esac\n"
                  f"exec '{shutil.which('cc')}' \"$@\"\n")
    cc.chmod(cc.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "CC": str(cc), "ATTNLAB_NATIVE_CACHE": str(tmp_path / "cache"), "ATTNLAB_NATIVE": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", LOAD, str(src)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert [out.split() for out, _ in outs] == [["True", "None", "42"]] * 3
    assert log.read_text().split() == ["build"]  # one compilation; the other processes waited for it and loaded it
    assert len(list((tmp_path / "cache").glob("*.so"))) == 1


def test_a_kernel_that_does_not_compile_gives_the_reason(tmp_path, monkeypatch):
    from attnlab import native

    src = tmp_path / "broken.c"
    src.write_text("this is not C\n")
    monkeypatch.setenv("ATTNLAB_NATIVE_CACHE", str(tmp_path / "cache"))
    if native._compiler() is None:
        pytest.skip("no C compiler")
    lib, why = native.load(src)
    assert lib is None and why.startswith("compiling broken.c failed: ")
    assert not list((tmp_path / "cache").glob("*.so"))  # nor the temporary file (mkstemp(suffix=".so"))
