"""Validated experiment configs (pydantic) and ``--set key=value`` overrides.

Every preset's config is a frozen pydantic model that forbids unknown fields. :func:`validate_config` builds one from
base values and the user's overrides and turns any validation error into one :class:`~attnlab.errors.AttnlabError`
line naming the key; :func:`attnlab.registry.resolve_config` is the one function that merges a preset's defaults,
quick sizes and overrides through it.

Two rules hold for every config, whatever its fields:

* **finite numbers**: no float field (nor any float inside a tuple field) may be NaN, and none may be infinite unless
  the field allows it: declared with ``pydantic.Field(..., allow_inf_nan=True)``, or (the convention of the
  duranthon configs) with a description that says "inf allowed". NaN is never allowed;
* **strict booleans**: ``true``/``false`` is not a number: a boolean given to a field (or tuple item) whose type
  has no ``bool`` in it is rejected, instead of being read as 1 or 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import typing
from typing import Any

import pydantic

from attnlab.errors import AttnlabError

__all__ = ["ExperimentConfig", "MAX_SEED", "check_seed", "parse_value", "parse_set", "validate_config", "config_hash"]

MAX_SEED = 2**63 - 1
"""The largest root seed: ``jax.random.key`` takes a signed 64-bit integer."""


def check_seed(seed: Any) -> int:
    """``seed`` as a root seed, or a one-line :class:`~attnlab.errors.AttnlabError`: an integer (not a boolean) in
    ``0..MAX_SEED``. The command line, the sweeps and :func:`attnlab.run` validate seeds with this one function."""
    import numbers

    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise AttnlabError(f"invalid seed {seed!r}: must be an integer in 0..{MAX_SEED}")
    return int(seed)


class ExperimentConfig(pydantic.BaseModel):
    """Base class of preset configs: frozen, no unknown fields, values validated on assignment."""

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", validate_default=True)

    @pydantic.model_validator(mode="before")
    @classmethod
    def _no_bool_as_number(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name, value in data.items():
                info = cls.model_fields.get(name)
                if info is not None and not _accepts_bool(info.annotation) and _has_bool(value):
                    raise ValueError(f"invalid value for {name!r}: a boolean is not a number (got {value!r})")
        return data

    @pydantic.model_validator(mode="after")
    def _finite_numbers(self):
        for name, info in type(self).model_fields.items():
            bad = _first_non_finite(getattr(self, name))
            if bad is None:
                continue
            if math.isinf(bad) and _allows_inf(info):
                continue
            raise ValueError(f"invalid value for {name!r}: numbers must be finite (got {bad})")
        return self


def _accepts_bool(annotation) -> bool:
    """Whether ``bool`` (or ``Any``, or a literal True/False) occurs anywhere in a field's type."""
    if annotation is bool or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _accepts_bool(typing.get_args(annotation)[0])
    return any(_accepts_bool(a) for a in typing.get_args(annotation) if a is not Ellipsis)


def _has_bool(value) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_bool(v) for v in value)
    return False


def _first_non_finite(value) -> float | None:
    """The first NaN or infinite float in ``value`` (a number or nested tuples/lists), else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, (list, tuple)):
        for v in value:
            bad = _first_non_finite(v)
            if bad is not None:
                return bad
    return None


def _allows_inf(info) -> bool:
    if any(getattr(m, "allow_inf_nan", None) is True for m in info.metadata):
        return True
    return "inf allowed" in (info.description or "")


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
    loc = ".".join(str(x) for x in e["loc"])
    msg = " ".join(str(e["msg"]).split())  # one line
    if not loc:  # a model validator: its message names the field(s)
        msg = msg.removeprefix("Value error, ")
        return msg if msg.startswith("invalid value for ") else f"invalid config: {msg}"
    got = " ".join(repr(e.get("input")).split())
    if len(got) > 200:
        got = got[:200] + "..."
    return f"invalid value for {loc!r}: {msg} (got {got})"


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
