"""What ``attnlab list`` and ``attnlab show`` print, served from a cache so that they import neither JAX nor the papers.

The catalogue -- per preset its name, paper, citation, figure, description and the config fields table of
:func:`attnlab.app.describe.config_fields` -- is written as JSON to ``catalogue-KEY.json`` in the cache directory
(``$ATTNLAB_CACHE_DIR``, default ``~/.cache/attnlab``). The key (:func:`cache_key`) is computed without importing
any paper, from :mod:`importlib.metadata` and the source files alone: the Python version (major.minor), attnlab's
version, the versions of pydantic and annotated_types (how a field's type reads), the entry points of the group
``attnlab.presets``, the metadata as written (name, version, entry points) of every other distribution declaring
one, and a digest of the content of every Python source file of the top-level packages those entry points live in
(attnlab's own always): editing a source file gives a new key, as does installing, upgrading or removing a plugin.

attnlab ships the catalogue of its own presets (:data:`SHIPPED`, written by :func:`write_shipped`, ``make
catalogue``) under the key of an environment holding attnlab alone: where no plugin is installed and the sources
are those it was written from, the first ``attnlab list`` of a new cache directory reads it and imports no paper.

When the file for the key is missing, unreadable or malformed, the catalogue is built as before (every entry point
loaded, a broken plugin's one-line warning printed) and written atomically (a temporary file renamed into place);
it is not written when a load printed a warning, so that a broken plugin is loaded, and reported, again next time.
A cache that cannot be written (a read-only home) costs nothing but the speed. In a process that has already
imported :mod:`attnlab.registry` (a test, a notebook, a plugin registering presets by hand), the live registry is
read instead and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from attnlab.app.describe import FieldInfo
from attnlab.errors import AttnlabError

__all__ = ["Entry", "SHIPPED", "basis", "cache_dir", "cache_key", "cache_path", "source_digest", "presets", "describe",
           "own_entries", "write_shipped"]

ENTRY_POINT_GROUP = "attnlab.presets"
""":data:`attnlab.registry.ENTRY_POINT_GROUP`, repeated here so that computing the key imports no NumPy (a test
checks that they agree)."""

FORMAT = 1
"""The layout of the cache file; a file of another format is ignored (and rebuilt)."""

SHIPPED = Path(__file__).with_name("catalogue.json")
"""The catalogue of attnlab's own presets, shipped with the package (written by :func:`write_shipped`): the file a
new cache directory's first ``attnlab list`` reads where no plugin is installed."""

KEEP = 8
"""How many catalogue files (of different keys: other environments, earlier sources) the cache directory keeps."""


@dataclass(frozen=True)
class Entry:
    """One preset as ``attnlab list`` and ``attnlab show`` print it. ``fields`` is None where the preset's config
    could not be resolved when the catalogue was built (``show`` then resolves it live, and says why it fails)."""

    name: str
    paper: str
    citation: str
    figure: str
    description: str
    fields: tuple[FieldInfo, ...] | None


def cache_dir() -> Path:
    """``$ATTNLAB_CACHE_DIR`` when set and not empty, else ``~/.cache/attnlab``."""
    env = os.environ.get("ATTNLAB_CACHE_DIR", "").strip()
    return Path(env).expanduser() if env else Path.home() / ".cache" / "attnlab"


def source_digest(package: str) -> str:
    """A digest of the relative path and content of every ``.py`` file of the top-level package ``package`` (found,
    not imported), or a line saying it was not found."""
    from importlib.util import find_spec

    try:
        spec = find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "not found"
    roots = list(spec.submodule_search_locations or ()) or ([spec.origin] if spec.origin else [])
    digest = hashlib.sha256()
    for root in roots:
        if os.path.isfile(root):
            paths = [root]
        else:
            paths = []
            for here, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
                paths += [os.path.join(here, f) for f in sorted(files) if f.endswith(".py")]
        for path in paths:
            rel = os.path.relpath(path, os.path.dirname(root)) if not os.path.isfile(root) else os.path.basename(path)
            try:
                content = Path(path).read_bytes()
            except OSError:
                content = b"unreadable"
            digest.update(f"{rel}\0{len(content)}\0".encode())
            digest.update(content)
    return digest.hexdigest()


def _version(dist: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _dist_name(ep) -> str:
    """The name of the distribution declaring ``ep`` (attnlab where none does: a source tree pip never installed)."""
    dist = getattr(ep, "dist", None)
    return (getattr(dist, "name", None) or "attnlab") if dist is not None else "attnlab"


def basis() -> dict[str, str]:
    """What the key holds besides the entry points and the sources: the versions of Python, attnlab, pydantic and
    annotated_types."""
    import attnlab

    return {"format": str(FORMAT), "python": f"{sys.implementation.name} {sys.version_info[0]}.{sys.version_info[1]}",
            "attnlab": attnlab.__version__, **{dist: _version(dist) for dist in ("pydantic", "annotated_types")}}


def cache_key(*, own_only: bool = False) -> str:
    """The key of the catalogue of this environment: it changes whenever the catalogue may (see the module's doc).
    ``own_only``: the key of this environment with its plugins left out (attnlab's own entry points alone), the key
    :data:`SHIPPED` is written under."""
    from importlib import metadata

    parts = [f"{k} {v}" for k, v in basis().items()]  # pydantic and annotated_types: how a field's type reads
    packages, dists, seen = {"attnlab"}, {}, set()
    for ep in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: (ep.name, ep.value)):
        name = _dist_name(ep)
        if (own_only and name != "attnlab") or (ep.name, ep.value) in seen:
            continue
        seen.add((ep.name, ep.value))  # a distribution seen twice on sys.path counts once, as in the registry
        parts.append(f"entry point {ep.name}={ep.value}")
        packages.add(ep.value.split(":", 1)[0].split(".", 1)[0].strip())
        dist = getattr(ep, "dist", None)
        if dist is not None and name != "attnlab" and name not in dists:
            dists[name] = dist
            # the distribution's metadata and entry points as written (its name and version, unparsed: cheaper)
            parts += [f"{name} {file}: {dist.read_text(file)}" for file in ("METADATA", "entry_points.txt")]
    parts += [f"{package}: {source_digest(package)}" for package in sorted(packages)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:20]


def cache_path(key: str | None = None) -> Path:
    return cache_dir() / f"catalogue-{key or cache_key()}.json"


# --- reading and writing ------------------------------------------------------------------------------------------

def _entry_from(d: dict) -> Entry:
    fields = d["fields"]
    if fields is not None:
        fields = tuple(FieldInfo(**{k: str(f[k]) for k in FieldInfo.__dataclass_fields__}) for f in fields)
    texts = {k: d[k] for k in ("name", "paper", "citation", "figure", "description")}
    if not all(isinstance(v, str) for v in texts.values()):
        raise TypeError("a preset's text is not a string")
    return Entry(**texts, fields=fields)


def _read(path: Path, key: str) -> list[Entry] | None:
    """The catalogue in ``path``, or None when it is missing, unreadable or not what :func:`_write` writes."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != FORMAT or data.get("key") != key:
            return None
        return [_entry_from(d) for d in data["presets"]]
    except Exception:  # missing, truncated, edited by hand: rebuilt
        return None


def _as_dict(e: Entry) -> dict:
    return {**asdict(e), "fields": None if e.fields is None else [asdict(f) for f in e.fields]}


def _write(path: Path, key: str, entries: list[Entry]) -> None:
    """Write the catalogue atomically (a temporary file beside it, renamed into place); never raises. Keeps the
    :data:`KEEP` most recent catalogue files of the directory."""
    data = {"format": FORMAT, "key": key, "presets": [_as_dict(e) for e in entries]}
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache directory: the next call builds the catalogue again
        return
    finally:
        try:
            tmp.unlink()
        except OSError:
            pass
    try:
        old = sorted(path.parent.glob("catalogue-*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[KEEP:]
        for p in old:
            if p != path:
                p.unlink()
    except OSError:
        pass


# --- the catalogue ------------------------------------------------------------------------------------------------

def _fields(preset) -> tuple[FieldInfo, ...] | None:
    from attnlab.app.describe import config_fields

    try:
        return tuple(config_fields(preset))
    except Exception:  # a plugin's preset whose config does not resolve: 'show' resolves it live, and says why
        return None


def _entry(preset, fields=True) -> Entry:
    return Entry(preset.name, preset.paper, preset.citation, preset.figure, preset.description,
                 _fields(preset) if fields else None)


def _live() -> bool:
    """Whether this process already has the registry (then it is read, never the cache: presets registered by hand
    are in it and in no cache)."""
    return "attnlab.registry" in sys.modules


def _build(prepare: Callable[[], None] | None) -> list[Entry]:
    """Load every entry point, as :func:`attnlab.registry.all_presets` does, and write the cache unless a load
    printed a warning."""
    key = cache_key()
    if prepare is not None:
        prepare()
    from attnlab import registry

    warned = len(registry.WARNINGS)
    entries = [_entry(p) for p in registry.all_presets().values()]
    if len(registry.WARNINGS) == warned:
        _write(cache_path(key), key, entries)
    return entries


def _cached() -> list[Entry] | None:
    """The catalogue of this environment's key: the cache directory's, else the shipped one (whose key is that of
    attnlab alone, so it is read only where no plugin is installed), else None."""
    key = cache_key()
    found = _read(cache_path(key), key)
    return found if found is not None else _read(SHIPPED, key)


def own_entries() -> list[Entry]:
    """The catalogue of attnlab's own presets, built from the live registry (a plugin's presets left out)."""
    from attnlab.registry import PAPERS, all_presets

    return [_entry(p) for p in all_presets().values() if p.paper in PAPERS]


def write_shipped(path: Path = SHIPPED, key: str | None = None) -> Path:
    """Write :data:`SHIPPED` (or ``path``): :func:`own_entries` under ``key`` (default :func:`cache_key`
    ``(own_only=True)``, that of attnlab alone), with the digest of attnlab's sources it was built from (a test
    checks that both still hold)."""
    key = key or cache_key(own_only=True)
    data = {"format": FORMAT, "key": key, "sources": source_digest("attnlab"), "basis": basis(),
            "presets": [_as_dict(e) for e in own_entries()]}
    path.write_text(json.dumps(data, ensure_ascii=False, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return path


def presets(prepare: Callable[[], None] | None = None) -> list:
    """Every preset, in the catalogue's order: objects with ``name``, ``paper``, ``citation``, ``figure`` and
    ``description`` (the presets themselves in a process that has the registry). ``prepare`` is called before the
    papers are imported, when they are."""
    if _live():
        if prepare is not None:
            prepare()
        from attnlab.registry import all_presets

        return list(all_presets().values())
    cached = _cached()
    return cached if cached is not None else _build(prepare)


def describe(name: str, prepare: Callable[[], None] | None = None) -> tuple[object, list[FieldInfo]]:
    """The preset ``name`` (as :func:`presets` gives it) and its config fields. An unknown name raises the one-line
    :class:`~attnlab.errors.AttnlabError` of :func:`attnlab.registry.get_preset`."""
    if not _live():
        entries = _cached()
        if entries is None:
            entries = _build(prepare)
        found = next((e for e in entries if e.name == name), None)
        if found is not None and found.fields is not None:
            return found, list(found.fields)
        if found is None:
            raise AttnlabError(f"unknown preset {name!r} (run 'attnlab list' to see them)")
    if prepare is not None:
        prepare()
    from attnlab.app.describe import config_fields
    from attnlab.registry import get_preset

    preset = get_preset(name)
    return preset, config_fields(preset)
