"""Validated experiment configs (pydantic) and ``--set key=value`` overrides.

Every preset's config is a frozen pydantic model that forbids unknown fields. :func:`validate_config` builds one from
base values and the user's overrides and turns any validation error into one :class:`~attnlab.errors.AttnlabError`
line naming the key; :func:`attnlab.registry.resolve_config` is the one function that merges a preset's defaults,
quick sizes and overrides through it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pydantic

from attnlab.errors import AttnlabError

__all__ = ["ExperimentConfig", "parse_value", "parse_set", "validate_config", "config_hash"]


class ExperimentConfig(pydantic.BaseModel):
    """Base class of preset configs: frozen, no unknown fields, values validated on assignment."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", validate_default=True)


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        lowered = text.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        return text


def parse_set(pairs: list[str] | None) -> dict[str, Any]:
    """Parse ``["key=value", ...]``; values are read as JSON when they parse (numbers, booleans, lists), else as text."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise AttnlabError(f"malformed --set {pair!r}: expected key=value")
        out[key] = parse_value(value.strip())
    return out


def _first_error(err: pydantic.ValidationError) -> str:
    e = err.errors()[0]
    loc = ".".join(str(x) for x in e["loc"]) or "config"
    return f"invalid value for {loc!r}: {e['msg']} (got {e.get('input')!r})"


def validate_config(cls: type[ExperimentConfig], base: dict[str, Any] | None, overrides: dict[str, Any]):
    """Build ``cls`` from its field defaults, then ``base`` (a preset's defaults and quick sizes), then the user's
    ``overrides`` (whose keys must be fields of ``cls``)."""
    known = set(cls.model_fields)
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise AttnlabError(f"unknown config key {unknown[0]!r} (known keys: {', '.join(sorted(known))})")
    values = {**(base or {}), **overrides}
    try:
        return cls(**values)
    except pydantic.ValidationError as err:
        raise AttnlabError(_first_error(err)) from None


def config_hash(preset: str, config: ExperimentConfig, seed: int, implementations: dict[str, str] | None = None) -> str:
    """Short stable hash of the resolved config, the preset name, the seed and the implementation of each kernel
    (when the preset has any): names the run directory."""
    record = {"preset": preset, "config": config.model_dump(mode="json"), "seed": seed}
    if implementations:
        record["implementations"] = dict(sorted(implementations.items()))
    blob = json.dumps(record, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:10]
