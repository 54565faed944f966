"""Nothing the user owns is touched: --force, reproduce and sweep folders, links, mount points, locks, clean-up, faults
at the end of a run, damaged runs, and the process around attnlab.run."""

import contextlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from attnlab.app import ownership
from attnlab.app.cli import main
from attnlab.registry import Check

from .common import TINY, one_error_line

RUN = ["run", "marion-manifold", "--quick", *TINY]


def _user_files(folder: Path) -> dict[str, str]:
    """Plant the user's own files in ``folder``: a note, a folder of figures, and a hidden folder whose name looks
    like a temporary (the pattern that older clean-up deleted)."""
    (folder / "notes.md").write_text("my notes")
    (folder / "my_figs").mkdir()
    (folder / "my_figs" / "fig.png").write_text("not a png")
    (folder / ".cache.tmp-keep").mkdir()
    (folder / ".cache.tmp-keep" / "f").write_text("keep")
    return {"notes.md": "my notes", "my_figs/fig.png": "not a png", ".cache.tmp-keep/f": "keep"}


def _error_after_work(capsys) -> str:
    """The one ``error:`` line of a command that failed after its work began (its progress bar above it), with no
    traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and err.rstrip().splitlines()[-1] == errors[0], err
    return errors[0]


def _intact(folder: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        assert (folder / rel).read_text() == text, rel


def test_force_replaces_only_the_runs_own_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "run"]) == 0
    mine = _user_files(tmp_path / "run")
    old_hash = json.loads((tmp_path / "run" / "config.json").read_text())["config_hash"]
    assert main([*RUN, "--set", "lambda0=0.2", "--out", "run"]) == 2  # another config: refused without --force
    assert main([*RUN, "--set", "lambda0=0.2", "--out", "run", "--force"]) == 0
    _intact(tmp_path / "run", mine)
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["config_hash"] != old_hash and cfg["config"]["lambda0"] == 0.2
    assert main([*RUN, "--set", "lambda0=0.2", "--out", "run", "--force"]) == 0  # the same config again
    _intact(tmp_path / "run", mine)
    assert ownership.foreign_entries(tmp_path / "run") == [".cache.tmp-keep", "my_figs", "notes.md"]
    assert not [p for p in tmp_path.iterdir() if p.name != "run"]  # no stray temporaries beside it


def test_a_run_written_before_manifests_is_replaced_without_touching_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "run"]) == 0
    (tmp_path / "run" / ownership.MANIFEST).unlink()  # as an older attnlab wrote it
    mine = _user_files(tmp_path / "run")
    assert ownership.is_attnlab_run(tmp_path / "run")
    assert main([*RUN, "--set", "lambda0=0.2", "--out", "run", "--force"]) == 0
    _intact(tmp_path / "run", mine)


def test_a_symbolic_link_is_a_folder_to_write_into(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to("target")
    assert main([*RUN, "--out", "link"]) == 0
    assert (tmp_path / "link").is_symlink()
    assert (tmp_path / "target" / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "target"]  # no stray .link.old-XXXX


def test_the_second_of_two_concurrent_writers_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    with ownership.writer_lock(tmp_path / "same"):  # another attnlab process, writing there now
        code = ("import sys; from attnlab.app.cli import main; "
                f"sys.exit(main({[*RUN, '--set', 'lambda0=0.2', '--out', 'same']!r}))")
        res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "another attnlab process is writing to same" in lines[0], res.stderr
    assert not (tmp_path / "same").exists()


def test_writer_locks_exclude_each_other_and_leave_no_lock_file(tmp_path):
    """Four processes add one to a counter 50 times each under the lock of one path (``wait=True``): no update is
    lost although each holder removes the lock file on release, and no lock file is left (a lock that is not a
    lock loses updates: the control, the same loop without it). The processes start together (each, once imported,
    waits for a file) and pause between reading and writing, so that without the lock their updates overlap."""
    code = textwrap.dedent("""
        import sys, time
        from pathlib import Path
        from attnlab.app import ownership
        counter, locked = Path(sys.argv[1]), sys.argv[2] == "locked"
        (counter.parent / f"ready-{sys.argv[3]}").touch()
        while not (counter.parent / "go").exists():
            time.sleep(0.01)
        for _ in range(50):
            with ownership.writer_lock(counter.parent / "out", wait=True) if locked else open(counter):
                n = int(counter.read_text() or 0)  # unlocked, a write may be half done
                time.sleep(0.002)
                counter.write_text(str(n + 1))
    """)
    totals = {}
    for how in ("locked", "unlocked"):
        counter = tmp_path / "counter"
        counter.write_text("0")
        for stale in [tmp_path / "go", *tmp_path.glob("ready-*")]:
            stale.unlink(missing_ok=True)
        procs = [subprocess.Popen([sys.executable, "-c", code, str(counter), how, str(i)]) for i in range(4)]
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("ready-*"))) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        (tmp_path / "go").touch()
        assert all(p.wait(timeout=300) == 0 for p in procs)
        totals[how] = int(counter.read_text() or 0)
    assert totals["locked"] == 200 and not ownership._lock_file(tmp_path / "out").exists()
    assert totals["unlocked"] < 200, totals  # the control


def test_two_concurrent_runs_of_different_configs_never_both_say_done(tmp_path):
    code = "import sys; from attnlab.app.cli import main; sys.exit(main(sys.argv[1:]))"
    procs = [subprocess.Popen([sys.executable, "-c", code, *RUN, "--set", f"lambda0={lam}", "--out", "same"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for lam in (0.1, 0.2)]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in results)
    assert codes == [0, 2], results
    refused = next(err for rc, err in results if rc == 2)
    assert "another attnlab process" in refused or "different config" in refused, refused


def test_reproduce_refuses_a_folder_that_is_not_its_own_and_never_replaces_a_report(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mypaper").mkdir()
    (tmp_path / "mypaper" / "report.md").write_text("my report")
    assert main(["reproduce", "marion", "--quick", "--out", "mypaper"]) == 2
    assert "report.md" in one_error_line(capsys)
    assert (tmp_path / "mypaper" / "report.md").read_text() == "my report"
    assert sorted(p.name for p in (tmp_path / "mypaper").iterdir()) == ["report.md"]


def test_sweep_refuses_a_folder_of_the_users(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "myproject" / "analysis").mkdir(parents=True)
    mine = _user_files(tmp_path / "myproject" / "analysis")
    assert main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.1,0.2", "--out", "myproject"]) == 2
    assert "holds files attnlab did not write" in one_error_line(capsys)
    _intact(tmp_path / "myproject" / "analysis", mine)
    assert sorted(p.name for p in (tmp_path / "myproject").iterdir()) == ["analysis"]


def test_an_unreachable_scheduler_leaves_no_sweep_folder(tmp_path, monkeypatch, capsys):
    from attnlab.app import sweep as engine

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "SCHEDULER_TIMEOUT_S", 1.0)  # nothing listens on port 1: no need to wait 10 s
    assert main(["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.1,0.2", "--scheduler",
                 "tcp://127.0.0.1:1", "--out", "s"]) == 2
    assert "cannot reach Dask scheduler" in one_error_line(capsys)
    assert not (tmp_path / "s").exists()


def test_clean_up_removes_only_attnlabs_own_temporaries(tmp_path):
    run_dir = tmp_path / "marion-manifold"
    run_dir.mkdir()
    stale = ownership.new_temporary(run_dir, "abc")  # a killed run's temporary
    lookalike = run_dir / ".abc.attnlab-tmp-0123abcd"  # the right name, but not marked: the user's
    lookalike.mkdir()
    mine = _user_files(tmp_path)
    with ownership.writer_lock(run_dir / "live"):
        live = ownership.new_temporary(run_dir, "live")  # a run being written now
        assert ownership.remove_stale_temporaries(tmp_path) == 1
    assert not stale.exists() and lookalike.is_dir() and live.is_dir()
    _intact(tmp_path, mine)


def test_a_read_only_output_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    mounted = False
    if os.geteuid() == 0 and shutil.which("mount"):
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)],
                                 capture_output=True).returncode == 0
    if not mounted:
        if os.geteuid() == 0:
            pytest.skip("root without mount: a directory without write permission does not stop root")
        ro.chmod(0o555)
    try:
        for argv in ([*RUN, "--out", "ro/run"], [*RUN, "--out", "ro"],
                     ["reproduce", "marion", "--quick", "--out", "ro/rep"],
                     ["sweep", "marion-manifold", "--quick", "--grid", "lambda0=0.1,0.2", "--out", "ro/s"]):
            assert main(argv) == 2, argv
            line = one_error_line(capsys)
            assert "cannot write to" in line and ("read-only" in line or "not writable" in line), line
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)])
        else:
            ro.chmod(0o755)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):
    """A tmpfs of ``size`` mounted at the new directory ``path`` for the block (the test is skipped without root)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    path.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True).returncode:
        pytest.skip("mount refused here")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)])


def test_a_mount_point_is_a_folder_to_write_into(tmp_path, monkeypatch):
    with _tmpfs(tmp_path / "mnt", "50m") as mnt:
        monkeypatch.chdir(tmp_path)
        assert main([*RUN, "--out", "mnt"]) == 0
        assert (mnt / "summary.json").is_file()


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    with _tmpfs(tmp_path / "full", "16k") as full:
        monkeypatch.chdir(tmp_path)
        assert main([*RUN, "--out", "full/run"]) == 2
        assert "No space left on device" in _error_after_work(capsys)
        assert list(full.iterdir()) == []


def test_a_failed_commit_keeps_the_finished_result_and_names_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def busy(tmp, run_dir):
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(ownership, "commit_into", busy)
    assert main([*RUN, "--out", "run"]) == 2
    line = _error_after_work(capsys)
    assert "Device or resource busy" in line and "the finished result is kept in" in line, line
    kept = Path(line.rsplit("kept in ", 1)[1])
    assert (kept / "summary.json").is_file() and (kept / "data.zarr").is_dir()


def test_runs_reports_a_damaged_run_in_one_line_and_does_not_count_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "res/run"]) == 0
    capsys.readouterr()
    (tmp_path / "res" / "run" / "summary.json").write_text("{corrupt")
    assert main(["runs", "res"]) == 0
    cap = capsys.readouterr()
    assert "damaged run (not counted)" in cap.err and "Traceback" not in cap.err
    assert "no finished runs under res" in cap.out


def test_plot_of_a_run_with_damaged_data_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "run"]) == 0
    capsys.readouterr()
    chunks = [p for p in (tmp_path / "run" / "data.zarr").glob("*/*") if p.name[0].isdigit()]
    assert chunks
    chunks[0].unlink()  # zarr would read the missing chunk as fill values: a plot of made-up data
    assert main(["plot", "run"]) == 2
    assert "misses 1 of its" in one_error_line(capsys)
    shutil.rmtree(tmp_path / "run" / "data.zarr")
    assert main(["plot", "run"]) == 2
    assert "data.zarr" in one_error_line(capsys)


def test_a_check_whose_control_is_not_rejected_does_not_pass():
    right = Check("c", 1.0, 1.01, 0.1, control="wrong", control_theory=1.0, control_simulation=1.5)
    powerless = Check("c", 1.0, 1.01, 0.1, control="wrong", control_theory=1.0, control_simulation=1.02)
    assert right.passed and right.status == "passed"
    assert not powerless.passed and powerless.status == "inconclusive"
    assert "negative control (wrong) is within the tolerance" in powerless.verdict
    assert powerless.as_dict()["passed"] is False


def test_a_not_evaluated_or_inconclusive_check_says_why_in_the_table(capsys, monkeypatch):
    from attnlab.app import cli
    from attnlab.app.cli import _print_checks

    monkeypatch.setattr(cli.out, "width", 400)
    from attnlab.app.store import RunResult

    checks = [Check.not_evaluated("few", "too few repeats").as_dict(),
              Check("weak", 1.0, 1.01, 0.1, control="wrong", control_theory=1.0, control_simulation=1.02).as_dict()]
    _print_checks({"p": RunResult(Path("."), {"checks": checks}, False)})
    out = " ".join(capsys.readouterr().out.split())
    assert "not evaluated: too few repeats" in out and "n/e" in out
    assert "inconclusive" in out


@pytest.mark.parametrize("name", ["trained_error", "error_lam0.01"])
def test_a_non_finite_metric_fails_the_run_and_writes_nothing(tmp_path, monkeypatch, capsys, name):
    """One line naming the metric and its value, nothing written; a metric name may hold a "." (a lambda in it,
    as duranthon-low-snr's do), which is not a nesting separator there."""
    import dataclasses

    from attnlab import registry

    p = registry.get_preset("marion-manifold")

    def summarize(ds, config):
        metrics, checks = p.summarize(ds, config)
        return {**metrics, name: float("nan")}, checks

    monkeypatch.setitem(registry._REGISTRY, p.name, dataclasses.replace(p, summarize=summarize))
    monkeypatch.chdir(tmp_path)
    assert main([*RUN, "--out", "run"]) == 1
    assert f"metric {name!r} is nan" in _error_after_work(capsys)
    assert list(tmp_path.iterdir()) == []


API_PROBE = """
import gc, json, os, sys, jax
import equinox as eqx
import attnlab
keys = ("XLA_FLAGS", "EQX_ON_ERROR", "OMP_WAIT_POLICY")
before = ({k: os.environ.get(k) for k in keys}, jax.config.jax_compilation_cache_dir, jax.config.jax_enable_x64,
          gc.get_threshold())
refused = []
for seed in (-1, True, 2**64, 1.5, "0"):
    try:
        attnlab.run("marion-manifold", quick=True, seed=seed, n_steps=1000, log_every=100, n_repeats=2, n_mc=2000)
    except attnlab.AttnlabError as e:
        refused.append(len(str(e).splitlines()) == 1)
run = attnlab.run("marion-manifold", quick=True, n_steps=1000, log_every=100, n_repeats=2, n_mc=2000)
after = ({k: os.environ.get(k) for k in keys}, jax.config.jax_compilation_cache_dir, jax.config.jax_enable_x64,
         gc.get_threshold())
f = jax.jit(lambda x: eqx.error_if(x, x < 0, "negative"))
try:
    jax.block_until_ready(f(-1.0))
    raised = False
except Exception:
    raised = True
print(json.dumps({"same": before == after, "refused": refused, "raised": raised, "passed": run.passed,
                  "dask_array": "dask.array" in sys.modules}))
"""


def test_attnlab_run_validates_like_the_command_line_and_leaves_the_process_as_it_was(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "EQX_ON_ERROR", "OMP_WAIT_POLICY")}
    res = subprocess.run([sys.executable, "-c", API_PROBE], cwd=tmp_path, capture_output=True, text=True, env=env,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    # a run's datasets hold NumPy arrays: xarray never imports dask.array for them (runtime.xarray_without_dask)
    assert got == {"same": True, "refused": [True] * 5, "raised": True, "passed": True, "dask_array": False}, got
