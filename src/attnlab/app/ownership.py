"""What attnlab owns on disk, and the only places it writes: manifests, folder marks, temporaries and locks.

attnlab never deletes nor overwrites a file it did not write. It knows its own files by these records:

* **a run directory's manifest** (``.attnlab-manifest.json``): the names of the entries the run wrote
  (``config.json``, ``data.zarr``, ``summary.json``, the figures). Replacing a run (``--force``) removes those
  entries and no other; a run written before manifests existed is recognised by its ``config.json`` (with a
  ``config_hash``) and ``summary.json``, its own entries being those and ``data.zarr`` and the figures its summary
  names;
* **a folder's mark** (``.attnlab-folder.json``): a folder of ``reproduce`` or ``sweep`` that attnlab created or
  adopted while it was empty. Such a folder may hold the user's files beside attnlab's; a folder without the mark is
  used only when every entry in it is recognisably attnlab's (finished runs, sweeps, reports it wrote);
* **temporaries**: directories named ``.NAME.attnlab-tmp-XXXXXXXX`` (beside a new run directory) or
  ``.attnlab-tmp-XXXXXXXX`` (inside an existing one), each holding the file ``.attnlab-temporary`` from the moment
  it is made; clean-up removes only directories with both the name and that file, and never one whose run is being
  written (its lock is held);
* **locks**: one ``flock`` per output path (resolved, so a symbolic link and its target share it), in a directory
  of the system's temporary folder, never in the user's folders. A second writer to the same path is refused in one
  line (``attnlab run``) or waits (a sweep's task, which then reuses the finished run).

A symbolic link or a mount point given as an output directory is a directory to write into: a run into an existing
directory is assembled in a temporary directory inside it and its entries are moved into place one by one,
``summary.json`` last, so that the directory looks finished only when it is.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from attnlab.errors import AttnlabError

__all__ = ["MANIFEST", "FOLDER_MARK", "TEMPORARY_MARK", "REPORT_SIGNATURE", "new_temporary", "is_temporary",
           "owned_entries", "foreign_entries", "is_attnlab_run", "write_manifest", "commit_into", "writer_lock",
           "check_writable", "folder_foreign_entries", "mark_folder", "is_attnlab_report", "remove_stale_temporaries",
           "check_output_folder", "output_folder", "all_chunks_written"]

MANIFEST = ".attnlab-manifest.json"
FOLDER_MARK = ".attnlab-folder.json"
TEMPORARY_MARK = ".attnlab-temporary"
REPORT_SIGNATURE = "<!-- written by attnlab reproduce: the next reproduce into this folder replaces it -->"
_LEGACY_REPORT_HEADS = ("# attnlab reproduction report", "<!doctype html>")
_TMP_RE = re.compile(r"^(?:\.(?P<name>.+)\.)?\.?attnlab-tmp-[0-9a-f]{8}$")
_RUN_FILES = ("config.json", "summary.json", "data.zarr")


# --- temporaries ---------------------------------------------------------------------------------------------------

def new_temporary(where: Path, name: str | None = None) -> Path:
    """Make a marked temporary directory in ``where``: ``.NAME.attnlab-tmp-XXXXXXXX`` for the run ``NAME`` beside
    it, or ``.attnlab-tmp-XXXXXXXX`` inside an existing run directory (``name`` None)."""
    token = uuid.uuid4().hex[:8]
    tmp = Path(where) / (f".{name}.attnlab-tmp-{token}" if name else f".attnlab-tmp-{token}")
    tmp.mkdir()
    (tmp / TEMPORARY_MARK).write_text("a temporary directory of attnlab: removed when its run ends\n")
    return tmp


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is a temporary directory of attnlab: its name and its mark file."""
    path = Path(path)
    return bool(_TMP_RE.match(path.name)) and path.is_dir() and not path.is_symlink() \
        and (path / TEMPORARY_MARK).is_file()


def _run_of_temporary(tmp: Path) -> Path:
    """The run directory a temporary belongs to: its sibling ``NAME`` or the directory holding it."""
    m = _TMP_RE.match(tmp.name)
    return tmp.parent / m.group("name") if m and m.group("name") else tmp.parent


def remove_stale_temporaries(root: Path, depth: int = 3) -> int:
    """Remove the temporaries of runs that were killed, under ``root`` up to ``depth`` levels down, skipping any whose
    run is being written now (its lock is held). Only attnlab's temporaries (:func:`is_temporary`) are touched."""
    root, n = Path(root), 0
    if not root.is_dir():
        return 0
    stack = [(root, 0)]
    while stack:
        here, level = stack.pop()
        try:
            entries = list(here.iterdir())
        except OSError:
            continue
        for entry in entries:
            if is_temporary(entry):
                if _key(_run_of_temporary(entry)) in _HELD:  # being written by this process
                    continue
                try:
                    with writer_lock(_run_of_temporary(entry), wait=False):
                        shutil.rmtree(entry, ignore_errors=True)
                        n += 1
                except AttnlabError:  # its run is being written
                    pass
            elif level < depth and entry.is_dir() and not entry.is_symlink() and not entry.name.startswith("."):
                stack.append((entry, level + 1))
    return n


# --- run directories ------------------------------------------------------------------------------------------------

def _read_json(path: Path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _safe_name(name) -> bool:
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _manifest(run_dir: Path) -> list[str] | None:
    record = _read_json(Path(run_dir) / MANIFEST)
    if not isinstance(record, dict) or not isinstance(record.get("entries"), list):
        return None
    return [e for e in record["entries"] if _safe_name(e)]


def _legacy_run(run_dir: Path) -> bool:
    cfg = _read_json(run_dir / "config.json")
    return isinstance(cfg, dict) and isinstance(cfg.get("config_hash"), str) and (run_dir / "summary.json").is_file()


def is_attnlab_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a run directory of attnlab: it has a manifest (a finished run, or one being replaced),
    or it is a finished run written before manifests (``config.json`` with a ``config_hash``, ``summary.json``)."""
    run_dir = Path(run_dir)
    return run_dir.is_dir() and (_manifest(run_dir) is not None or _legacy_run(run_dir))


def owned_entries(run_dir: Path) -> set[str]:
    """The names of the entries of ``run_dir`` that attnlab wrote (empty for a directory that is not a run)."""
    run_dir = Path(run_dir)
    listed = _manifest(run_dir)
    if listed is not None:
        return {*listed, MANIFEST}
    if not _legacy_run(run_dir):
        return set()
    summary = _read_json(run_dir / "summary.json")
    figures = summary.get("figures", []) if isinstance(summary, dict) else []
    preset = summary.get("preset") if isinstance(summary, dict) else None
    gif = [f"{preset}-evolution.gif"] if isinstance(preset, str) else []
    return {*_RUN_FILES, *(f for f in figures if _safe_name(f)), *gif}


def foreign_entries(run_dir: Path) -> list[str]:
    """The entries of the directory ``run_dir`` that attnlab did not write (its temporaries excepted), sorted."""
    run_dir = Path(run_dir)
    owned = owned_entries(run_dir)
    try:
        names = [p.name for p in run_dir.iterdir() if not is_temporary(p)]
    except OSError:
        return []
    return sorted(n for n in names if n not in owned)


def write_manifest(run_dir: Path, entries) -> None:
    """Write the manifest of ``run_dir`` atomically: ``entries`` are the names attnlab wrote there. It also says
    that ``data.zarr`` holds every chunk of every variable (the store writes chunks of fill values too), so that a
    missing chunk is damage (:func:`all_chunks_written`)."""
    run_dir = Path(run_dir)
    tmp = run_dir / f"{MANIFEST}.attnlab-tmp-{uuid.uuid4().hex[:8]}"
    tmp.write_text(json.dumps({"written_by": "attnlab", "entries": sorted(set(entries) - {MANIFEST}),
                               "all_chunks_written": True}, indent=1))
    os.replace(tmp, run_dir / MANIFEST)


def all_chunks_written(run_dir: Path) -> bool:
    """Whether the run's manifest says that its ``data.zarr`` holds every chunk (runs written before it said so may
    omit chunks of fill values, which zarr reads back as such)."""
    record = _read_json(Path(run_dir) / MANIFEST)
    return isinstance(record, dict) and record.get("all_chunks_written") is True


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def commit_into(tmp: Path, run_dir: Path) -> None:
    """Move the finished run assembled in ``tmp`` into ``run_dir``, replacing attnlab's own entries there and no
    other. A ``run_dir`` that does not exist is made by renaming ``tmp`` (one atomic step); into an existing
    directory (empty, a finished run, a symbolic link to a directory, a mount point) the manifest is written first
    (listing the old and the new entries), then ``summary.json`` is removed, the old entries, then the new ones are
    moved in with ``summary.json`` last. ``tmp`` is removed at the end; an ``OSError`` propagates with ``tmp`` left
    for the caller to keep."""
    tmp, run_dir = Path(tmp), Path(run_dir)
    new = sorted(p.name for p in tmp.iterdir() if p.name not in (TEMPORARY_MARK, MANIFEST))
    if not os.path.lexists(run_dir):
        write_manifest(tmp, new)
        (tmp / TEMPORARY_MARK).unlink()
        try:
            os.rename(tmp, run_dir)
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EXDEV):
                (tmp / TEMPORARY_MARK).write_text("")
                raise
            (tmp / TEMPORARY_MARK).write_text("")
    old = owned_entries(run_dir)
    clash = sorted(set(new) & set(foreign_entries(run_dir)))
    if clash:
        raise AttnlabError(f"{run_dir} holds {clash[0]!r}, which attnlab did not write and would replace: "
                           "move it, or choose another --out")
    write_manifest(run_dir, old | set(new))
    for name in ["summary.json", *sorted(old - {"summary.json", MANIFEST})]:
        if name in old:
            _remove(run_dir / name)
    for name in [*(n for n in new if n != "summary.json"), *(["summary.json"] if "summary.json" in new else [])]:
        os.rename(tmp / name, run_dir / name)
    write_manifest(run_dir, new)
    shutil.rmtree(tmp, ignore_errors=True)


# --- locks ---------------------------------------------------------------------------------------------------------

def _key(path: Path) -> str:
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(path)


_HELD: set[str] = set()
"""The output paths whose lock this process holds."""


def _lock_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"attnlab-locks-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


def _lock_file(path: Path) -> Path:
    """The lock file of the output ``path`` (resolved), named by its hash in :func:`_lock_dir`."""
    return _lock_dir() / f"{hashlib.sha256(_key(path).encode()).hexdigest()[:20]}.lock"


@contextlib.contextmanager
def writer_lock(path: Path, *, wait: bool = False, what: str = "writing to") -> Iterator[None]:
    """Hold the lock of the output ``path`` (resolved: a link and its target share one) for the block. With
    ``wait=False`` a lock held by another process raises :class:`AttnlabError` at once, in one line.

    The lock is an ``flock`` on a file of the temporary folder named by the path's hash; the holder removes the file
    before releasing it, so that no lock file outlives its writer. A process that locked a file another one had just
    removed finds that the name no longer leads to it (another inode, or none) and locks the file of that name
    again."""
    key = _key(path)
    if key in _HELD:  # this process holds it already (the command line around the store): re-entrant
        yield
        return
    name = _lock_file(path)
    directory = name.parent
    while True:
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:  # no lock to be had (a read-only temporary folder): go on unserialised
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            raise AttnlabError(f"another attnlab process is {what} {path}: run again when it has finished") from None
        try:
            current = os.stat(name).st_ino
        except OSError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)  # the holder before us removed this file: lock the one the name leads to now
    _HELD.add(key)
    try:
        yield
    finally:
        _HELD.discard(key)
        try:
            os.unlink(name)
        except OSError:
            pass
        os.close(fd)


# --- output locations ----------------------------------------------------------------------------------------------

def check_writable(path: Path) -> None:
    """Raise :class:`AttnlabError` (one line) unless ``path`` can be written: an existing directory writable by this
    process, or a new path whose nearest existing ancestor is such a directory (and no ancestor is a file)."""
    path = Path(path)
    probe = path
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    if os.path.lexists(probe) and not probe.is_dir():
        raise AttnlabError(f"cannot write to {path}: {probe} exists and is not a directory")
    target = probe if str(probe) else Path(".")
    if not os.access(target, os.W_OK | os.X_OK):
        ro = False
        try:
            ro = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            pass
        raise AttnlabError(f"cannot write to {path}: {target} is "
                           + ("on a read-only file system" if ro else "not writable (permission denied)"))


def is_attnlab_report(path: Path) -> bool:
    """Whether the report file ``path`` was written by attnlab (its signature, or the heading of older reports)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        return False
    return REPORT_SIGNATURE in head or head.lstrip().lower().startswith(_LEGACY_REPORT_HEADS) and "attnlab" in head


def _is_sweep_folder(path: Path) -> bool:
    return (path / FOLDER_MARK).is_file() or (path / "sweep.zarr").is_dir()


def _attnlab_entry(entry: Path) -> bool:
    """Whether a top-level entry of an unmarked output folder is recognisably attnlab's."""
    name = entry.name
    if is_temporary(entry) or name == FOLDER_MARK:
        return True
    if name in ("report.md", "report.html"):
        return is_attnlab_report(entry)
    if name == "sweep.zarr" or re.fullmatch(r"sweep-\w+\.(png|pdf)", name):
        return True
    if not entry.is_dir() or entry.is_symlink():
        return False
    if name == "sweeps":
        return all(_is_sweep_folder(p) for p in entry.iterdir())
    children = list(entry.iterdir())
    return bool(children) and all(is_temporary(c) or is_attnlab_run(c) for c in children)


def folder_foreign_entries(folder: Path) -> list[str]:
    """The entries of the output folder ``folder`` (of ``reproduce`` or ``sweep``) that make it not attnlab's: none
    for a missing or empty folder or one with attnlab's mark; else the top-level entries attnlab cannot recognise as
    its own. Reports that attnlab did not write are always listed: they are never replaced."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    try:
        entries = sorted(folder.iterdir())
    except OSError as e:
        raise AttnlabError(f"cannot read output folder {folder}: {e.strerror or e}") from None
    reports = [p.name for p in entries if p.name in ("report.md", "report.html") and p.exists()
               and not is_attnlab_report(p)]
    if (folder / FOLDER_MARK).is_file():
        return reports
    return sorted({*reports, *(p.name for p in entries if not _attnlab_entry(p))})


def mark_folder(folder: Path, kind: str) -> None:
    """Create ``folder`` if needed and write attnlab's mark in it (once)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mark = folder / FOLDER_MARK
    if not mark.exists():
        mark.write_text(json.dumps({"written_by": "attnlab", "kind": kind}) + "\n")


def check_output_folder(folder: Path) -> None:
    """Raise :class:`AttnlabError` (one line) unless ``folder`` may be the output folder of a ``reproduce`` or
    ``sweep``; writes nothing: a writable directory, or a new one that can be made, which is empty, marked as
    attnlab's, or holds nothing but what attnlab recognises as its own (:func:`folder_foreign_entries`); a report
    attnlab did not write is never replaced."""
    folder = Path(folder)
    if str(folder) == "":
        raise AttnlabError("empty --out: name a directory")
    for path in (folder, *folder.parents):
        if path.exists() and not path.is_dir():
            raise AttnlabError(f"cannot write to output directory {folder}: {path} exists and is not a directory")
    check_writable(folder)
    foreign = folder_foreign_entries(folder)
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise AttnlabError(f"output folder {folder} holds files attnlab did not write ({shown}): it is left "
                           "untouched; choose another --out")


@contextlib.contextmanager
def output_folder(folder: Path, kind: str) -> Iterator[None]:
    """Hold the lock of the output folder of a ``reproduce`` or ``sweep`` (``kind``) for the block (a second one into
    the same folder is refused in one line), after checking it again (:func:`check_output_folder`) and marking it as
    attnlab's; a folder made here and left empty (the command failed before writing anything) is removed again."""
    folder = Path(folder)
    with writer_lock(folder, what=f"running a {kind} into"):
        check_output_folder(folder)
        existed = folder.exists()
        try:
            mark_folder(folder, kind)
        except OSError as e:
            raise AttnlabError(f"cannot write to output directory {folder}: {e.strerror or e}") from None
        try:
            yield
        except BaseException:
            if not existed and sorted(p.name for p in folder.iterdir()) == [FOLDER_MARK]:
                (folder / FOLDER_MARK).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise
